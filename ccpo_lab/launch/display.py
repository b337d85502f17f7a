"""Rendering run status: the status table, failure details, a watch loop, and the
:class:`StatusMonitor` a launcher shows while it waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.launch.status import RunStatus, collect_status, counts, format_elapsed, tail
from ccpo_lab.runs.layout import RunDir

STATE_STYLE = {"pending": "dim", "running": "cyan", "completed": "green", "failed": "bold red",
               "cancelled": "yellow", "requeued": "magenta"}
_ORDER = ("completed", "running", "requeued", "pending", "failed", "cancelled")


def make_console() -> Any:
    """A rich console; piped output gets a wide page instead of 80 columns."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=200)
    return console


def _rel(path: str | Path | None, base: Path | None = None) -> str:
    if not path:
        return "-"
    try:
        return os.path.relpath(path, base) if base else os.path.relpath(path)
    except ValueError:
        return str(path)


def summary_line(rows: list[RunStatus]) -> str:
    """``4 runs: 2 completed, 1 running, 1 pending``."""
    c = counts(rows)
    parts = [f"{c[s]} {s}" for s in _ORDER if c.get(s)]
    return f"{len(rows)} runs: " + (", ".join(parts) if parts else "none")


def status_table(rows: list[RunStatus], title: str, bars: bool = False) -> Any:
    """A rich table of ``rows`` (progress bars in the step column with ``bars``)."""
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    notes = [f"{r.arm} seed {r.seed}: {r.note}" for r in rows if r.note]
    caption = "\n".join([summary_line(rows), *notes])
    table = Table(title=title, caption=caption, caption_justify="left")
    for col in ("arm", "seed", "state", "job", "step", "held-out", "elapsed", "logs"):
        table.add_column(col, no_wrap=col != "logs", overflow="fold",
                         justify="right" if col in ("seed", "held-out") else "left")
    for r in rows:
        state = Text(r.state + ("*" if r.note else ""), style=STATE_STYLE.get(r.state, ""))
        step_text = f"{r.step}/{r.total}" if r.total else str(r.step)
        step: Any = step_text
        if bars and r.total:
            from rich.table import Table as Grid

            grid = Grid.grid(padding=(0, 1))
            grid.add_row(ProgressBar(total=r.total, completed=min(r.step, r.total), width=12),
                         step_text)
            step = grid
        logs = Path(r.stdout).parent if r.stdout else None
        table.add_row(r.arm, str(r.seed), state, r.job_id or "-", step,
                      "-" if r.last_val is None else f"{r.last_val:.3f}",
                      format_elapsed(r.elapsed_s), _rel(logs, r.path.parent.parent))
    return table


def failure_details(rows: list[RunStatus], lines: int = 15) -> list[str]:
    """For each failed run: the exception, its traceback's end and the stderr tail."""
    out = []
    for r in rows:
        if r.state != "failed":
            continue
        text = [f"--- {r.arm} seed {r.seed} failed ({r.path})"]
        if r.note:
            text.append(f"    {r.note}")
        if r.error:
            text.append(f"    exception: {r.error}")
        if r.traceback:
            tb = r.traceback.rstrip().splitlines()[-lines:]
            text.append("    traceback (last lines):")
            text.extend("      " + x for x in tb)
        err = tail(r.stderr, lines)
        if err:
            text.append(f"    stderr tail ({_rel(r.stderr)}):")
            text.extend("      " + x for x in err.splitlines())
        if r.stdout or r.stderr:
            text.append(f"    logs: {_rel(r.stdout)}  {_rel(r.stderr)}")
        out.append("\n".join(text))
    return out


def print_status(console: Any, rows: list[RunStatus], title: str) -> None:
    """Print the table and the failure details."""
    console.print(status_table(rows, title))
    for block in failure_details(rows):
        console.print(block, highlight=False, markup=False, soft_wrap=True)


def watch(sweep_dir: Path, console: Any, *, runs: Sequence[RunDir] | None = None,
          interval: float = 2.0, until_done: bool = True, title: str = "",
          before: Callable[[], None] | None = None) -> list[RunStatus]:
    """Refresh the status until every run is terminal (or Ctrl-C); return the last rows.

    At a terminal: a live table with progress bars. Otherwise one summary line whenever
    the counts change. ``before()`` is called before each refresh.
    """
    rows = collect_status(sweep_dir, runs)
    if console.is_terminal:
        from rich.live import Live

        with Live(status_table(rows, title, bars=True), console=console,
                  refresh_per_second=4, transient=False) as live:
            try:
                while not (until_done and all(r.terminal for r in rows)):
                    time.sleep(interval)
                    if before is not None:
                        before()
                    rows = collect_status(sweep_dir, runs)
                    live.update(status_table(rows, title, bars=True))
            except KeyboardInterrupt:
                pass
        return rows
    last = ""
    try:
        while True:
            line = summary_line(rows)
            if line != last:
                console.print(f"[{time.strftime('%H:%M:%S')}] {line}", highlight=False)
                last = line
            if until_done and all(r.terminal for r in rows):
                break
            time.sleep(interval)
            if before is not None:
                before()
            rows = collect_status(sweep_dir, runs)
    except KeyboardInterrupt:
        pass
    return rows


class StatusMonitor:
    """The :class:`~ccpo_lab.launch.base.Monitor` of a launch: at a terminal a live table
    with progress bars (refreshed at most once a second), otherwise one summary line
    whenever the counts change."""

    def __init__(self, sweep_dir: Path, runs: Sequence[RunDir], console: Any,
                 title: str = "") -> None:
        self.sweep_dir = sweep_dir
        self.runs = list(runs)
        self.console = console
        self.title = title
        self._live: Any = None
        self._last_line = ""
        self._last_refresh = 0.0
        self._done = False

    def _table(self) -> Any:
        return status_table(collect_status(self.sweep_dir, self.runs), self.title, bars=True)

    def start(self, auto_refresh: bool = False) -> None:
        """A live table at a terminal (``auto_refresh``: re-rendered every second)."""
        if not self.console.is_terminal or self._live is not None:
            return
        from rich.live import Live

        if auto_refresh:
            self._live = Live(get_renderable=self._table, console=self.console,
                              refresh_per_second=1)
        else:
            self._live = Live(self._table(), console=self.console, refresh_per_second=2)
        self._live.start()

    def stop(self) -> None:
        """Stop the live table."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def is_live(self) -> bool:
        """Whether the live table shows."""
        return self._live is not None

    def refresh(self) -> bool:
        """Re-read the runs (at most once a second); True once every run is finished."""
        if time.monotonic() - self._last_refresh < 1.0:
            return self._done
        self._last_refresh = time.monotonic()
        rows = collect_status(self.sweep_dir, self.runs)
        self._done = all(r.terminal for r in rows)
        if self._live is not None:
            self._live.update(status_table(rows, self.title, bars=True))
        else:
            line = summary_line(rows)
            if line != self._last_line:
                self.console.print(f"[{time.strftime('%H:%M:%S')}] {line}", highlight=False)
                self._last_line = line
        return self._done

    def note(self, text: str) -> None:
        """Print ``text`` unless the live table shows."""
        if self._live is None:
            self.console.print(text, highlight=False, markup=False)
