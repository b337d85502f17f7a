"""Slot allocation on one machine: its GPUs, the disjoint slices runs get, and the pool that
starts one job per free slot (submitit's local executor, :mod:`ccpo_lab.launch.heldjob`).

A run starts only once it holds the machine-wide locks of its slice
(:mod:`ccpo_lab.runs.gpulock`) and one of its sweep's ``max_parallel`` slot locks; its job
inherits them. The machine's GPUs are ``$CCPO_LAB_NUM_GPUS`` (a count), else
``$CUDA_VISIBLE_DEVICES``, else the ``nvidia-smi -L`` count, else none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccpo_lab.config.launchers.local import LocalSettings
from ccpo_lab.errors import UserError
from ccpo_lab.placement import Needs
from ccpo_lab.runs.gpulock import GpuLock, slot_lock_file, try_lock

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
        sweep slot) it can lock (:func:`ccpo_lab.runs.gpulock.try_lock`), and its job
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
                          f"pool) (slot {slot_text([self.slots[st.free[0]]])} ...)",
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


def slot_text(slots: Sequence[tuple[int, ...]]) -> str:
    """``0,1, 2,3`` / ``cpu, cpu``: the slots as the pool prints them."""
    return ", ".join(",".join(map(str, s)) or "cpu" for s in slots)
