"""``metrics.jsonl``: one ``{"step": N, "data": {name: value}}`` object per line.

The format of verl's ``FileLogger`` (``VERL_FILE_LOGGER_PATH``), so runs of both backends,
and imported verl runs, read the same. Writes append and flush (and fsync) per step; a
resumed run first drops the rows after its checkpoint so no row is lost or duplicated.

Reading is strict and streamed, and every reader says what it could not use:

* a line is a row when it is UTF-8 JSON of that shape with an integer step in
  ``[0, MAX_STEP]``; any other line is a :class:`LineProblem` (file, line, why);
* a last line without its newline is a write in progress or cut off by a crash: never a
  row, reported as :attr:`MetricsScan.partial`;
* a value is usable when it is a finite number, and a proportion (a success rate) one in
  [0, 1] (:func:`value_problem`); JSON ``null`` is how the writers record a non-finite
  value;
* the file is opened through the run-file gateway (:mod:`ccpo_lab.runs.files`): inside the
  sweep directory, a regular file, read a chunk at a time; a line longer than
  :data:`~ccpo_lab.runs.files.MAX_LINE` is a :class:`LineProblem`, skipped unread.

:class:`MetricsScan` streams a file (bounded memory, any size); :func:`read_metrics` is the
strict all-rows reader; :func:`tail_metrics` follows a growing file and reads only what
was appended since its last call in the process (``status --watch``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.runs.files import Cut, excerpt, open_file, read_lines

MAX_STEP = 2**31 - 1
"""Largest step a metrics file may hold (steps fit every integer type that reads them)."""

fast_loads: Callable[[bytes], Any]
"""JSON from bytes: orjson's (verl's file logger writes with it; 6x faster), else json's.
orjson refuses what JSON does not allow (``NaN``, invalid UTF-8); :func:`parse_row` then
asks json to say why."""
try:
    from orjson import loads as fast_loads
except ImportError:  # pragma: no cover - json is the fallback
    fast_loads = json.loads


@dataclass(frozen=True)
class LineProblem:
    """A line of a metrics file that is not used, and why."""

    path: Path
    """The file."""
    line: int
    """Its line number (1-based)."""
    why: str
    """What is wrong, for a person."""

    def __str__(self) -> str:
        return f"{self.path}: line {self.line}: {self.why}"


class MetricsFormatError(ValueError):
    """A metrics file with a line that is not a row (its first such line, and how many)."""

    def __init__(self, problem: LineProblem, more: int = 0) -> None:
        self.problem = problem
        self.more = more
        tail = f" (and {more} more line{'s' if more > 1 else ''} not usable)" if more else ""
        super().__init__(f"{problem}{tail}")


@dataclass(frozen=True)
class Row:
    """One row of a metrics file."""

    line: int
    """Line number (1-based)."""
    step: int
    """Training step."""
    data: dict[str, Any]
    """Metric name -> value, as logged (see :func:`value_problem`)."""


class BadLine(ValueError):
    """Why one line is not a row (raised by :func:`parse_row`)."""


def _diagnose(raw: bytes) -> Any:
    """The JSON of a line orjson refused: invalid UTF-8, not JSON, or (accepted here)
    the ``NaN``/``Infinity`` literals Python's json writes, left to :func:`value_problem`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadLine(f"invalid UTF-8 (byte {raw[e.start:e.start + 1]!r} at column "
                      f"{e.start + 1}): {excerpt(raw)}") from None
    try:
        return json.loads(text)
    except ValueError:
        raise BadLine(f"not JSON (cut off or edited?): {excerpt(raw)}") from None


def parse_row(raw: bytes) -> tuple[int, dict[str, Any]]:
    """``(step, data)`` of one line (without its newline); :class:`BadLine` otherwise."""
    try:
        obj = fast_loads(raw)
    except ValueError:
        obj = _diagnose(raw)
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
        raise BadLine(f'expected {{"step": N, "data": {{...}}}}, got {excerpt(raw)}')
    step = obj.get("step")
    if isinstance(step, float) and step.is_integer() and abs(step) > MAX_STEP:
        raise BadLine(f"step {step:.6g} out of range [0, {MAX_STEP}]")  # orjson: big ints
    if not isinstance(step, int) or isinstance(step, bool):
        raise BadLine(f"step is not an integer: {excerpt(raw)}")
    if not 0 <= step <= MAX_STEP:
        raise BadLine(f"step {step} out of range [0, {MAX_STEP}]")
    return step, obj["data"]


def is_proportion(name: str) -> bool:
    """Whether metric ``name`` is a proportion: a success rate (``*success_rate``), logged
    as a fraction in [0, 1] (the report shows it in percent and gives its binomial se)."""
    return name.endswith("success_rate")


EPISODE_COUNT = "val/n_episodes"
"""The metric that counts held-out episodes per evaluation (a positive integer)."""


