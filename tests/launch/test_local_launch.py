"""The ``local`` launcher with the real CPU backend: a detached pool, GPU slices, cancel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.pool import controller_alive, pool_alive
from ccpo_lab.launch.slots import NUM_GPUS_ENV
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.layout import RunDir, SweepDir
from ccpo_lab.runs.metrics import read_metrics
from tests.conftest import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def sweep_dir(workdir: Path) -> Iterator[Path]:
    """``<workdir>/results/smoke``; whatever still runs there is cancelled afterwards."""
    d = workdir / "results" / "smoke"
    yield d
    if d.is_dir():
        cancel_runs(d)


def _sweep(workdir: Path, *overrides: str) -> list[str]:
    return ["sweep", str(workdir / "sweeps" / "smoke.yaml"), "launcher=local", *overrides,
            "--results", str(workdir / "results")]


def test_detached_pool_runs_on_gpu_slices(workdir: Path, sweep_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(NUM_GPUS_ENV, "2")  # a fake 2-GPU machine, one GPU per run
    two = ["seeds=[0]", "launcher.gpus_per_run=1"]
    assert main(_sweep(workdir, *two, "launcher.max_parallel=4")) == 0
    out = capsys.readouterr().out
    assert "started a local pool" in out and "on 2 slots (0, 1)" in out
    pool = SweepDir(sweep_dir).read_manifest()["submissions"][-1]["pool_pid"]
    rows = wait_until(lambda: (r := collect_status(sweep_dir)) and all(x.terminal for x in r) and r,
                 120, "the two runs")
    assert [r.state for r in rows] == ["completed"] * 2
    gpus = [RunDir(r.path).read_job()["gpus"] for r in rows]
    assert set(gpus) == {"0", "1"}
    for r in rows:
        assert [m["step"] for m in read_metrics(r.path / "metrics.jsonl")] == [0, 1, 2, 3, 4]
        assert Path(str(r.stdout)).is_file()
    wait_until(lambda: not pool_alive(pool), 120, "the pool to exit")
    # relaunch: every run completed, nothing starts
    assert main(_sweep(workdir, *two)) == 0
    out = capsys.readouterr().out
    assert "2 skipped (completed)" in out and "nothing to submit" in out
    assert main(["cancel", str(sweep_dir)]) == 0
    assert "nothing to cancel" in capsys.readouterr().out


def test_cancel_then_relaunch_resumes(workdir: Path, sweep_dir: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    long_run = ["arms=[grpo]", "seeds=[0]", "protocol.total_steps=300"]
    assert main(_sweep(workdir, *long_run)) == 0
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    wait_until(lambda: int(rd.read_state().get("step", 0)) >= 2, 60, "two steps")
    pid = rd.read_job()["pid"]  # submitit's controller; the run executes in its child
    run_pid = rd.read_state()["pid"]
    capsys.readouterr()
    assert main(["cancel", str(sweep_dir)]) == 0
    assert f"SIGINT pid {run_pid}, stopped in" in capsys.readouterr().out
    wait_until(lambda: not controller_alive(pid), 120, "the run's job to end")
    (row,) = collect_status(sweep_dir)
    assert row.state == "cancelled" and not row.live
    # a relaunch resumes the cancelled run from its checkpoint
    assert main(_sweep(workdir, *long_run)) == 0
    assert "1 resume" in capsys.readouterr().out
    wait_until(lambda: rd.read_job().get("pid") not in (None, pid)
          and rd.read_state().get("state") == "running", 60, "the resumed run")
    assert len(rd.read_job()["history"]) == 1
