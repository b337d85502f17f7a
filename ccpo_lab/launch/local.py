"""The ``local`` launcher: submitit's local executor on one machine, with a slot pool.

Each run gets the GPUs its backend needs (``launcher.gpus_per_run`` may give a CPU run a
slice too) as its own ``CUDA_VISIBLE_DEVICES`` slice (submitit's ``visible_gpus`` /
``gpus_per_node``); concurrently running runs never share a slice, not even runs of two
sweeps launched separately: a run starts only once it holds the machine-wide locks of its
slice (:mod:`ccpo_lab.launch.gpulock`), and one of its sweep's ``max_parallel`` slot locks.
Runs that need no GPU get CPU slots (``CUDA_VISIBLE_DEVICES`` empty). The locks are
handed to the processes that execute the run (:mod:`ccpo_lab.launch.heldjob`): a killed
pool's runs go on holding their GPUs and slots, and a relaunch waits for them. The
machine's GPUs are ``$CCPO_LAB_NUM_GPUS`` (a count), else ``$CUDA_VISIBLE_DEVICES``, else
the ``nvidia-smi -L`` count, else none.

The pool runs in a detached process (``python -m ccpo_lab.launch.local QUEUE_FILE``, its
own session) that survives the terminal; its queue file and log live in ``<sweep
dir>/_jobs/``. ``--wait`` only watches it: Ctrl-C or a closed terminal stops the watching,
never the runs. Each job supervises its run in a child process
(:func:`ccpo_lab.runs.execute.supervise`), so a run killed from outside is recorded with
its signal, and a run whose job wrapper dies goes on.
Each run's job runs the interpreter the run needs (:attr:`Needs.python
<ccpo_lab.placement.Needs.python>`: a verl run's ``backend.verl.python``), as under Slurm,
so a run executes the same code under both launchers; the pool itself runs this one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ccpo_lab.config.launchers.local import LocalSettings
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled, Submission, gone, parallel
from ccpo_lab.launch.gpulock import GpuLock, slot_lock_file, try_lock
from ccpo_lab.placement import Needs, Placement, visible_gpus
from ccpo_lab.runs.layout import RunDir, SweepDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus


T = TypeVar("T")

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


def gpu_slots(settings: LocalSettings, gpus: Sequence[int],
              needs: Needs = Needs()) -> list[tuple[int, ...]]:
    """Disjoint slots of the GPUs per run (``()`` for CPU slots), at most
    ``max_parallel`` of them."""
    g = per_run_gpus(settings, needs)
    if g == 0:
        return [()] * settings.max_parallel
    n = len(gpus) // g
    if n == 0:
        raise UserError(f"each run needs {g} GPU(s) but this machine has {len(gpus)} (set "
                        f"${NUM_GPUS_ENV} if detection is wrong)", key="launcher.gpus_per_run",
                        value=g, valid=f"0 (CPU slots) .. {len(gpus)}")
    return [tuple(gpus[i * g:(i + 1) * g]) for i in range(n)][:settings.max_parallel]


def per_run_gpus(settings: LocalSettings, needs: Needs) -> int:
    """GPUs in each run's slice: ``gpus_per_run``, else what the backend needs."""
    return needs.gpus if settings.gpus_per_run is None else settings.gpus_per_run


@dataclass
class _Running:
    key: str
    slot: int
    job: Any
    started: float
    lock: GpuLock


@dataclass
class _PoolState:
    queue: list[tuple[str, Callable[[], Any], Path]]
    free: list[int]
    running: list[_Running] = field(default_factory=list)
    jobs: dict[str, Any] = field(default_factory=dict)
    said_waiting: bool = False


