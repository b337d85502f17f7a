"""The live MLflow sync: ``ccpo-lab sync SWEEP_DIR --watch``, and ``sweep --wait`` starting it.

:func:`watch` syncs the sweep every ``every`` seconds while its runs go
(:func:`ccpo_lab.tracking.mlflow_sync.sync_sweep`, incremental: each round sends the rows
appended since the last, reading only the bytes appended, and logs a run's summary again
when its window changes), and stops by itself after one last round once nothing runs any
more (no run is executing or queued: :func:`ccpo_lab.launch.status.settled`). A round
that fails (the tracking server down or restarting) is said and the next round goes on
from what MLflow holds: nothing is lost or sent twice. Each round holds the store's sync
lock (:mod:`ccpo_lab.tracking.store`), so a ``report --out`` or a second sync beside it
waits at most one round.

With ``tracking.live: true``, ``sweep --wait`` starts :func:`watch` in a child process for
the time it waits (:func:`live_sync`: the log is ``<sweep>/_jobs/live-sync.log``); when
the wait ends it asks for a last round (SIGTERM) and waits for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.errors import UserError
from ccpo_lab.launch.status import collect_status, counts, settled
from ccpo_lab.runs.layout import SweepDir

if TYPE_CHECKING:
    from ccpo_lab.config.sweep import Sweep
    from ccpo_lab.tracking.mlflow_sync import SyncResult

LAST_ROUND_TRIES = 20
"""Tries of the last round when the store does not answer (every ``every`` seconds) ..."""
LAST_ROUND_S = 300.0
"""... and for at least this long (a tracking server restarting)."""
LOG_NAME = "live-sync.log"
"""The log of the live sync ``sweep --wait`` starts (in ``<sweep>/_jobs/``)."""
STOP_WAIT_S = 600.0
"""Longest wait of ``sweep --wait`` for the live sync's last round."""


@dataclass(frozen=True)
class WatchEnd:
    """How a watch ended."""

    rounds: int
    """Rounds run (successful or not)."""
    failed: int
    """Rounds that failed."""
    last: SyncResult | None
    """The last successful round's result."""
    ok: bool
    """The last round succeeded: the store holds everything the run files held then."""


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _running(sweep_dir: Path) -> tuple[bool, str]:
    """Whether a run of the sweep executes or is queued, and the status counts."""
    rows = collect_status(sweep_dir)
    c = counts(rows)
    return (not settled(rows)) if rows else False, ", ".join(f"{n} {k}" for k, n in c.items())


def watch(sweep_dir: str | Path, *, uri: str | None = None, experiment: str | None = None,
          every: float = 30.0, follow_pid: int | None = None,
          say: Callable[[str], None] = print, stop: threading.Event | None = None
          ) -> WatchEnd:
    """Sync ``sweep_dir`` every ``every`` seconds until nothing runs, then once more.

    ``follow_pid``: also go on while that process lives (the ``sweep --wait`` that started
    the watch: its runs may not be submitted yet). ``stop``: set to ask for a last round
    now (SIGTERM does). ``say`` gets one line per round that sent something or saw the
    runs change, and every failure; the first round also says when an environment
    variable (``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME``) chose where it goes
    (:mod:`ccpo_lab.tracking.target`: ``uri``/``experiment`` > those > the sweep's
    ``tracking`` > the default). The live sync of ``sweep --wait`` inherits them.

    Raises:
        UserError: the sweep cannot be synced at all (tracking disabled, not a sweep
            directory) on the first round.
    """
    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    root = Path(sweep_dir)
    stop = stop or threading.Event()
    rounds = failed = tries_at_end = 0
    ended: float | None = None  # when the runs were first seen stopped
    last: SyncResult | None = None
    ok, shown = False, ""
    while True:
        asked = stop.is_set()
        running, states = _running(root) if root.is_dir() else (False, "")
        active = not asked and (running or _alive(follow_pid))
        began = time.monotonic()
        try:
            res = sync_sweep(root, uri, experiment, say=lambda line: say(f"  {line}"),
                             say_target=rounds == 0)
        except UserError as e:
            if rounds == 0 and not (active and "not found" in str(e)):
                raise
            say(f"[{time.strftime('%H:%M:%S')}] round {rounds + 1} not synced: {e}")
            ok = False
        except Exception as e:  # noqa: BLE001 - MLflow raises many kinds; the next round goes on
            msg = str(e).splitlines()[0] if str(e) else ""
            say(f"[{time.strftime('%H:%M:%S')}] round {rounds + 1} failed: {type(e).__name__}: "
                f"{msg} -- nothing was lost; the next round goes on in {every:g} s")
            failed += 1
            ok = False
        else:
            last, ok = res, True
            line = (f"{res.created} runs created, {res.updated} updated, {res.values} metric "
                    f"values sent" + (f"; runs: {states}" if states else ""))
            if res.created or res.updated or res.values or states != shown:
                say(f"[{time.strftime('%H:%M:%S')}] round {rounds + 1}: {line}")
                shown = states
        rounds += 1
        if not active:
            tries_at_end += 1
            ended = began if ended is None else ended
            if ok or (tries_at_end >= LAST_ROUND_TRIES
                      and time.monotonic() - ended >= LAST_ROUND_S):
                return WatchEnd(rounds, failed, last, ok)
        stop.wait(max(0.0, every - (time.monotonic() - began)))


def _log_path(sweep_dir: Path) -> Path:
    return SweepDir(sweep_dir).jobs / LOG_NAME


@contextlib.contextmanager
def live_sync(sw: Sweep, results: str | Path, console: Any = None) -> Iterator[Path | None]:
    """Within the block, a ``ccpo-lab sync --watch`` of the sweep runs beside it (when its
    ``tracking.live`` is on; else nothing): started in a child process that follows this
    one, asked for a last round when the block ends, and waited for. Yields its log."""
    tracking = sw.config.tracking
    if not tracking.live:
        yield None
        return
    sweep_dir = sw.sweep_dir(results)
    log = _log_path(sweep_dir)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "ccpo_lab.cli.main", "sync", str(sweep_dir), "--watch",
           "--every", f"{tracking.live_every:g}", "--follow-pid", str(os.getpid())]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    _say(console, f"live MLflow sync every {tracking.live_every:g} s (pid {proc.pid}, log "
                  f"{log})")
    try:
        yield log
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()][-1:]
        _say(console, f"live MLflow sync ended ({'ok' if code == 0 else f'exit {code}'})"
                      + (f": {tail[0].strip()}" if tail else ""))


def _say(console: Any, text: str) -> None:
    if console is None:
        print(text, flush=True)
    else:
        console.print(text, highlight=False, markup=False, soft_wrap=True)
