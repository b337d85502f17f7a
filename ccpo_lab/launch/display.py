"""Rendering run status: the status table, failure details, a watch loop, and the
:class:`StatusMonitor` a launcher shows while it waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.fitted import fitted
from ccpo_lab.launch.status import (
    RunStatus,
    collect_status,
    counts,
    format_elapsed,
    settled,
    tail,
)
from ccpo_lab.launch.watcher import QueryWatcher
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.textout import safe

STATE_STYLE = {"pending": "dim", "running": "cyan", "completed": "green", "failed": "bold red",
               "cancelled": "yellow", "interrupted": "yellow", "requeued": "magenta",
               "left out": "bold yellow"}
_ORDER = ("completed", "running", "requeued", "pending", "interrupted", "failed", "cancelled",
          "left out")
BAR_MIN_WIDTH = 100
"""Terminal width from which the live view adds a progress bar to the step column."""


def make_console() -> Any:
    """A rich console; piped output gets a wide page instead of 80 columns."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS"):
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
    """``4 runs: 2 completed, 1 running, 1 pending``, with the time left when known."""
    c = counts(rows)
    parts = [f"{c[s]} {s}" for s in _ORDER if c.get(s)]
    text = f"{len(rows)} runs: " + (", ".join(parts) if parts else "none")
    left = [r.eta_s for r in rows if r.eta_s is not None]
    if left:
        text += f"; the running ones end in {format_elapsed(max(left))}"
    return text


def _per_step(rate: float | None) -> str:
    """Seconds per step (``1.32``), '-' when unknown."""
    if not rate:
        return "-"
    per = 1.0 / rate
    return f"{per:.2f}" if per < 10 else f"{per:.0f}"


def status_table(rows: list[RunStatus], title: str, bars: bool = False) -> Any:
    """A rich table of ``rows`` that fits 80 columns without cropping a value: arm, seed,
    state, step, held-out success, seconds per step, ETA, elapsed; notes, follow-the-log
    lines and the summary below it. ``bars``: a progress bar beside the step (at a wide
    terminal). At a terminal too narrow for the table, one block per run instead
    (:mod:`ccpo_lab.fitted`): every value whole."""
    from rich import box
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  title_justify="left")
    table.add_column("arm", overflow="fold")
    for col in ("seed", "state", "step", "held-out", "s/step", "ETA", "elapsed"):
        table.add_column(col, no_wrap=True, justify="left" if col == "state" else "right")
    for r in rows:
        state = Text(r.state + ("*" if r.note else ""), style=STATE_STYLE.get(r.state, ""))
        step_text = f"{r.step}/{r.total}" if r.total else str(r.step)
        step: Any = step_text
        if bars and r.total:
            grid = Table.grid(padding=(0, 1))
            grid.add_row(ProgressBar(total=r.total, completed=min(r.step, r.total), width=12),
                         step_text)
            step = grid
        live = r.state == "running"
        table.add_row(safe(r.arm), str(r.seed), state, step,
                      "-" if r.last_val is None else f"{r.last_val:.3f}",
                      _per_step(r.steps_per_s) if live else "-",
                      format_elapsed(r.eta_s) if r.eta_s is not None else "-",
                      format_elapsed(r.elapsed_s))
    below = [safe(f"{r.arm} seed {r.seed}: {r.note}") for r in rows if r.note]
    if below:
        below.insert(0, "* a note on the run, below:")
    below += follow_lines(rows)
    below.append(summary_line(rows))
    return Group(fitted(table), Text("\n".join(below)))


def follow_lines(rows: list[RunStatus]) -> list[str]:
    """For each running run: its job, its process and, on a line of its own (to copy),
    the command to follow its log."""
    out = []
    for r in rows:
        if r.state != "running":
            continue
        who = ", ".join(x for x in (f"job {r.job_id}" if r.job_id else "",
                                    r.owner.describe() if r.owner else "") if x)
        head = f"{r.arm} seed {r.seed}{f' ({who})' if who else ''}"
        if r.log:
            out += [f"{head}, its log:", f"  tail -f {_rel(r.log)}"]
        else:
            out.append(f"{head}: no log file (it runs in the launching process)")
    return [safe(x) for x in out]


def failure_details(rows: list[RunStatus], lines: int = 15) -> list[str]:
    """For each failed or interrupted run: the exception (or how its process ended), its
    traceback's end and the stderr tail."""
    out = []
    for r in rows:
        if r.state not in ("failed", "interrupted"):
            continue
        text = [f"--- {r.arm} seed {r.seed} {r.state} ({r.path})"]
        if r.note:
            text.append(f"    {r.note}")
        if r.error:
            text.append(f"    exception: {r.error}")
        if r.traceback:
            tb = str(r.traceback).rstrip().splitlines()[-lines:]
            text.append("    traceback (last lines):")
            text.extend("      " + x for x in tb)
        err = tail(r.stderr, lines)
        if err:
            text.append(f"    stderr tail ({_rel(r.stderr)}):")
            text.extend("      " + x for x in err.splitlines())
        if r.stdout or r.stderr:
            text.append(f"    logs: {_rel(r.stdout)}  {_rel(r.stderr)}")
        out.append(safe("\n".join(text)))  # every text here comes from the run's files
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
    watcher = QueryWatcher()
    rows = collect_status(sweep_dir, runs, watcher=watcher)
    if console.is_terminal:
        from rich.live import Live

        with Live(status_table(rows, title, bars=console.width >= BAR_MIN_WIDTH), console=console,
                  refresh_per_second=4, transient=False) as live:
            try:
                while not (until_done and settled(rows)):
                    time.sleep(interval)
                    if before is not None:
                        before()
                    rows = collect_status(sweep_dir, runs, watcher=watcher)
                    live.update(status_table(rows, title, bars=console.width >= BAR_MIN_WIDTH))
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
            if until_done and settled(rows):
                break
            time.sleep(interval)
            if before is not None:
                before()
            rows = collect_status(sweep_dir, runs, watcher=watcher)
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
        self._watcher = QueryWatcher()

    def _table(self) -> Any:
        return status_table(collect_status(self.sweep_dir, self.runs, watcher=self._watcher),
                            self.title,
                            bars=self.console.width >= BAR_MIN_WIDTH)

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
        rows = collect_status(self.sweep_dir, self.runs, watcher=self._watcher)
        self._done = settled(rows)
        if self._live is not None:
            self._live.update(status_table(rows, self.title,
                                            bars=self.console.width >= BAR_MIN_WIDTH))
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
