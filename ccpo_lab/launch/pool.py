"""The local launcher's pool process: a detached ``python -m ccpo_lab.launch.pool QUEUE_FILE``
(its own session, surviving the terminal) that runs a sweep's queue through a
:class:`~ccpo_lab.launch.slots.SlotPool`, recording each run's ``job.json``; and the checks
of whether a pool or a job's controller is still alive. Its queue file and log live in
``<sweep dir>/_jobs/``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.launch.environment import LOCAL
from ccpo_lab.launch.slots import SlotPool
from ccpo_lab.runs.layout import RunDir, SweepDir, stored_path, sweep_path


def _cmdline_has(pid: Any, needle: bytes) -> bool:
    """Whether ``pid`` is a live process whose command line contains ``needle``."""
    try:
        return needle in Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError, TypeError):
        return False


def controller_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live submitit local controller (not a reused pid): the one
    :mod:`ccpo_lab.launch.heldjob` runs, or submitit's own (a job started before it)."""
    return any(_cmdline_has(pid, m) for m in (b"ccpo_lab.launch.heldjob",
                                              b"submitit.local._local"))


def pool_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live ccpo-lab process running a pool (detached or ``--wait``)."""
    return _cmdline_has(pid, b"ccpo")


# ---------------------------------------------------------------- running a sweep's queue
def _should_start(key: str) -> bool:
    return RunDir(Path(key)).read_state().get("state") not in ("cancelled", "completed")


def run_queue(run_dirs: Sequence[str], slots: Sequence[tuple[int, ...]],
              pool_pid: int | None = None, tick: Callable[[], object] | None = None,
              pool: SlotPool | None = None, python: str | None = None,
              slot_locks: Path | None = None) -> dict[str, Any]:
    """Run the run directories through a slot pool, recording ``job.json`` for each
    (``python``: the interpreter command the jobs run, None: this one; ``slot_locks``:
    the directory of the sweep's slot locks)."""
    from ccpo_lab.launch.job import RunJob, submitit_log_paths

    def on_start(key: str, job: Any, slot: tuple[int, ...]) -> None:
        rd = RunDir(Path(key))
        rd.update_job(job_id=job.job_id, pid=int(job.job_id), pool_pid=pool_pid,
                      gpus=",".join(map(str, slot)), started=time.time(),
                      **submitit_log_paths(rd.logs / "%j", job.job_id))

    pool = pool or SlotPool(slots, python=python, slot_locks=slot_locks)
    tasks = [(str(d), RunJob(d, LOCAL, isolate=True), RunDir(Path(d)).logs / "%j")
             for d in run_dirs]
    return pool.run(tasks, on_start=on_start, should_start=_should_start, tick=tick)


def spawn_pool(sweep_dir: Path, run_dirs: Sequence[str], slots: Sequence[tuple[int, ...]],
               before_start: Callable[[Path], Any] | None = None,
               python: str | None = None) -> tuple[int, Path, Path]:
    """Start a detached pool for ``run_dirs``. Returns (pid, queue file, log file).

    ``before_start(queue_file)`` runs after the queue file is written, before the pool
    starts; ``python``: the interpreter command the jobs run (None: this one).
    """
    jobs_dir = SweepDir(Path(sweep_dir).resolve()).jobs
    jobs_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    queue = jobs_dir / f"local-pool-{stamp}.json"
    log = jobs_dir / f"local-pool-{stamp}.log"
    sweep = jobs_dir.parent  # paths relative to it: a moved sweep's queue still reads
    atomic_write_json(queue, {"runs": [stored_path(d, sweep) for d in run_dirs],
                              "slots": [list(s) for s in slots], "python": python,
                              "slot_locks": stored_path(str(jobs_dir), sweep)})
    if before_start is not None:
        before_start(queue)
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ccpo_lab.launch.pool", str(queue)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    queue.with_suffix(".pid").write_text(f"{proc.pid}\n", encoding="utf-8")
    return proc.pid, queue, log


def queue_pid(queue_file: Any) -> int | None:
    """The pid of the pool serving ``queue_file`` (None if unknown)."""
    try:
        return int(Path(str(queue_file)).with_suffix(".pid").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    """Entry of the detached pool: ``python -m ccpo_lab.launch.pool QUEUE_FILE``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ccpo_lab.launch.pool QUEUE_FILE", file=sys.stderr)
        return 2
    # run as ``-m``, this module is ``__main__``: use the importable one, so that what the
    # pool pickles for its jobs is found by reference there
    from ccpo_lab.launch import pool as this

    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    sweep = Path(args[0]).resolve().parent.parent
    spec["runs"] = [sweep_path(d, sweep) for d in spec["runs"]]
    slots = [tuple(s) for s in spec["slots"]]
    # a queue written before slot locks: its sweep's jobs directory holds them
    slot_locks = Path(sweep_path(spec.get("slot_locks"), sweep) or sweep / "_jobs")
    pool = this.SlotPool(slots, python=spec.get("python"), slot_locks=slot_locks)

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # a pool started from a background job inherits SIGINT ignored; its jobs must not
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"pool {os.getpid()}: {len(spec['runs'])} runs on {len(slots)} slots {slots}",
          flush=True)
    try:
        jobs = this.run_queue(spec["runs"], slots, pool_pid=os.getpid(), pool=pool)
    except KeyboardInterrupt:
        print(f"pool {os.getpid()}: stopped", flush=True)
        return 130
    print(f"pool {os.getpid()}: done ({len(jobs)} runs executed)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
