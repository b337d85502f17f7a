"""The state of every run of a sweep, from its files and one short scheduler query.

A run is ``running`` when a live process holds its ownership lock
(:mod:`ccpo_lab.runs.owner`), whatever its files say. Otherwise its ``state.json`` (what
the run last recorded) and its launcher's ``job.json`` (where it was submitted) are
reconciled by the run's launcher (found by the kind its ``job.json`` names) with what it
sees: one short scheduler query per launcher kind (``sacct``/``squeue`` for Slurm), a
queue's process for ``local``/``inline``. A job the scheduler cancelled, or an executor
that vanished (``interrupted``), shows as such even though the run could not record it.
Everything comes from the sweep directory; nothing here waits for a job.

A directory that is not a run of its place (its ``run.json`` missing, unreadable, or
naming another arm, seed or sweep, or another run id than the manifest lists there: a run
copied in from another sweep) is shown as ``left out`` with the reason, as ``report`` and
``sync`` leave it out; nothing more of it is read. Files are read through the run-file
gateway (:mod:`ccpo_lab.runs.files`): nothing outside the sweep directory is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled
from ccpo_lab.launch.registry import LAUNCHERS
from ccpo_lab.launch.watcher import QueryWatcher
from ccpo_lab.runs.files import RunFileError, check_inside, excerpt
from ccpo_lab.runs.layout import Placed, RunDir, SweepDir
from ccpo_lab.runs.owner import Owner, current_owner

VAL_METRIC = "val/success_rate"
LEFT_OUT = "left out"
"""The state shown for a directory that is not a run of its place (see the module)."""


@dataclass(frozen=True)
class RunStatus:
    """One run as ``ccpo-lab status`` shows it."""

    path: Path
    """Run directory."""
    arm: str
    """Arm name."""
    seed: int
    """Run seed."""
    state: str
    """pending, running, completed, failed, cancelled, interrupted or requeued
    (reconciled)."""
    file_state: str
    """The state the run itself last recorded in ``state.json``."""
    launcher: str | None
    """inline, local or slurm (None when never submitted)."""
    job_id: str | None
    """Scheduler job id (Slurm ``123_4``, local controller pid, inline pid)."""
    scheduler: str | None
    """Scheduler's state of the job (Slurm state, or alive/gone for processes)."""
    step: int
    """Last step with metrics (or recorded in state.json)."""
    total: int
    """Total training steps."""
    last_val: float | None
    """Last held-out success rate."""
    elapsed_s: float | None
    """Seconds since the current attempt started (to its end when finished)."""
    stdout: str | None
    """Job stdout log."""
    stderr: str | None
    """Job stderr log."""
    error: str | None
    """The exception, for a failed run."""
    traceback: str | None
    """Its traceback."""
    note: str = ""
    """Why the state differs from the file state, and similar hints."""
    live: bool = False
    """A job or process is queued or running for this run."""
    owner: Owner | None = None
    """The live process executing the run (its ownership lock), if any."""
    steps_per_s: float | None = None
    """Training steps per second of the current attempt (set-up excluded)."""
    eta_s: float | None = None
    """Seconds left at that rate (while running)."""

    @property
    def terminal(self) -> bool:
        """Completed, failed, cancelled or interrupted: nothing more happens without a
        relaunch."""
        return self.state in TERMINAL

    @property
    def log(self) -> str | None:
        """The log to follow (``tail -f``): its job's stdout, where the run prints a line
        per step."""
        return self.stdout


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _metrics_tail(rd: RunDir) -> tuple[int, float | None, str]:
    """Last step, last held-out value and a note on lines not used, read incrementally
    (:func:`ccpo_lab.runs.metrics.tail_metrics`: a watch re-reads only appended bytes)."""
    from ccpo_lab.runs.metrics import tail_metrics

    try:
        t = tail_metrics(rd.metrics, VAL_METRIC, root=rd.sweep_root)
    except RunFileError as e:
        return 0, None, f"metrics.jsonl {e.why}"
    except OSError as e:
        return 0, None, f"metrics unreadable: {e}"
    return t.last_step, t.last_value, t.note


