"""Machine-wide GPU locks: held slices are refused, a dead holder frees its locks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from ccpo_lab.runs.gpulock import try_lock


def test_a_held_gpu_refuses_every_slice_that_contains_it(tmp_path: Path) -> None:
    a = try_lock((0, 1), tmp_path)
    assert a is not None and a.held
    assert try_lock((1, 2), tmp_path) is None
    c = try_lock((2,), tmp_path)          # the refused slice kept nothing: GPU 2 is free
    assert c is not None
    assert try_lock((), tmp_path) is not None  # a CPU slot needs no lock
    a.release()
    a.release()                                # idempotent
    assert not a.held
    b = try_lock((0, 1), tmp_path)
    assert b is not None
    b.release()
    c.release()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    code = ("import sys, time; from pathlib import Path; "
            "from ccpo_lab.runs.gpulock import try_lock; "
            "lk = try_lock((3,), Path(sys.argv[1])); print(lk is not None, flush=True); "
            "time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
        assert try_lock((3,), tmp_path) is None
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 5
    lock = try_lock((3,), tmp_path)
    while lock is None and time.time() < deadline:
        time.sleep(0.05)
        lock = try_lock((3,), tmp_path)
    assert lock is not None
    lock.release()


def test_a_runs_process_holds_its_inherited_locks_but_hands_them_to_no_program(
        tmp_path: Path) -> None:
    """The run's own process keeps the lock descriptors its job handed it, close-on-exec
    and out of the environment: a program it starts (Ray, the trainer) does not hold the
    GPU after the run ends."""
    import os

    from ccpo_lab.runs.gpulock import LOCK_FDS_ENV, keep_inherited_locks, lock_fds_env

    lock = try_lock((5,), tmp_path)
    assert lock is not None
    code = ("import os, subprocess, sys; from ccpo_lab.runs.gpulock import "
            "keep_inherited_locks; fds = keep_inherited_locks(); "
            "print(fds, [os.get_inheritable(f) for f in fds], os.environ.get("
            f"{LOCK_FDS_ENV!r}), flush=True)")
    out = subprocess.run([sys.executable, "-c", code], pass_fds=lock.fds, text=True,
                         env={**os.environ, **lock_fds_env(lock.fds)}, capture_output=True,
                         check=True).stdout.strip()
    assert out == f"({lock.fds[0]},) [False] None"
    lock.release()
    assert keep_inherited_locks() == ()
