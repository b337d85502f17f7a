"""What a researcher at an 80-column terminal sees: the status table (progress, steps/s,
ETA, the log to follow), the dry-run plan (what happens to each run, the Slurm batch
script), lint warnings once, and a run that never trained replaced without --new-run."""

from __future__ import annotations

import io
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.display import print_status
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.launch.plan import plan_sweep
from ccpo_lab.launch.status import RunStatus, collect_status
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.runs.execute import ProgressLines
from ccpo_lab.runs.layout import RunDir, SweepDir, init_run_dir
from ccpo_lab.runs.metrics import append_metrics
from ccpo_lab.runs.owner import acquire


def _init(workdir: Path, *overrides: str) -> dict[tuple[str, int], RunDir]:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", list(overrides))
    out = {}
    for p in plan_sweep(sw, workdir / "results"):
        assert p.run_dir is not None
        init_run_dir(p.run_dir, p.run)
        out[(p.run.arm, p.run.seed)] = p.run_dir
    write_manifest(sw, sw.sweep_dir(workdir / "results"),
                   [(p.run, p.run_dir) for p in plan_sweep(sw, workdir / "results")
                    if p.run_dir is not None])
    return out


def _render(rows: list[RunStatus], width: int = 80) -> str:
    from rich.console import Console

    buf = io.StringIO()
    print_status(Console(file=buf, width=width, color_system=None), rows, "sweep s")
    return buf.getvalue()


def _row(**kw: object) -> RunStatus:
    base: dict[str, object] = dict(
        path=Path("/r/s/ccpo-return-hard-fbjw/seed-2"), arm="ccpo-return-hard-fbjw", seed=2,
        state="running", file_state="running", launcher="slurm", job_id="1234567_14",
        scheduler="RUNNING", step=60, total=60, last_val=0.4583, elapsed_s=115.0,
        stdout="/r/s/_jobs/1234567_14/1234567_14_0_log.out", stderr=None, error=None,
        traceback=None, live=True, steps_per_s=0.75, eta_s=4000.0)
    base.update(kw)
    return RunStatus(**base)  # type: ignore[arg-type]


def test_the_status_table_fits_80_columns_without_cropping() -> None:
    rows = [_row(), _row(arm="ccpo-return-hard", seed=10, step=7, total=150, state="pending",
                         live=True, eta_s=None, steps_per_s=None, elapsed_s=None),
            _row(arm="grpo", state="interrupted", live=False, note="Slurm: NODE_FAIL; a "
                 "relaunch resumes it", eta_s=None, error="executor pid 9 killed by SIGKILL")]
    text = _render(rows)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    for value in ("ccpo-return-hard-fbjw", "60/60", "0:01:55", "1:06:40", "1.33", "0.458",
                  "7/150", "interrupted*", "executor pid 9 killed by SIGKILL"):
        assert value in text, value
    # the log to follow, with the job and the process
    assert "ccpo-return-hard-fbjw seed 2 (job 1234567_14), its log:\n  tail -f " in text
    assert "1234567_14_0_log.out" in text
    assert "runs: 1 running, 1 pending, 1 interrupted; the running ones end in 1:06:40" in text


def test_steps_per_second_and_eta_come_from_the_attempt(workdir: Path) -> None:
    dirs = _init(workdir, "arms=[grpo]", "seeds=[0]")
    rd = dirs[("grpo", 0)]
    t0 = datetime.now(timezone.utc) - timedelta(seconds=100)
    state = rd.read_state()
    state.update(state="running", step=30, total_steps=60, started=t0.isoformat(),
                 rate_from={"step": 10, "time": (t0 + timedelta(seconds=20)).isoformat()},
                 updated=(t0 + timedelta(seconds=60)).isoformat())
    rd.state_json.write_text(__import__("json").dumps(state))
    with acquire(rd):
        (row,) = collect_status(workdir / "results" / "smoke")
    assert row.state == "running" and row.steps_per_s == pytest.approx(0.5)
    assert row.eta_s == pytest.approx(60.0)
    # the first step an attempt records is its origin
    rd.write_state("running", rate_from=None)
    rd.write_state("running", step=31)
    assert rd.read_state()["rate_from"]["step"] == 31


def test_a_run_prints_a_line_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    progress = ProgressLines("grpo seed 0")
    progress(0, 40, None)
    progress(1, 40, 0.25)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("grpo seed 0: step 0/40")
    assert "grpo seed 0: step 1/40, " in out[1] and " s/step, ETA 0:" in out[1]
    assert out[1].endswith("held-out 0.250")


