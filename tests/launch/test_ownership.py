"""One executor per run, truthful status and cancel, interrupted runs, Ctrl-C on ``--wait``.

Real ``ccpo-lab`` processes on the CPU backend (sweeps/smoke.yaml), each step bounded in
time. A test starts its second actor once the first one's state says what it waits for
(a run running at step k), so the outcome does not depend on timing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.display import follow_lines
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import read_metrics
from tests.conftest import wait_until

pytestmark = pytest.mark.slow


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ccpo_lab.cli.main", *args]


def _sweep(workdir: Path, *overrides: str) -> list[str]:
    return ["sweep", str(workdir / "sweeps" / "smoke.yaml"), "arms=[grpo]", *overrides,
            "--results", str(workdir / "results")]


def _start(args: list[str], log: Path, **kw: Any) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(_cli(*args), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **kw)


def _step(rd: RunDir) -> int:
    return int(rd.read_state().get("step") or 0)


def _running_at(rd: RunDir, step: int) -> bool:
    return rd.read_state().get("state") == "running" and _step(rd) >= step


def _steps(rd: RunDir) -> list[int]:
    return [int(m["step"]) for m in read_metrics(rd.metrics)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and \
        "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]


@pytest.fixture
def sweep_dir(workdir: Path) -> Iterator[Path]:
    """``<workdir>/results/smoke``; whatever still runs there is cancelled afterwards."""
    d = workdir / "results" / "smoke"
    yield d
    if d.is_dir():
        cancel_runs(d, grace_s=2)


# ------------------------------------------------------------------ one executor per run
def test_a_run_held_by_another_process_is_left_to_it(workdir: Path, sweep_dir: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.plan import plan_sweep
    from ccpo_lab.runs.layout import init_run_dir
    from ccpo_lab.runs.owner import acquire

    overrides = ["arms=[grpo]", "protocol.total_steps=2", "launcher=inline"]
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", overrides)
    for p in plan_sweep(sw, workdir / "results"):  # two pending runs, never submitted
        assert p.run_dir is not None
        init_run_dir(p.run_dir, p.run)
    seed0, seed1 = RunDir(sweep_dir / "grpo" / "seed-0"), RunDir(sweep_dir / "grpo" / "seed-1")
    with acquire(seed0) as lock:  # this test process executes seed 0
        assert lock.locked
        r = subprocess.run(_cli(*_sweep(workdir, *overrides)), capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 1, r.stdout + r.stderr  # seed 0 did not complete there
        assert "1 skipped (already running" in r.stdout
        assert seed0.read_state()["state"] == "pending" and _steps(seed0) == []
        assert seed1.read_state()["state"] == "completed" and _steps(seed1) == [0, 1, 2]
        # the executor itself refuses it, touching nothing
        before = seed0.state_json.read_bytes()
        r = subprocess.run([sys.executable, "-m", "ccpo_lab.runs.execute", str(seed0.path)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 75 and f"already executed by pid {os.getpid()}" in r.stderr
        assert seed0.state_json.read_bytes() == before
        (row,) = [x for x in collect_status(sweep_dir) if x.seed == 0]
        assert row.state == "running" and row.live and row.owner is not None
        assert row.owner.pid == os.getpid()
    (row,) = [x for x in collect_status(sweep_dir) if x.seed == 0]
    assert row.state == "pending" and not row.live and row.owner is None


@pytest.mark.parametrize("second_after_first_runs", [True, False],
                         ids=["second-launch-later", "both-at-once"])
def test_two_launches_into_one_directory_execute_each_run_once(
        workdir: Path, sweep_dir: Path, tmp_path: Path, second_after_first_runs: bool) -> None:
    # the second launch starts seed 1 while the first is still on seed 0, and takes
    # longer: without one owner per run, the first one executes seed 1 a second time
    args = _sweep(workdir, "seeds=[0,1]", "launcher=inline", "protocol.total_steps=12")
    first = _start(args, tmp_path / "a.log")
    seed0 = RunDir(sweep_dir / "grpo" / "seed-0")
    if second_after_first_runs:
        wait_until(lambda: _running_at(seed0, 1), 120, "the first launch's first run")
    second = _start(args, tmp_path / "b.log")
    assert first.wait(timeout=300) == 0, (tmp_path / "a.log").read_text()
    assert second.wait(timeout=300) == 0, (tmp_path / "b.log").read_text()
    for seed in (0, 1):
        rd = RunDir(sweep_dir / "grpo" / f"seed-{seed}")
        assert rd.read_state()["state"] == "completed"
        assert _steps(rd) == list(range(13)), f"seed {seed}: {_steps(rd)}"
    if second_after_first_runs:
        assert "nothing to submit" in (tmp_path / "b.log").read_text()


# ------------------------------------------------------------------ cancel stops the runs
def test_cancel_stops_a_run_started_with_sigint_ignored(
        workdir: Path, sweep_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a background job of a non-interactive shell starts with SIGINT ignored
    cmd = " ".join(_cli(*_sweep(workdir, "seeds=[0]", "protocol.total_steps=300")))
    subprocess.run(["bash", "-c", f"{cmd} > {workdir}/bg.log 2>&1 &"], check=True, timeout=60)
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    # past its checkpoint at step 2, so that the relaunch below resumes (without one it
    # restarts from step 0, and says so: tests/launch/test_resume_truth.py)
    wait_until(lambda: _running_at(rd, 3), 120, "three steps (a checkpoint at step 2)")
    pid = int(rd.read_state()["pid"])
    capsys.readouterr()
    assert main(["cancel", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "cancelled grpo seed 0" in out and f"SIGINT pid {pid}, stopped in" in out
    # stopped, not only marked: the run no longer moves, and its process exits
    wait_until(lambda: not _alive(pid), 120, "the run's process to exit")
    step = _step(rd)
    time.sleep(3)
    assert _step(rd) == step and rd.read_state()["state"] == "cancelled"
    (row,) = collect_status(sweep_dir)
    assert row.state == "cancelled" and not row.live
    assert main([*_sweep(workdir, "seeds=[0]", "protocol.total_steps=300")]) == 0
    assert "1 resume" in capsys.readouterr().out


# ------------------------------------------------------------------ interrupted runs
def test_a_killed_run_is_interrupted_and_resumes(
        workdir: Path, sweep_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _sweep(workdir, "seeds=[0]", "protocol.total_steps=300")
    assert main(args) == 0
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    wait_until(lambda: _running_at(rd, 3), 120, "three steps (a checkpoint at step 2)")
    pid = int(rd.read_state()["pid"])
    os.kill(pid, signal.SIGKILL)
    # seen at once, then recorded (with the signal) by the job that supervised it
    row = wait_until(lambda: (r := collect_status(sweep_dir)[0]).terminal and r, 30,
                "the run to be seen stopped")
    assert row.state == "interrupted" and not row.live
    wait_until(lambda: rd.read_state()["state"] == "interrupted", 30, "the record")
    (row,) = collect_status(sweep_dir)
    assert row.state == "interrupted" and not row.live
    assert f"executor pid {pid} killed by SIGKILL" in str(row.error)
    capsys.readouterr()
    assert main(["status", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "interrupted" in out and "killed by SIGKILL" in out
    # the rule: an interrupted run resumes on relaunch (no --retry-failed)
    assert main(args) == 0
    assert "1 resume" in capsys.readouterr().out
    wait_until(lambda: _running_at(rd, 3) and int(rd.read_state()["pid"]) != pid, 120,
          "the resumed run")
    assert rd.read_state()["restarts"] == 0 and 0 in _steps(rd)


def test_a_run_whose_job_wrapper_dies_goes_on_and_shows_running(
        workdir: Path, sweep_dir: Path) -> None:
    assert main(_sweep(workdir, "seeds=[0]", "protocol.total_steps=10")) == 0
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    wait_until(lambda: _running_at(rd, 1), 120, "the run to start")
    controller = int(rd.read_job()["pid"])  # submitit's local controller of the job
    assert controller != int(rd.read_state()["pid"])
    os.kill(controller, signal.SIGKILL)
    wait_until(lambda: not _alive(controller), 120, "the controller to die")
    (row,) = collect_status(sweep_dir)
    assert row.state == "running" and row.live and not row.note
    head, follow = follow_lines([row])
    assert f"grpo seed 0 (job {controller}, pid " in head and follow.startswith("  tail -f ")
    row = wait_until(lambda: (r := collect_status(sweep_dir)[0]).terminal and r, 120,
                "the run to finish")
    assert row.state == "completed" and _steps(rd) == list(range(11))
    # the run's log has a line per step to follow
    assert "grpo seed 0: step 10/10, " in Path(str(row.log)).read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "hangup"])
def test_wait_detaches_on_ctrl_c_and_hangup(workdir: Path, sweep_dir: Path, tmp_path: Path,
                                            sig: signal.Signals) -> None:
    log = tmp_path / "wait.log"
    # a terminal's foreground job: its own process group, which Ctrl-C / hang-up signal
    proc = _start([*_sweep(workdir, "seeds=[0,1]", "protocol.total_steps=8"), "--wait"], log,
                  start_new_session=True)
    rds = [RunDir(sweep_dir / "grpo" / f"seed-{k}") for k in (0, 1)]
    wait_until(lambda: any(_running_at(rd, 1) for rd in rds), 120, "a run to start")
    os.killpg(proc.pid, sig)
    rc = proc.wait(timeout=300)
    text = log.read_text()
    assert "Traceback" not in text, text
    if sig == signal.SIGINT:
        assert rc == 130
        assert "the runs go on" in text and f"ccpo-lab cancel {sweep_dir}" in text
    rows = wait_until(lambda: (r := collect_status(sweep_dir)) and all(x.terminal for x in r) and r,
                 240, "the runs to finish")
    assert [r.state for r in rows] == ["completed", "completed"]
    assert all(_steps(rd) == list(range(9)) for rd in rds)


def test_inline_hangup_records_interrupted(workdir: Path, sweep_dir: Path,
                                           tmp_path: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.plan import plan_sweep
    from ccpo_lab.launch.submit import decide

    args = _sweep(workdir, "seeds=[0]", "protocol.total_steps=300", "launcher=inline")
    proc = _start(args, tmp_path / "inline.log", start_new_session=True)
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    wait_until(lambda: _running_at(rd, 3), 120, "three steps (a checkpoint at step 2)")
    os.killpg(proc.pid, signal.SIGHUP)
    assert proc.wait(timeout=300) == 128 + signal.SIGHUP
    st = rd.read_state()
    assert st["state"] == "interrupted" and "SIGHUP" in st["error"]
    (row,) = collect_status(sweep_dir)
    assert row.state == "interrupted" and not row.live
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    ["arms=[grpo]", "seeds=[0]", "protocol.total_steps=300"])
    (d,) = decide(plan_sweep(sw, workdir / "results"), sweep_dir, retry_failed=False)
    assert d.action == "resume"
