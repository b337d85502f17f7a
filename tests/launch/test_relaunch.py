"""Relaunch decisions, conflicts, status reconciliation and failure display (no training)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.plan import plan_sweep
from ccpo_lab.launch.slurm import SlurmLauncher
from ccpo_lab.launch.status import collect_status
from ccpo_lab.launch.submit import decide, launch_sweep
from ccpo_lab.runs.layout import RunDir, SweepDir, init_run_dir
from ccpo_lab.runs.owner import acquire
from tests.conftest import snapshot


def _init(workdir: Path, *overrides: str) -> tuple[object, dict[tuple[str, int], RunDir]]:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", list(overrides))
    dirs = {}
    for p in plan_sweep(sw, workdir / "results"):
        assert p.run_dir is not None
        init_run_dir(p.run_dir, p.run)
        dirs[(p.run.arm, p.run.seed)] = p.run_dir
    return sw, dirs


def test_decide_skips_completed_and_failed_resumes_partial(workdir: Path) -> None:
    sw, dirs = _init(workdir)
    arm2 = sw.config.arms[1]  # type: ignore[attr-defined]
    dirs[("grpo", 0)].write_state("completed")
    dirs[("grpo", 1)].write_state("failed", error="RuntimeError: boom")
    dirs[(arm2, 0)].write_state("cancelled")
    # (arm2, 1) stays pending and was never submitted
    plan = plan_sweep(sw, workdir / "results")  # type: ignore[arg-type]
    sweep_dir = workdir / "results" / "smoke"
    got = {(d.planned.run.arm, d.planned.run.seed): d.action
           for d in decide(plan, sweep_dir, retry_failed=False)}
    assert got == {("grpo", 0): "skip", ("grpo", 1): "skip", (arm2, 0): "resume",
                   (arm2, 1): "resume"}
    got = {(d.planned.run.arm, d.planned.run.seed): d.action
           for d in decide(plan, sweep_dir, retry_failed=True)}
    assert got[("grpo", 1)] == "retry" and got[("grpo", 0)] == "skip"


def test_decide_leaves_a_live_run_alone(workdir: Path) -> None:
    sw, dirs = _init(workdir, "seeds=[0]", "arms=[grpo]")
    rd = dirs[("grpo", 0)]
    # an inline run executing in a live process (this one): it holds the run's lock
    rd.record_job(launcher="inline", job_id=str(os.getpid()), pid=os.getpid())
    with acquire(rd):
        rd.write_state("running", pid=os.getpid(), host=os.uname().nodename)
        (d,) = decide(plan_sweep(sw, workdir / "results"),  # type: ignore[arg-type]
                      workdir / "results" / "smoke", retry_failed=True)
        assert d.action == "skip" and f"already running (pid {os.getpid()})" == d.reason
    # the same record once nobody holds the run: interrupted (resumes), not live
    (row,) = collect_status(workdir / "results" / "smoke")
    assert row.state == "interrupted" and not row.live
    assert f"executor pid {os.getpid()} gone without recording an outcome" in row.note
    (d,) = decide(plan_sweep(sw, workdir / "results"),  # type: ignore[arg-type]
                  workdir / "results" / "smoke", retry_failed=False)
    assert d.action == "resume"


def test_conflicting_relaunch_writes_nothing(workdir: Path) -> None:
    _init(workdir)
    before = snapshot(workdir / "results")
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["protocol.lr=0.5"])
    with pytest.raises(UserError) as e:
        launch_sweep(sw, workdir / "results")
    assert "nothing was launched" in str(e.value) and "protocol.lr" in str(e.value)
    assert snapshot(workdir / "results") == before


def test_bad_launcher_parameter_writes_nothing(workdir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    ["launcher=local", "launcher.gpus_per_run=4"])
    monkeypatch.setenv("CCPO_LAB_NUM_GPUS", "2")
    with pytest.raises(UserError) as e:
        launch_sweep(sw, workdir / "results")
    assert e.value.key == "launcher.gpus_per_run"
    assert not (workdir / "results").exists()


@pytest.mark.parametrize(("file_state", "sched", "expected"), [
    ("pending", "PENDING", ("pending", True)),
    ("pending", "RUNNING", ("running", True)),
    ("running", "RUNNING", ("running", True)),
    ("running", "PENDING", ("requeued", True)),      # scontrol requeue: killed, queued again
    ("requeued", "PENDING", ("requeued", True)),     # submitit checkpoint + requeue
    ("running", "CANCELLED", ("cancelled", False)),  # scancel: the job could not record it
    ("running", "TIMEOUT", ("interrupted", False)),  # its time limit after every requeue
    ("running", "NODE_FAIL", ("interrupted", False)),
    ("running", "PREEMPTED", ("interrupted", False)),
    ("running", "COMPLETED", ("interrupted", False)),  # ended without recording an outcome
    ("pending", "FAILED", ("failed", False)),        # died before Python (a setup line)
    ("running", "OUT_OF_MEMORY", ("failed", False)),
    ("completed", "COMPLETED", ("completed", False)),
    ("failed", "FAILED", ("failed", False)),
])
def test_reconcile_slurm(file_state: str, sched: str, expected: tuple[str, bool]) -> None:
    shown = SlurmLauncher.reconcile(file_state, {"launcher": "slurm", "job_id": "7_1"}, sched,
                                    {})
    assert (shown.state, shown.live) == expected


def test_status_shows_the_failure(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, dirs = _init(workdir, "seeds=[0]", "arms=[grpo]")
    rd = dirs[("grpo", 0)]
    err = rd.logs / "7_0_log.err"
    err.parent.mkdir(parents=True)
    err.write_text("".join(f"noise {i}\n" for i in range(40)) + "CUDA out of memory\n")
    rd.record_job(launcher="inline", pid=os.getpid(), stderr=str(err),
               stdout=str(err.with_suffix(".out")))
    rd.write_state("failed", error="ValueError: bad shape (4, 3)",
                   traceback="Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                             "ValueError: bad shape (4, 3)\n")
    sweep_dir = workdir / "results" / "smoke"
    assert main(["status", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "ValueError: bad shape (4, 3)" in out
    assert "CUDA out of memory" in out and "noise 39" in out and "noise 3\n" not in out
    assert main(["status", str(sweep_dir), "--json"]) == 0
    assert '"state": "failed"' in capsys.readouterr().out
    # --watch returns once every run is finished
    assert main(["status", str(sweep_dir), "--watch", "--interval", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "1 runs: 1 failed" in out and "ValueError: bad shape (4, 3)" in out


def test_cancel_marks_unsubmitted_runs_and_checks_names(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _init(workdir)
    sweep_dir = workdir / "results" / "smoke"
    assert main(["cancel", str(sweep_dir), "--arm", "nope"]) == 2
    assert "valid: ccpo-global-successor, grpo" in capsys.readouterr().err
    assert main(["cancel", str(sweep_dir), "--arm", "grpo", "--seed", "1"]) == 0
    assert "cancelled grpo seed 1" in capsys.readouterr().out
    states = {(r.arm, r.seed): r.state for r in collect_status(sweep_dir)}
    assert states[("grpo", 1)] == "cancelled"
    assert sorted(states.values()).count("pending") == 3
    assert RunDir(sweep_dir / "grpo" / "seed-1").read_job() == {}


def test_runs_are_found_without_a_manifest(workdir: Path) -> None:
    _, dirs = _init(workdir)
    found = SweepDir(workdir / "results" / "smoke").run_dirs()
    assert sorted(str(r.path) for r in found) == sorted(str(d.path) for d in dirs.values())


def test_status_of_a_non_sweep_directory(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(tmp_path)]) == 2
    assert "no runs found" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "missing")]) == 2