def value_problem(value: Any, name: str | None = None) -> str | None:
    """Why ``value`` is not a usable value of metric ``name`` (None when it is).

    Every value must be a finite number; a proportion (:func:`is_proportion`) must lie in
    [0, 1], and :data:`EPISODE_COUNT` must be a positive integer, so that no reader treats
    1.7 as a success rate of 170%.
    """
    if value is None:
        return "no value (null: the value was not a finite number when it was logged)"
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            ok = math.isfinite(value)
        except OverflowError:  # an integer beyond float range
            ok = False
        if not ok:
            return f"not a finite number ({value!r})"
        if name is not None and is_proportion(name) and not 0 <= value <= 1:
            return f"{value!r} is not a proportion in [0, 1] (a success rate is a fraction)"
        if name == EPISODE_COUNT and not (value >= 1 and float(value).is_integer()):
            return f"{value!r} is not a number of episodes (a positive integer)"
        return None
    return f"not a number ({excerpt(json.dumps(value).encode(), 40)})"


class MetricsScan:
    """One streaming pass over a metrics file: its rows, and the lines that are not.

    Iterate to get the :class:`Row` objects in file order; afterwards :attr:`problems`
    holds every line that is not a row (at most ``keep`` of them, :attr:`n_problems`
    counts all), :attr:`partial` a cut-off last line, :attr:`offset` the end of the last
    complete line and :attr:`lines` the complete lines read. ``start``/``line`` resume a
    pass at a line boundary (see :func:`tail_metrics`). A missing file has no rows.

    The file is opened through the run-file gateway (:func:`ccpo_lab.runs.files.open_file`)
    with ``root`` the sweep directory it must stay inside (default: its own directory); a
    file it refuses (a link out of the sweep, a FIFO) raises its
    :class:`~ccpo_lab.runs.files.RunFileError` on iteration. A line longer than
    :data:`~ccpo_lab.runs.files.MAX_LINE` is a problem, skipped without being held.
    """

    def __init__(self, path: str | Path, *, start: int = 0, line: int = 0,
                 keep: int = 20, root: str | Path | None = None) -> None:
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path.parent
        self.start = start
        self.offset = start
        self.lines = line
        self.keep = keep
        self.problems: list[LineProblem] = []
        self.n_problems = 0
        self.partial: LineProblem | None = None
        self.partial_long = False
        """The cut-off last line is longer than the line bound (not a write in progress:
        damage, such as the NUL bytes a power loss leaves)."""
        self.size = 0

    def problem(self, line: int, why: str) -> None:
        """Record a line that is not used."""
        self.n_problems += 1
        if len(self.problems) < self.keep:
            self.problems.append(LineProblem(self.path, line, why))

    def __iter__(self) -> Iterator[Row]:
        try:
            f = open_file(self.path, self.root)
        except FileNotFoundError:
            return
        with f:
            f.seek(self.start)
            for raw in read_lines(f):
                if type(raw) is Cut:
                    if not raw.ended:
                        if raw.long or raw.head.strip():
                            self.partial = LineProblem(self.path, self.lines + 1,
                                                       raw.why())
                            self.partial_long = raw.long
                        break
                    self.lines += 1
                    self.offset += raw.size + 1
                    self.problem(self.lines, raw.why())
                    continue
                assert isinstance(raw, bytes)
                self.lines += 1
                self.offset += len(raw) + 1
                body = raw.rstrip(b"\r")
                if not body.strip():
                    continue
                try:
                    step, data = parse_row(body)
                except BadLine as e:
                    self.problem(self.lines, str(e))
                    continue
                yield Row(self.lines, step, data)
            self.size = f.tell()

    def error(self) -> MetricsFormatError | None:
        """The first problem as an exception (None when every complete line is a row)."""
        if not self.problems:
            return None
        return MetricsFormatError(self.problems[0], self.n_problems - 1)