class SlotPool:
    """Run callables through submitit's local executor, one per free slot at a time."""

    def __init__(self, slots: Sequence[tuple[int, ...]], poll_s: float = 0.2,
                 python: str | None = None, slot_locks: Path | None = None) -> None:
        if not slots:
            raise ValueError("a pool needs at least one slot")
        self.slots = list(slots)
        self.poll_s = poll_s
        self.python = python
        """The interpreter command the jobs run (shell-quoted; None: this one)."""
        self.slot_locks = slot_locks
        """The directory of the sweep's slot locks (``slot-<k>.lock``; None: no sweep
        bound beyond this pool's slots)."""
        self._stop = False

    def stop(self) -> None:
        """Start nothing more (running jobs finish unless cancelled)."""
        self._stop = True

    def _lock(self, slot: int) -> GpuLock | None:
        """The locks of slot ``slot`` (its GPUs, and the sweep's slot), or None if held."""
        also = [] if self.slot_locks is None else [slot_lock_file(self.slot_locks, slot)]
        return try_lock(self.slots[slot], also=also)

    def _start(self, folder: Path, slot: tuple[int, ...], fn: Callable[[], Any],
               lock: GpuLock) -> Any:
        from ccpo_lab.launch.heldjob import LockedExecutor

        ex = LockedExecutor(folder=folder, fds=lock.fds, python=self.python)
        ex.update_parameters(timeout_min=NO_TIMEOUT_MIN, gpus_per_node=len(slot),
                             visible_gpus=tuple(slot), signal_delay_s=30)
        return ex.submit(fn)

    def run(self, tasks: Sequence[tuple[str, Callable[[], Any], Path]],
            on_start: Callable[[str, Any, tuple[int, ...]], None] | None = None,
            on_end: Callable[[str, Any], None] | None = None,
            should_start: Callable[[str], bool] | None = None,
            tick: Callable[[], object] | None = None) -> dict[str, Any]:
        """Run every ``(key, fn, folder)`` task; return ``{key: submitit job}``.

        ``should_start(key)`` is asked just before a task starts (False skips it);
        ``on_start(key, job, slot)`` / ``on_end(key, job)`` are called around each task;
        ``tick()`` after every poll. A task starts on the first free slot whose GPUs (and
        sweep slot) it can lock (:func:`ccpo_lab.launch.gpulock.try_lock`), and its job
        inherits the locks; while other runs hold them all (another sweep's, or this
        sweep's from an earlier pool), the queue waits.
        """
        state = _PoolState(queue=list(tasks), free=list(range(len(self.slots))))
        try:
            while (state.queue and not self._stop) or state.running:
                self._fill(state, should_start, on_start)
                self._reap(state, on_end)
                if tick is not None:
                    tick()
                if state.running or state.queue:
                    time.sleep(self.poll_s)
        except BaseException:
            for r in state.running:
                r.job.cancel(check=False)
                r.lock.release()
            raise
        return state.jobs

    def _fill(self, st: _PoolState, should_start: Callable[[str], bool] | None,
              on_start: Callable[[str, Any, tuple[int, ...]], None] | None) -> None:
        """Start queued tasks on the free slots whose GPUs lock (or say once that the
        queue waits for another sweep)."""
        while st.queue and st.free and not self._stop:
            got = next(((s, lk) for s in st.free if (lk := self._lock(s)) is not None), None)
            if got is None:
                if not st.said_waiting:
                    print("waiting: every free slot is held by runs still executing (another "
                          "sweep's on the same GPUs, or this sweep's started by an earlier "
                          f"pool) (slot {_slot_text([self.slots[st.free[0]]])} ...)",
                          flush=True)
                    st.said_waiting = True
                return
            slot, lock = got
            key, fn, folder = st.queue.pop(0)
            if should_start is not None and not should_start(key):
                lock.release()
                continue
            st.free.remove(slot)
            try:
                job = self._start(folder, self.slots[slot], fn, lock)
            except BaseException:
                lock.release()
                raise
            st.jobs[key] = job
            st.running.append(_Running(key, slot, job, time.time(), lock))
            if on_start is not None:
                on_start(key, job, self.slots[slot])

    @staticmethod
    def _reap(st: _PoolState, on_end: Callable[[str, Any], None] | None) -> None:
        """Free the slots of finished tasks (and this pool's hold on their locks: a run
        that outlived its job still holds them)."""
        still = []
        for r in st.running:
            if r.job.done():
                r.lock.release()
                st.free.append(r.slot)
                st.free.sort()
                if on_end is not None:
                    on_end(r.key, r.job)
            else:
                still.append(r)
        st.running = still


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
    tasks = [(str(d), RunJob(d, placement_here, isolate=True), RunDir(Path(d)).logs / "%j")
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
    atomic_write_json(queue, {"runs": list(run_dirs), "slots": [list(s) for s in slots],
                              "python": python, "slot_locks": str(jobs_dir)})
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


def placement_here() -> Placement:
    """Inside a job of submitit's local executor: this machine, its task and GPU slice."""
    from submitit.local.local import LocalJobEnvironment

    env = LocalJobEnvironment()
    return Placement(hosts=tuple(env.hostnames), rank=env.global_rank, ntasks=env.num_tasks,
                     gpus=visible_gpus(), job_id=os.environ.get("SUBMITIT_LOCAL_JOB_ID"))


class LocalLauncher(Launcher):
    """A slot pool on this machine (see the module docstring)."""

    kind = "local"
    settings_class = LocalSettings
    poll_s = 1.0

    @property
    def local(self) -> LocalSettings:
        """The settings, typed."""
        assert isinstance(self.settings, LocalSettings)
        return self.settings

    def check(self) -> None:
        """One node; a run that needs GPUs gets exactly what it needs."""
        super().check()
        given, need = self.local.gpus_per_run, self.needs.gpus
        if given is not None and need and given != need:
            raise UserError(f"launcher.gpus_per_run ({given}) must equal the {need} GPUs a "
                            "run needs (its backend states them), or be left out",
                            key="launcher.gpus_per_run", value=given, valid=[need])

    def slots(self) -> list[tuple[int, ...]]:
        """The pool's slots on this machine (:class:`UserError` if it lacks the GPUs)."""
        return gpu_slots(self.local, detect_gpus(), self.needs)

    def prepare(self) -> None:
        """This machine has the GPUs of at least one slot."""
        self.slots()

    def placement(self) -> Placement:
        """One task on this machine; its slice is known when it starts."""
        return Placement()

    def resources(self) -> str:
        """``2 GPU, 4 at once`` / ``1 CPU slot, 2 at once``."""
        g = per_run_gpus(self.local, self.needs)
        return f"{f'{g} GPU' if g else '1 CPU slot'}, {self.local.max_parallel} at once"

    def parallel_runs(self) -> int:
        """``max_parallel``."""
        return self.local.max_parallel

    def call_in_job(self, fn: Callable[[Any], T], arg: Any, *, name: str,
                    timeout_min: int = 20) -> tuple[str, T]:
        """One job of submitit's local executor with a run's GPU slice size, run by the
        run's interpreter (no slot lock: it does not wait for a sweep's runs)."""
        from submitit import LocalExecutor

        ex = LocalExecutor(folder=self.sweep.jobs.resolve() / name / "%j", max_num_timeout=0,
                           python=self.job_python())
        ex.update_parameters(timeout_min=timeout_min,
                             gpus_per_node=per_run_gpus(self.local, self.needs))
        job = ex.submit(fn, arg)
        return f"local job {job.job_id}", job.result()

    def preview(self, n_runs: int) -> list[str]:
        """The pool that would start (its slots are known once this machine is asked)."""
        g = per_run_gpus(self.local, self.needs)
        slots = f"{g} GPU(s)" if g else "a CPU slot"
        return [f"a detached pool (its queue and log in {self.sweep.jobs}/) running {n_runs} "
                f"runs, at most {self.local.max_parallel} at once, each on {slots} under "
                "submitit's local executor (logs: <run>/logs/)"]

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """This machine's slots for the sweep."""
        try:
            slots = self.slots()
        except UserError as e:
            return [("local launcher", "FIX", str(e))]
        return [("local launcher", "ok", f"{len(slots)} slot(s): {_slot_text(slots)}")]

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """A detached pool (``wait`` or not: waiting only watches it)."""
        slots = self.slots()
        dirs = [str(rd.path.resolve()) for rd in runs]
        text = _slot_text(slots)
        record: dict[str, Any] = {"slots": [list(s) for s in slots]}
        # job.json names the queue before the pool starts, so the pool's updates come after.
        pid, queue, log = spawn_pool(self.sweep.path, dirs, slots, before_start=lambda q: (
            parallel(lambda rd: rd.record_job(launcher=self.kind, pool_queue=str(q)), runs)),
            python=self.job_python())
        return Submission(runs=tuple(runs), detached=True,
                          record={"pool_pid": pid, "queue": str(queue), **record},
                          message=f"started a local pool (pid {pid}) for {len(runs)} runs on "
                                  f"{len(slots)} slots ({text}); pool log: {log}")

    @classmethod
    def detect(cls) -> Placement | None:
        """Inside a job of submitit's local executor."""
        return placement_here() if os.environ.get("SUBMITIT_EXECUTOR") == "local" else None

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """(No process holds the run.) A run recorded running lost its executor: it is
        interrupted. A pending run is queued while its pool lives (or its job starts)."""
        if file_state in TERMINAL:
            return Reconciled(file_state)
        if file_state in ("running", "requeued"):
            return Reconciled("interrupted", gone(state))
        if job.get("pid") is not None and controller_alive(job["pid"]):
            return Reconciled("pending", "", True)  # its job is starting
        pool = job.get("pool_pid") or queue_pid(job.get("pool_queue"))
        if job.get("pid") is None and pool is not None and pool_alive(pool):
            return Reconciled("pending", "", True)
        return Reconciled("pending", "not queued: a relaunch submits it")

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """A queued run is dequeued (its pool skips a cancelled run); a running one is
        interrupted by the caller (SIGINT to the process that holds it)."""
        return [(r, "dequeued" if r.live and r.state == "pending" else "marked cancelled")
                for r in rows], []


def _slot_text(slots: Sequence[tuple[int, ...]]) -> str:
    return ", ".join(",".join(map(str, s)) or "cpu" for s in slots)


def main(argv: list[str] | None = None) -> int:
    """Entry of the detached pool: ``python -m ccpo_lab.launch.local QUEUE_FILE``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ccpo_lab.launch.local QUEUE_FILE", file=sys.stderr)
        return 2
    # run as ``-m``, this module is ``__main__``: use the importable one, so that what the
    # pool pickles for its jobs (RunJob's placement function) is found by reference there
    from ccpo_lab.launch import local as this

    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    slots = [tuple(s) for s in spec["slots"]]
    # a queue written before slot locks: its sweep's jobs directory holds them
    slot_locks = Path(spec.get("slot_locks") or Path(args[0]).resolve().parent)
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