def test_the_plan_says_what_happens_to_each_run(workdir: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    two = ["arms=[ccpo-return-hard,ccpo-return-hard-fbjw]",
           "analysis.reference=ccpo-return-hard"]
    dirs = _init(workdir, *two)
    dirs[("ccpo-return-hard", 0)].write_state("completed")
    dirs[("ccpo-return-hard", 1)].write_state("failed", error="RuntimeError: boom", step=3)
    dirs[("ccpo-return-hard-fbjw", 0)].write_state("cancelled", step=3)
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), *two, "--dry-run",
                 "--results", str(workdir / "results")]) == 0
    text = capsys.readouterr().out
    table = [line for line in text.splitlines() if line.startswith(" ") and "python" not in
             line]
    assert len(table) >= 6 and max(len(line) for line in table) <= 80, text
    lines = {tuple(x.split()[:2]): x for x in text.splitlines() if x.startswith(" ccpo")}
    assert "skip: completed" in lines[("ccpo-return-hard", "0")]
    assert "skip: failed (resubmit with" in lines[("ccpo-return-hard", "1")]  # folded
    assert "--retry-failed)" in text
    # no checkpoint in its directory: it restarts, and the plan says so (issue 27 item 9)
    assert "restart: cancelled at step 3; no" in lines[("ccpo-return-hard-fbjw", "0")]
    assert "no checkpoint left: restarts from step 0" in " ".join(text.split())
    assert "resume: pending, not queued" in lines[("ccpo-return-hard-fbjw", "1")]


def test_the_slurm_plan_shows_its_batch_script_once(repo: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    assert main(["sweep", str(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml"), "--dry-run",
                 "--results", str(tmp_path / "results")]) == 0
    text = capsys.readouterr().out
    assert "#SBATCH --array=0-14%4" in text and "#SBATCH --gpus-per-node=8" in text
    assert text.count("#SBATCH --array") == 1
    assert text.count("python3 -m ccpo_lab.backends.verl.agent.trainer") == 1
    assert len(text.encode()) < 12_000
    assert main(["sweep", str(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml"), "--dry-run",
                 "--commands", "--results", str(tmp_path / "results")]) == 0
    assert capsys.readouterr().out.count("python3 -m ccpo_lab.backends.verl.agent.trainer") == 15
    assert not (tmp_path / "results").exists()


def test_lint_warnings_are_shown_once_per_sweep(workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sweep", str(workdir / "sweeps" / "smoke.yaml"),
            "arms=[ccpo-return-hard,ccpo-return-hard-fbjw]", "analysis.reference=ccpo-return-hard",
            "launcher=inline", "--results", str(workdir / "results")]
    dirs = _init(workdir, *args[2:5])
    for rd in dirs.values():
        rd.write_state("completed")
    SweepDir(workdir / "results" / "smoke").write_manifest({})  # launched before the record
    assert main(args) == 0  # nothing to submit: every run completed
    err = capsys.readouterr().err
    # one warning for the two arms that share it
    assert err.count("warning:") == 1
    assert "ccpo-return-hard, ccpo-return-hard-fbjw: rho = 0" in err
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err
    assert main([*args, "--dry-run"]) == 0  # planning shows them again
    assert "rho = 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_that_never_trained_is_replaced_without_new_run(
        workdir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the plan's reasons on one line
    dirs = _init(workdir, "arms=[grpo]", "protocol.lr=0.5")
    failed, trained = dirs[("grpo", 0)], dirs[("grpo", 1)]
    failed.write_state("failed", error="RuntimeError: the games could not be generated")
    (failed.checkpoints / "best").mkdir(parents=True)  # its step-0 evaluation's checkpoint
    (failed.checkpoints / "best" / "best.json").write_text('{"step": 0}')
    trained.write_state("failed", error="RuntimeError: boom", step=1)
    append_metrics(trained.metrics, 0, {"val/success_rate": 0.0})
    append_metrics(trained.metrics, 1, {"val/success_rate": 0.0})
    sweep = str(workdir / "sweeps" / "smoke.yaml")
    # the corrected configuration: seed 0 failed before its first step, seed 1 trained
    with pytest.raises(UserError, match="1 of 2 runs would overwrite a different run"):
        launch_sweep(load_sweep(sweep, ["arms=[grpo]"]), workdir / "results")
    assert main(["sweep", sweep, "arms=[grpo]", "seeds=[0]", "--dry-run",
                 "--results", str(workdir / "results")]) == 0
    assert "replace: the run there failed before its first step: RuntimeError: the " \
           "games" in capsys.readouterr().out
    old_id = failed.read_run()["run_id"]
    sw = load_sweep(sweep, ["arms=[grpo]", "seeds=[0]", "protocol.total_steps=1",
                            "launcher=inline"])
    assert launch_sweep(sw, workdir / "results") == 0
    out = capsys.readouterr().out.replace("\n", " ")
    assert "the run in" in out and "failed before its first step" in out
    assert "replaced by this configuration" in out
    assert failed.read_state()["state"] == "completed"
    assert failed.read_run()["run_id"] == sw.runs[0].run_id != old_id
    (kept,) = (workdir / "results" / "smoke" / "_replaced" / "grpo").iterdir()
    assert RunDir(kept).read_run()["run_id"] == old_id
    assert "games could not" in RunDir(kept).read_state()["error"]
    assert [r.seed for r in collect_status(workdir / "results" / "smoke")] == [0, 1]
    assert os.path.isdir(trained.path)
