"""Reliability round 3 (issue 36), items 1, 3 and 4: what ``cancel`` signals, the ids it
passes to the scheduler, and lock files that are links or FIFOs.

Everything happens in a temporary results folder; the "unrelated" processes are children
of the test, killed in a ``finally``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.slurm import SlurmLauncher, cancel_jobs, valid_job_id
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.gpulock import foreign, lock_dir, try_lock
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.owner import UnsafeLockFile, current_owner, lock_holders
from tests.conftest import wait_until


def _run_dir(workdir: Path) -> RunDir:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.manifest import write_manifest
    from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["arms=[grpo]", "seeds=[0]",
                                                        "launcher=inline"])
    sweep = sw.sweep_dir(workdir / "results")
    run = sw.runs[0]
    rd = resolve_run_dir(sweep, run)
    init_run_dir(rd, run)
    write_manifest(sw, sweep, [(run, rd)])
    return rd


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def _holder(lock: Path) -> subprocess.Popen[str]:
    """A child that takes the run's lock (as an executor does) and sleeps."""
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen]]:  # type: ignore[type-arg]
    procs: list[subprocess.Popen] = []  # type: ignore[type-arg]
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=300)


# ----------------------------------------------------------------------------- item 1
def test_cancel_never_signals_the_pid_a_lock_file_names(workdir: Path,
                                                        children: list) -> None:  # type: ignore[type-arg]
    rd = _run_dir(workdir)
    victim = _sleeper()
    children.append(victim)
    holder = _holder(rd.owner_lock)
    children.append(holder)
    # a stale or planted owner.lock: the text names the victim, the holder holds the lock
    rd.owner_lock.write_text(json.dumps({"pid": victim.pid, "host": socket.gethostname(),
                                         "since": "2026-12-04T00:00:00"}))
    assert current_owner(rd) is not None and lock_holders(rd) == [holder.pid]
    cancelled, problems = cancel_runs(rd.path.parent.parent, grace_s=5.0)
    assert victim.poll() is None, "cancel signalled the process the lock file names"
    wait_until(lambda: holder.poll() is not None, 30, "the real holder to be stopped")
    assert [c.status.arm for c in cancelled] == ["grpo"] and not problems


def test_a_lock_held_by_nobody_of_ours_is_not_signalled(workdir: Path,
                                                        children: list) -> None:  # type: ignore[type-arg]
    rd = _run_dir(workdir)
    victim = _sleeper()
    children.append(victim)
    rd.owner_lock.write_text(json.dumps({"pid": victim.pid, "host": socket.gethostname()}))
    assert lock_holders(rd) == []  # nobody holds it: the text alone proves nothing
    cancel_runs(rd.path.parent.parent, grace_s=1.0)
    assert victim.poll() is None


def test_the_window_before_a_run_records_its_pid(workdir: Path,
                                                children: list) -> None:  # type: ignore[type-arg]
    """Item 13: a run holds its lock a moment before ``state.json`` names its pid;
    ``status`` shows it running meanwhile and ``cancel`` stops the lock's holder."""
    rd = _run_dir(workdir)
    holder = _holder(rd.owner_lock)
    children.append(holder)
    rd.write_state("running", step=0)
    assert "pid" not in rd.read_state()
    (row,) = collect_status(rd.path.parent.parent)
    assert row.state == "running"
    cancelled, problems = cancel_runs(rd.path.parent.parent, grace_s=5.0)
    wait_until(lambda: holder.poll() is not None, 60, "the holder to be stopped")
    assert [c.status.arm for c in cancelled] == ["grpo"] and not problems


# ----------------------------------------------------------------------------- item 3
@pytest.mark.parametrize(("job_id", "ok"), [
    ("123", True), ("123_4", True), ("--user=root", False), ("-1", False), ("12;rm", False),
    ("123_", False), ("", False), ("1 2", False)])
def test_slurm_ids_are_validated(job_id: str, ok: bool) -> None:
    assert valid_job_id(job_id) is ok


def test_an_option_in_job_json_never_reaches_scancel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    ok, msg = cancel_jobs(["--user=root", "123_4"])
    assert calls == [["scancel", "--", "123_4"]]
    assert not ok and "--user=root" in msg and "not a Slurm job id" in msg


def test_slurm_cancel_reports_an_invalid_id_named(workdir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **_kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    rd = _run_dir(workdir)
    rd.record_job(launcher="slurm", job_id="--user=root")
    rows = collect_status(rd.path.parent.parent, scheduler=False)
    assert rows and rows[0].job_id == "--user=root"
    import dataclasses

    done, problems = SlurmLauncher.cancel([dataclasses.replace(r, live=True) for r in rows])
    assert not any("--user=root" in c for call in calls for c in call)
    assert any("job.json" in p and "--user=root" in p for p in problems)


# ----------------------------------------------------------------------------- item 4
def test_owner_lock_as_a_link_is_never_written_through(workdir: Path) -> None:
    rd = _run_dir(workdir)
    target = workdir / "precious.txt"
    target.write_text("the user's own file\n")
    rd.owner_lock.unlink(missing_ok=True)
    rd.owner_lock.symlink_to(target)
    cancelled, problems = cancel_runs(rd.path.parent.parent, grace_s=1.0)
    assert target.read_text() == "the user's own file\n"
    assert not cancelled and problems
    from ccpo_lab.runs.owner import acquire

    with pytest.raises(UnsafeLockFile, match="symbolic link"):
        acquire(rd)


def test_owner_lock_as_a_fifo_does_not_hang(workdir: Path) -> None:
    rd = _run_dir(workdir)
    rd.owner_lock.unlink(missing_ok=True)
    os.mkfifo(rd.owner_lock)
    sweep = str(rd.path.parent.parent)
    for args in (["status", sweep], ["cancel", sweep]):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args],
                              capture_output=True, text=True, timeout=120)
        assert time.monotonic() - t0 < 120 and "Traceback" not in proc.stderr, proc.stderr
    assert current_owner(rd) is None


def test_a_gpu_lock_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    d = tmp_path / "locks"
    d.mkdir()
    target = tmp_path / "target"
    target.write_text("x")
    target.chmod(0o600)
    (d / "gpu-0.lock").symlink_to(target)
    with pytest.raises(UnsafeLockFile):
        try_lock([0], directory=d)
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert try_lock([1], directory=d) is not None  # a regular lock file still works


def test_a_lock_folder_another_user_controls_is_not_used(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    monkeypatch.delenv("CCPO_LAB_GPU_LOCK_DIR", raising=False)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    shared = tmp_path / "ccpo-lab-gpu-locks"
    shared.mkdir()
    shared.chmod(0o1777)
    assert lock_dir() == shared and foreign(shared) is None
    os.chown(shared, 12345, 12345)  # created first by another user
    assert "another user" in (foreign(shared) or "")
    d = lock_dir()
    assert d != shared and d.name == f"ccpo-lab-gpu-locks-{os.getuid()}"
    assert "not used" in capsys.readouterr().err
    shared.chmod(0o777)  # writable by all without the sticky bit
    os.chown(shared, os.getuid(), os.getgid())
    assert "sticky" in (foreign(shared) or "")