def _clean(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        v = float(value)
        return v if math.isfinite(v) else None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def format_row(step: int, data: Mapping[str, Any]) -> str:
    """One line of ``metrics.jsonl`` (without its newline); non-finite values as null."""
    return json.dumps({"step": int(step), "data": {k: _clean(v) for k, v in data.items()}},
                      sort_keys=True)


def append_metrics(path: str | Path, step: int, data: Mapping[str, Any]) -> None:
    """Append one row (``step``, ``data``) to ``path``, flushed and fsynced.

    A last line without its line end (a writer killed mid-write) is dropped first: the
    row would otherwise run into it and both be lost as one line that is not JSON.
    """
    line = (format_row(step, data) + "\n").encode("utf-8")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a+b") as f:
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                f.truncate(_last_line_end(f, end))
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def _last_line_end(f: Any, end: int) -> int:
    """Offset just after the last line end before ``end`` of binary file ``f`` (0: none)."""
    pos = end
    while pos > 0:
        start = max(0, pos - (1 << 16))
        f.seek(start)
        i = f.read(pos - start).rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


def read_metrics(path: str | Path, root: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows of a metrics file (``{"step": N, "data": {...}}``), in file order; [] if missing.

    A last line without its newline is a write cut off and is ignored; any other line that
    is not a row raises :class:`MetricsFormatError` naming it. Values are as logged.
    ``root``: the directory the file must stay inside (:class:`MetricsScan`).
    """
    scan = MetricsScan(path, keep=1, root=root)
    rows = [{"step": r.step, "data": r.data} for r in scan]
    err = scan.error()
    if err is not None:
        raise err
    return rows


def truncate_metrics(path: str | Path, last_step: int) -> int:
    """Keep only rows with ``step <= last_step`` (atomic rewrite, only when something
    changes); return rows dropped. Streamed: memory does not grow with the file or its
    longest line (a cut-off last line, the NUL bytes of a power loss included, is dropped).

    Raises:
        MetricsFormatError: a complete line that is not a row (the file is left as it is).
    """
    import filecmp

    from ccpo_lab.atomic import temp_file

    p = Path(path)
    if not p.is_file():
        return 0
    scan = MetricsScan(p, keep=1)
    dropped = 0
    fd, tmp = temp_file(p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for r in scan:
                if r.step > last_step:
                    dropped += 1
                    continue
                out.write(json.dumps({"step": r.step, "data": r.data}, sort_keys=True) + "\n")
            err = scan.error()
            if err is not None:
                raise err
            out.flush()
            os.fsync(out.fileno())
        if filecmp.cmp(tmp, p, shallow=False):
            os.unlink(tmp)
        else:
            os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dropped


def series(rows: Iterable[Mapping[str, Any]], name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of metric ``name``: int (n,), float (n,), sorted by step.

    A step logged twice keeps its last value; values that are not usable (not finite
    numbers, proportions outside [0, 1]) are left out (readers that must say so use
    :func:`value_problem`).
    """
    by_step: dict[int, float] = {}
    for r in rows:
        v = r["data"].get(name)
        if v is not None and value_problem(v, name) is None:
            by_step[int(r["step"])] = float(v)
    steps = np.array(sorted(by_step), dtype=np.int64)
    return steps, np.array([by_step[s] for s in steps], dtype=np.float64)


def metric_names(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every metric name that appears, sorted."""
    names: set[str] = set()
    for r in rows:
        names.update(r["data"])
    return sorted(names)


@dataclass
class MetricsTail:
    """What ``status`` shows of a metrics file: the last step, the last value of a metric,
    and the lines it could not use. Kept per file by :func:`tail_metrics`."""

    metric: str
    """The metric followed."""
    last_step: int = 0
    """Largest step of a row (0 when none)."""
    last_value: float | None = None
    """Value of :attr:`metric` in the last row that has a usable one."""
    problems: list[LineProblem] = field(default_factory=list)
    """Lines not used (at most 20), :attr:`metric` values not usable included."""
    n_problems: int = 0
    """How many lines were not used."""
    partial: LineProblem | None = None
    """A cut-off last line (a write in progress while the run goes on)."""
    offset: int = 0
    """Bytes read (the end of the last complete line)."""
    lines: int = 0
    """Complete lines read."""
    identity: tuple[int, int] = (0, 0)
    """(device, inode) of the file read."""
    partial_long: bool = False
    """The cut-off last line is longer than the line bound (damage, not a write)."""

    @property
    def note(self) -> str:
        """One line for ``status`` ('' when every line is used; a cut-off last line is
        said only when it is longer than the line bound: otherwise it is a write in
        progress)."""
        out = []
        if self.problems:
            more = self.n_problems - 1
            out.append(f"metrics line not used: {self.problems[0]}"
                       + (f" (and {more} more)" if more else ""))
        if self.partial is not None and self.partial_long:
            out.append(f"metrics line not used: {self.partial}")
        return "; ".join(out)


_TAILS: dict[tuple[Path, str], MetricsTail] = {}
_ABSENT = object()


def tail_metrics(path: str | Path, metric: str, root: str | Path | None = None
                 ) -> MetricsTail:
    """The last step and last ``metric`` value of a metrics file, reading only the bytes
    appended since the previous call for the same file in this process (a file that was
    replaced or shrank is read again from the start). Memory stays bounded whatever the
    file's size and its longest line. ``root``: the directory the file must stay inside
    (:class:`MetricsScan`; a file it refuses raises its ``RunFileError``).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        _TAILS.pop((p, metric), None)
        return MetricsTail(metric)
    key = (p, metric)
    old = _TAILS.get(key)
    ident = (st.st_dev, st.st_ino)
    if old is None or old.identity != ident or st.st_size < old.offset:
        old = MetricsTail(metric, identity=ident)
    scan = MetricsScan(p, start=old.offset, line=old.lines, keep=20, root=root)
    scan.problems, scan.n_problems = old.problems, old.n_problems
    last_step, last_value = old.last_step, old.last_value
    for row in scan:
        last_step = max(last_step, row.step)
        v = row.data.get(metric, _ABSENT)
        if v is _ABSENT:
            continue
        why = value_problem(v, metric)
        if why is None:
            last_value = float(v)
        else:
            scan.problem(row.line, f"{metric}: {why}")
    new = MetricsTail(metric, last_step, last_value, scan.problems, scan.n_problems,
                      scan.partial, scan.offset, scan.lines, ident, scan.partial_long)
    _TAILS[key] = new
    return new

