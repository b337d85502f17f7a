"""The ``local`` launcher: submitit's local executor on one machine, with a slot pool.

Each run gets ``gpus_per_run`` GPUs as its own ``CUDA_VISIBLE_DEVICES`` slice (submitit's
``visible_gpus`` / ``gpus_per_node``); concurrently running runs never share a slice, not
even runs of two sweeps launched separately: a run starts only once it holds the
machine-wide locks of its slice (:mod:`ccpo_lab.launch.gpulock`). With
``gpus_per_run: 0`` the slots are CPU slots (``CUDA_VISIBLE_DEVICES`` empty). The machine's
GPUs are ``$CCPO_LAB_NUM_GPUS`` (a count), else ``$CUDA_VISIBLE_DEVICES``, else the
``nvidia-smi -L`` count, else none.

Without ``--wait`` the pool runs in a detached process (``python -m
ccpo_lab.launch.local SWEEP_DIR QUEUE_FILE``) that survives the terminal; its queue file
and log live in ``<sweep dir>/_jobs/``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.schema import LauncherConfig
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.errors import UserError
from ccpo_lab.launch.gpulock import GpuLock, try_lock
from ccpo_lab.launch.manifest import JOBS_DIR
from ccpo_lab.runs.layout import RunDir

NUM_GPUS_ENV = "CCPO_LAB_NUM_GPUS"
"""Environment variable with the machine's GPU count (overrides detection)."""
NO_TIMEOUT_MIN = 60 * 24 * 365
"""submitit's local executor kills a job after ``timeout_min``; local runs have no limit."""


def detect_gpus() -> list[int]:
    """GPU indices of this machine (see the module docstring for the order of sources)."""
    count = os.environ.get(NUM_GPUS_ENV, "").strip()
    if count:
        if not count.isdigit():
            raise UserError("must be a GPU count (a non-negative integer)", key=NUM_GPUS_ENV,
                            value=count)
        return list(range(int(count)))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [x.strip() for x in visible.split(",") if x.strip()]
        if all(x.isdigit() for x in ids):
            return [int(x) for x in ids]
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10,
                               check=False)
            if r.returncode == 0:
                return list(range(sum(1 for x in r.stdout.splitlines() if x.startswith("GPU"))))
        except (OSError, subprocess.TimeoutExpired):
            pass
    return []


def gpu_slots(launcher: LauncherConfig, gpus: Sequence[int]) -> list[tuple[int, ...]]:
    """Disjoint slots: ``gpus_per_run`` GPUs each (``()`` for CPU slots), at most
    ``max_parallel`` of them."""
    g = launcher.gpus_per_run
    if g == 0:
        return [()] * launcher.max_parallel
    n = len(gpus) // g
    if n == 0:
        raise UserError(f"each run needs {g} GPU(s) but this machine has {len(gpus)} (set "
                        f"${NUM_GPUS_ENV} if detection is wrong)", key="launcher.gpus_per_run",
                        value=g, valid=f"0 (CPU slots) .. {len(gpus)}")
    return [tuple(gpus[i * g:(i + 1) * g]) for i in range(n)][:launcher.max_parallel]


@dataclass
class _Running:
    key: str
    slot: int
    job: Any
    started: float
    lock: GpuLock