def _inside(path: Any, root: Path) -> str | None:
    """A log path of ``job.json`` when it is inside the sweep directory (None otherwise:
    the gateway reads nothing outside it)."""
    if not isinstance(path, str) or not path:
        return None
    try:
        check_inside(path, root)
    except RunFileError:
        return None
    return path


_STATE_INTS = ("step", "total_steps")
_STATE_TEXTS = ("state", "started", "updated", "error", "traceback")


def state_problem(st: Any) -> str | None:
    """Why a ``state.json`` cannot be shown (a field of the wrong kind: a step of
    ``"abc"``, ``Infinity`` or ``1e400``, ``total_steps: [1]``...), named; None when
    every field the status reads has its kind."""
    if not isinstance(st, dict):
        return f"not a JSON object (got {type(st).__name__})"
    for key in _STATE_INTS:
        v = st.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            return f"{key}: not a whole number >= 0 (got {excerpt(str(v))})"
    for key in _STATE_TEXTS:
        v = st.get(key)
        if v is not None and not isinstance(v, str):
            return f"{key}: not a text (got {excerpt(str(v))})"
    origin = st.get("rate_from")
    if origin is not None and not isinstance(origin, dict):
        return f"rate_from: not an object (got {excerpt(str(origin))})"
    return None


def _left_out(p: Placed) -> RunStatus:
    """The row of a directory that is not a run of its place: named, nothing more read."""
    rd = p.rd
    return RunStatus(path=rd.path, arm=rd.arm, seed=-1 if rd.seed is None else rd.seed,
                     state=LEFT_OUT, file_state=LEFT_OUT, launcher=None, job_id=None,
                     scheduler=None, step=0, total=0, last_val=None, elapsed_s=None,
                     stdout=None, stderr=None, error=None, traceback=None,
                     note=f"left out: {p.problem}")


def tracker(kind: Any) -> type[Launcher]:
    """The launcher class of a ``job.json``'s kind (the base class, whose trackers know no
    scheduler, when none or unknown)."""
    if isinstance(kind, str) and kind in LAUNCHERS:
        return LAUNCHERS[kind]
    return Launcher


def _scheduler_states(jobs: Sequence[dict[str, Any]], scheduler: bool,
                      watcher: QueryWatcher | None = None
                      ) -> dict[str, dict[str, str] | None]:
    """Per launcher kind: its one query over its runs' jobs (None: it cannot be asked),
    through ``watcher`` when given (a watch loop's back-off)."""
    out: dict[str, dict[str, str] | None] = {}
    for kind in sorted({str(j["launcher"]) for j in jobs if j.get("launcher")}):
        if not tracker(kind).scheduled:
            continue
        mine = [j for j in jobs if j.get("launcher") == kind]
        if not scheduler:
            out[kind] = {}
        else:
            out[kind] = tracker(kind).query(mine) if watcher is None else \
                watcher.query(kind, tracker(kind), mine)
    return out


