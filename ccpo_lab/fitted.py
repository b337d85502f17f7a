"""Tables that keep every value at any terminal width.

A rich table narrower than its content shrinks its columns until values are cropped
(``comple…``) or a column is dropped, and rows can no longer be told apart. A table
wrapped by :func:`fitted` renders as itself where it fits the width (every value whole,
text columns wrapped at their spaces at most), and otherwise as one block per row: the
row's first value on a line of its own, then ``header value`` pairs, as many to a line as
fit and never split between lines. It decides at each rendering, so a live view follows a
resized terminal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_WIDE = 10**4
"""Width at which a table is measured to find the least it needs."""
FOLD_MIN = 12
"""Narrowest a ``fold`` column may become (an arm name folded over two lines reads)."""


class Fitted:
    """A rich table, or its rows as blocks where it does not fit (see the module
    docstring)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def needs(self, console: Any) -> int:
        """The least width at which the table shows every value whole: what its columns
        need, plus its padding and rules. A ``no_wrap`` column needs its widest value, a
        ``fold`` column at most :data:`FOLD_MIN` characters (its values folded), another
        column its longest word (wrapped at spaces). One pass over the cells."""
        import copy

        from rich.measure import Measurement

        options = console.options.update(width=_WIDE, max_width=_WIDE)
        least = 0
        headers = 0
        for col in self.table.columns:
            natural, word = _size(console, options, col.header)
            headers += natural
            for cell in col.cells:
                n, w = _size(console, options, cell)
                natural, word = max(natural, n), max(word, w)
            if col.no_wrap:
                least += natural
            elif col.overflow == "fold":
                least += min(natural, FOLD_MIN)
            else:
                least += word
        skeleton = copy.copy(self.table)  # the same settings, headers only: its rules
        skeleton.columns = [copy.copy(c) for c in self.table.columns]
        for c in skeleton.columns:
            c._cells = []
        skeleton.rows = []
        rules = Measurement.get(console, options, skeleton).maximum - headers
        return least + rules

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        if self.needs(console) <= options.max_width:
            yield self.table
            return
        yield from blocks(self.table, options.max_width)


def _size(console: Any, options: Any, cell: Any) -> tuple[int, int]:
    """A cell's natural width and its longest word."""
    from rich.cells import cell_len
    from rich.measure import Measurement
    from rich.text import Text

    if isinstance(cell, str | Text):
        text = cell.plain if isinstance(cell, Text) else cell
        lines = text.splitlines() or [""]
        return (max(cell_len(x) for x in lines),
                max((cell_len(w) for w in text.split()), default=0))
    m = Measurement.get(console, options, cell)
    return m.maximum, m.minimum


def fitted(table: Any) -> Fitted:
    """``table`` shown whole where it fits, else as one block per row."""
    return Fitted(table)


def _text(cell: Any) -> Any:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return Text(cell)
    return Text(str(cell))


def blocks(table: Any, width: int) -> Iterator[Any]:
    """The rows of ``table`` as blocks for a terminal ``width`` columns wide (its title
    first): the row's first value, then its other values as ``header value`` pairs
    indented by two, a pair that does not fit the line's end starting the next line."""
    from rich.padding import Padding
    from rich.text import Text

    if table.title:
        yield Text(str(table.title), overflow="fold")
    columns = list(table.columns)
    cells = [list(c.cells) for c in columns]
    room = max(width - 2, 1)
    for i in range(table.row_count):
        head = _text(cells[0][i]).copy()
        head.stylize("bold")
        head.overflow = "fold"
        yield head
        lines: list[Any] = []
        line = Text(overflow="fold")
        for col, values in zip(columns[1:], cells[1:], strict=True):
            value = _text(values[i])
            if not value.plain:
                continue
            item = Text.assemble((str(col.header), "dim"), " ", value)
            if line.plain and len(line) + 2 + len(item) > room:
                lines.append(line)
                line = Text(overflow="fold")
            if line.plain:
                line.append("  ")
            line.append_text(item)
        if line.plain:
            lines.append(line)
        for x in lines:
            yield Padding(x, (0, 0, 0, 2))