class SlotPool:
    """Run callables through submitit's local executor, one per free slot at a time."""

    def __init__(self, slots: Sequence[tuple[int, ...]], poll_s: float = 0.2) -> None:
        if not slots:
            raise ValueError("a pool needs at least one slot")
        self.slots = list(slots)
        self.poll_s = poll_s
        self._stop = False

    def stop(self) -> None:
        """Start nothing more (running jobs finish unless cancelled)."""
        self._stop = True

    def _start(self, folder: Path, slot: tuple[int, ...], fn: Callable[[], Any]) -> Any:
        from submitit import LocalExecutor

        ex = LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=NO_TIMEOUT_MIN, gpus_per_node=len(slot),
                             visible_gpus=tuple(slot), signal_delay_s=30)
        return ex.submit(fn)

    def run(self, tasks: Sequence[tuple[str, Callable[[], Any], Path]],
            on_start: Callable[[str, Any, tuple[int, ...]], None] | None = None,
            on_end: Callable[[str, Any], None] | None = None,
            should_start: Callable[[str], bool] | None = None,
            tick: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run every ``(key, fn, folder)`` task; return ``{key: submitit job}``.

        ``should_start(key)`` is asked just before a task starts (False skips it);
        ``on_start(key, job, slot)`` / ``on_end(key, job)`` are called around each task;
        ``tick()`` after every poll. A task starts on the first free slot whose GPUs it can
        lock machine-wide (:func:`ccpo_lab.launch.gpulock.try_lock`); while another
        sweep holds them all, the queue waits.
        """
        queue = list(tasks)
        free = list(range(len(self.slots)))
        running: list[_Running] = []
        jobs: dict[str, Any] = {}
        said_waiting = False
        try:
            while (queue and not self._stop) or running:
                while queue and free and not self._stop:
                    got = next(((s, lk) for s in free
                                if (lk := try_lock(self.slots[s])) is not None), None)
                    if got is None:
                        if not said_waiting:
                            print(f"waiting: the GPUs of every free slot are held by another "
                                  f"ccpo-lab sweep ({self.slots[free[0]]} ...)", flush=True)
                            said_waiting = True
                        break
                    slot, lock = got
                    key, fn, folder = queue.pop(0)
                    if should_start is not None and not should_start(key):
                        lock.release()
                        continue
                    free.remove(slot)
                    try:
                        job = self._start(folder, self.slots[slot], fn)
                    except BaseException:
                        lock.release()
                        raise
                    jobs[key] = job
                    running.append(_Running(key, slot, job, time.time(), lock))
                    if on_start is not None:
                        on_start(key, job, self.slots[slot])
                still = []
                for r in running:
                    if r.job.done():
                        r.lock.release()
                        free.append(r.slot)
                        free.sort()
                        if on_end is not None:
                            on_end(r.key, r.job)
                    else:
                        still.append(r)
                running = still
                if tick is not None:
                    tick()
                if running or queue:
                    time.sleep(self.poll_s)
        except BaseException:
            for r in running:
                r.job.cancel(check=False)
                r.lock.release()
            raise
        return jobs


def _cmdline_has(pid: Any, needle: bytes) -> bool:
    """Whether ``pid`` is a live process whose command line contains ``needle``."""
    try:
        return needle in Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (OSError, ValueError, TypeError):
        return False


def controller_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live submitit local controller (not a reused pid)."""
    return _cmdline_has(pid, b"submitit.local._local")


def pool_alive(pid: Any) -> bool:
    """Whether ``pid`` is a live ccpo-lab process running a pool (detached or ``--wait``)."""
    return _cmdline_has(pid, b"ccpo")


def stop_controller(pid: Any) -> bool:
    """SIGINT a local controller (it stops its task: the run records ``cancelled``)."""
    if not controller_alive(pid):
        return False
    try:
        os.kill(int(pid), signal.SIGINT)
    except OSError:
        return False
    return True


# ---------------------------------------------------------------- running a sweep's queue
def _should_start(key: str) -> bool:
    return RunDir(Path(key)).read_state().get("state") not in ("cancelled", "completed")


def run_queue(run_dirs: Sequence[str], slots: Sequence[tuple[int, ...]],
              pool_pid: int | None = None, tick: Callable[[], None] | None = None,
              pool: SlotPool | None = None) -> dict[str, Any]:
    """Run the run directories through a slot pool, recording ``job.json`` for each."""
    from ccpo_lab.launch.job import RunJob, submitit_log_paths, update_job

    def on_start(key: str, job: Any, slot: tuple[int, ...]) -> None:
        rd = RunDir(Path(key))
        update_job(rd, job_id=job.job_id, pid=int(job.job_id), pool_pid=pool_pid,
                   gpus=",".join(map(str, slot)), started=time.time(),
                   **submitit_log_paths(rd.logs / "%j", job.job_id))

    pool = pool or SlotPool(slots)
    tasks = [(str(d), RunJob(d), RunDir(Path(d)).logs / "%j") for d in run_dirs]
    return pool.run(tasks, on_start=on_start, should_start=_should_start, tick=tick)


def spawn_pool(sweep_dir: Path, run_dirs: Sequence[str], slots: Sequence[tuple[int, ...]],
               before_start: Callable[[Path], Any] | None = None) -> tuple[int, Path, Path]:
    """Start a detached pool for ``run_dirs``. Returns (pid, queue file, log file).

    ``before_start(queue_file)`` runs after the queue file is written, before the pool starts.
    """
    jobs_dir = Path(sweep_dir).resolve() / JOBS_DIR
    jobs_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    queue = jobs_dir / f"local-pool-{stamp}.json"
    log = jobs_dir / f"local-pool-{stamp}.log"
    atomic_write_json(queue, {"runs": list(run_dirs), "slots": [list(s) for s in slots]})
    if before_start is not None:
        before_start(queue)
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ccpo_lab.launch.local", str(queue)],
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
    """Entry of the detached pool: ``python -m ccpo_lab.launch.local QUEUE_FILE``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ccpo_lab.launch.local QUEUE_FILE", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    slots = [tuple(s) for s in spec["slots"]]
    pool = SlotPool(slots)

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    print(f"pool {os.getpid()}: {len(spec['runs'])} runs on {len(slots)} slots {slots}",
          flush=True)
    try:
        jobs = run_queue(spec["runs"], slots, pool_pid=os.getpid(), pool=pool)
    except KeyboardInterrupt:
        print(f"pool {os.getpid()}: stopped", flush=True)
        return 130
    print(f"pool {os.getpid()}: done ({len(jobs)} runs executed)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