def collect_status(sweep_dir: str | Path, runs: Sequence[RunDir] | None = None, *,
                   scheduler: bool = True, watcher: QueryWatcher | None = None
                   ) -> list[RunStatus]:
    """The status of every run (or of ``runs``) of the sweep in ``sweep_dir``.

    ``scheduler``: ask each launcher's scheduler (one short query per kind); ``watcher``:
    through a watch loop's :class:`~ccpo_lab.launch.watcher.QueryWatcher` (back-off).
    """
    sd = SweepDir(Path(sweep_dir))
    dirs = list(runs) if runs is not None else sd.run_dirs()
    placed = sd.check_places(dirs)
    infos = [(p.rd, p.run, p.rd.read_state(), p.rd.read_job()) for p in placed
             if p.problem is None]
    states = _scheduler_states([j for *_, j in infos], scheduler, watcher)
    now = datetime.now(timezone.utc).timestamp()
    rows: dict[Path, RunStatus] = {p.rd.path: _left_out(p) for p in placed
                                   if p.problem is not None}
    for rd, info, st, job in infos:
        why = state_problem(st)
        if why is not None:
            rows[rd.path] = _left_out(Placed(rd, info, f"{rd.state_json}: {why}"))
            continue
        kind = job.get("launcher")
        track = tracker(kind)
        file_state = str(st.get("state", "pending"))
        sched = None
        if track.scheduled and job.get("job_id"):
            known = states.get(str(kind))
            sched = None if known is None else known.get(str(job["job_id"]), "UNKNOWN")
        owner = current_owner(rd)
        if owner is not None and file_state not in TERMINAL:
            shown = Reconciled("running", "", True)
        else:
            shown = track.reconcile(file_state, job, sched, st)
        step, val, mnote = _metrics_tail(rd)
        step = max(step, int(st.get("step") or 0))
        start = _parse_time(st.get("started"))
        end = _parse_time(st.get("updated")) if shown.state in TERMINAL else now
        elapsed = None if start is None or end is None else max(0.0, end - start)
        total = int(st.get("total_steps") or 0)
        rate = _rate(st)
        eta = (max(0, total - step) / rate if rate and shown.state == "running" and total
               else None)
        failed = shown.state in ("failed", "interrupted")
        logs = {k: _inside(job.get(k), sd.path) for k in ("stdout", "stderr")}
        if any(job.get(k) and logs[k] is None for k in logs):
            mnote = "; ".join(x for x in (mnote, "job.json names logs outside the sweep "
                                          "directory: not read") if x)
        rows[rd.path] = RunStatus(
            path=rd.path, arm=str(info.get("arm", rd.arm)),
            seed=int(info.get("seed", -1 if rd.seed is None else rd.seed)),
            state=shown.state, file_state=file_state, launcher=kind,
            job_id=track.job_label(job, st), scheduler=sched, step=step,
            total=total, last_val=val, elapsed_s=elapsed,
            stdout=logs["stdout"], stderr=logs["stderr"],
            error=st.get("error") if failed else None,
            traceback=st.get("traceback") if failed else None,
            note="; ".join(x for x in (shown.note, mnote) if x), live=shown.live,
            owner=owner, steps_per_s=rate, eta_s=eta)
    return [rows[rd.path] for rd in dirs]


def _rate(st: dict[str, Any]) -> float | None:
    """Steps per second of the current attempt, from ``state.json``'s ``rate_from`` (the
    first step it recorded) to its last update."""
    origin = st.get("rate_from")
    if not isinstance(origin, dict):
        return None
    t0, t1 = _parse_time(origin.get("time")), _parse_time(st.get("updated"))
    try:
        done = int(st.get("step") or 0) - int(origin.get("step") or 0)
    except (TypeError, ValueError):
        return None
    if t0 is None or t1 is None or done <= 0 or t1 <= t0:
        return None
    return done / (t1 - t0)


def tail(path: str | Path | None, lines: int = 15) -> str:
    """The last ``lines`` lines of a text file ('' when absent)."""
    if not path:
        return ""
    p = Path(path)
    if not p.is_file():
        return ""
    with p.open("rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        data = f.read().decode("utf-8", errors="replace")
    return "\n".join(data.splitlines()[-lines:])


def format_elapsed(seconds: float | None) -> str:
    """``h:mm:ss`` ('-' when unknown)."""
    if seconds is None:
        return "-"
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def settled(rows: Sequence[RunStatus]) -> bool:
    """Whether nothing more happens to ``rows`` without a relaunch: every run is finished,
    or at least nothing queues or executes it (a pending run nobody will start)."""
    return all(r.terminal or not r.live for r in rows)


def counts(rows: list[RunStatus]) -> dict[str, int]:
    """Runs per display state."""
    out: dict[str, int] = {}
    for r in rows:
        out[r.state] = out.get(r.state, 0) + 1
    return out
