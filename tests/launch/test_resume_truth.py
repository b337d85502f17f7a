"""The plan and the run say where a relaunched run really starts.

A partial run resumes from the checkpoint its backend finds; when its checkpoints are
gone (deleted, a scratch disk wiped), it restarts from step 0, and ``--dry-run``, the
launch's summary and the run's own log say so instead of promising a checkpoint.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.plan import plan_sweep
from ccpo_lab.launch.submit import decide
from ccpo_lab.runs.layout import RunDir, init_run_dir
from ccpo_lab.runs.metrics import append_metrics


def _one_run(workdir: Path) -> tuple[list[str], RunDir]:
    args = ["sweep", str(workdir / "sweeps" / "smoke.yaml"), "arms=[grpo]", "seeds=[0]",
            "launcher=inline", "--results", str(workdir / "results")]
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", args[2:5])
    (p,) = plan_sweep(sw, workdir / "results")
    assert p.run_dir is not None
    init_run_dir(p.run_dir, p.run)
    return args, p.run_dir


def _plan(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    assert main([*args, "--dry-run"]) == 0
    return capsys.readouterr().out


def test_dry_run_names_the_checkpoint_a_run_resumes_from_or_says_it_restarts(
        workdir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the plan's row on one line
    args, rd = _one_run(workdir)
    rd.write_state("interrupted", step=3, error="executor pid 9 killed by SIGKILL")
    rd.checkpoints.mkdir()
    (rd.checkpoints / "step-000002.pt").write_bytes(b"")
    for step in range(4):       # the local backend resumes from a checkpoint whose row exists
        append_metrics(rd.metrics, step, {"val/success_rate": 0.25})
    out = _plan(capsys, args)
    assert "resume: interrupted at step 3; resumes from its checkpoint at step 2" in out
    assert "1 resume" in out
    shutil.rmtree(rd.checkpoints)
    out = _plan(capsys, args)
    assert "restart: interrupted at step 3; no checkpoint left: restarts from step 0" in out
    assert "1 restart" in out and "resumes from its checkpoint" not in out
    # a failed run retried says the same
    rd.write_state("failed", step=3, error="RuntimeError: boom")
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", args[2:5])
    (d,) = decide(plan_sweep(sw, workdir / "results"), rd.path.parents[1], retry_failed=True)
    assert (d.action, d.reason) == ("retry", "failed, --retry-failed: no checkpoint left: "
                                             "restarts from step 0")


@pytest.mark.slow
def test_a_run_whose_checkpoints_are_gone_says_it_restarts_from_step_0(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args, rd = _one_run(workdir)
    rd.write_state("interrupted", step=3, error="executor pid 9 killed by SIGKILL")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "1 restart" in out
    assert (f"grpo seed 0: no checkpoint left in {rd.checkpoints} (an earlier attempt "
            "reached step 3): restarting from step 0") in out
    assert rd.read_state()["state"] == "completed"
    # and a run that has its checkpoint says where it resumes
    rd.write_state("interrupted", step=4)
    (rd.checkpoints / "step-000004.pt").unlink()
    assert main([*args]) == 0
    out = capsys.readouterr().out
    assert "grpo seed 0: resuming from its checkpoint at step 2" in out
