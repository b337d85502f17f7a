"""ccpo-lab on a real Slurm: job arrays of the CPU backend, failures, cancel, requeue, relaunch.

Needs the local cluster (`make slurm-up`, which `make test` does); skipped otherwise.
Runs are tiny (sweeps/smoke.yaml with a few steps), so each test takes seconds of compute
and the rest is Slurm's scheduling (a requeued job waits ~10-15 s before it restarts).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.params import MAX_ARRAY_ENV
from ccpo_lab.launch.plan import plan_sweep
from ccpo_lab.launch.slurm import query_states
from ccpo_lab.launch.status import collect_status
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.runs.layout import RunDir, init_run_dir
from ccpo_lab.runs.metrics import read_metrics
from tests.conftest import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

TIMING_PREFIXES = ("timing", "time/", "perf/")
"""Wall-clock metrics differ between any two runs; everything else must not."""


@pytest.fixture(scope="module", autouse=True)
def cluster() -> None:
    """Skip unless the local Slurm answers."""
    if shutil.which("sinfo") is None:
        pytest.skip("sinfo is not on PATH: no Slurm here (run `make slurm-up`)")
    try:
        r = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.skip("sinfo timed out: the local Slurm is not up (run `make slurm-up`)")
    if r.returncode != 0:
        pytest.skip(f"the local Slurm is not up (run `make slurm-up`): {r.stderr.strip()}")


def _comparable(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(r["step"], {k: v for k, v in r["data"].items()
                         if not k.startswith(TIMING_PREFIXES)}) for r in rows]


def _sweep_args(workdir: Path, *overrides: str) -> list[str]:
    return ["sweep", str(workdir / "sweeps" / "smoke.yaml"), "launcher=slurm",
            "launcher.partition=debug", *overrides, "--results", str(workdir / "results")]


def test_array_lands_failure_shows_relaunch_skips(workdir: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["launcher=slurm"])
    sweep_dir = sw.sweep_dir(workdir / "results")
    # One run directory edited by hand: its job raises (config.yaml no longer hashes).
    broken = next(p for p in plan_sweep(sw, workdir / "results") if p.run.seed == 1
                  and p.run.arm != "grpo")
    assert broken.run_dir is not None
    init_run_dir(broken.run_dir, broken.run)
    cfg = broken.run_dir.config_yaml
    cfg.write_text(cfg.read_text().replace("total_steps: ", "total_steps: 1"))
    monkeypatch.setenv(MAX_ARRAY_ENV, "3")  # 4 runs: two arrays
    assert main(_sweep_args(workdir, "--wait")) == 1
    out = capsys.readouterr().out
    assert "submitted 4 runs as 2 Slurm job arrays" in out
    rows = {(r.arm, r.seed): r for r in collect_status(sweep_dir)}
    bad = rows.pop((broken.run.arm, 1))
    assert bad.state == "failed"
    assert "does not hash to its recorded run id" in (bad.traceback or "")
    assert "does not hash" in out  # the status table's failure details
    for r in rows.values():
        assert r.state == "completed", r
        steps = [m["step"] for m in read_metrics(r.path / "metrics.jsonl")]
        assert steps == list(range(sw.config.protocol.total_steps + 1))
    jobs = {k: RunDir(r.path).read_job() for k, r in rows.items()}
    assert len({j["array_job_id"] for j in jobs.values()} | {bad.job_id.split("_")[0]}) == 2
    assert all(Path(j["stdout"]).is_file() for j in jobs.values())
    states = query_states([str(j["job_id"]) for j in jobs.values()] + [str(bad.job_id)])
    assert states is not None and states[str(bad.job_id)]["State"] == "FAILED"
    # relaunch: completed skipped, failed left alone, nothing submitted
    assert main(_sweep_args(workdir)) == 0
    out = capsys.readouterr().out
    assert "3 skipped (completed)" in out and "1 skipped (failed)" in out
    assert "nothing to submit" in out
    assert {k: RunDir(r.path).read_job() for k, r in rows.items()} == jobs


def test_cancel_stops_an_arm(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = workdir / "results" / "smoke"
    assert main(_sweep_args(workdir, "protocol.total_steps=400", "seeds=[0]")) == 0
    wait_until(lambda: all(r.state == "running" for r in collect_status(sweep_dir)), 60,
          "both runs to start")
    capsys.readouterr()
    assert main(["cancel", str(sweep_dir), "--arm", "grpo"]) == 0
    assert "cancelled grpo seed 0 (running): scancel" in capsys.readouterr().out
    rows = {r.arm: r for r in collect_status(sweep_dir)}
    assert rows["grpo"].state == "cancelled"
    other = next(a for a in rows if a != "grpo")
    assert rows[other].state == "running"
    wait_until(lambda: (query_states([str(rows["grpo"].job_id)]) or {}).get(
        str(rows["grpo"].job_id), {}).get("State") == "CANCELLED", 30, "Slurm to cancel")
    assert main(["cancel", str(sweep_dir)]) == 0
    assert f"cancelled {other} seed 0" in capsys.readouterr().out
    wait_until(lambda: all(r.state == "cancelled" and not r.live
                      for r in collect_status(sweep_dir)), 30, "every job to end")


def test_requeued_job_resumes_identically(workdir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    overrides = ["arms=[grpo]", "seeds=[0]", "protocol.total_steps=16",
                 "protocol.save_freq=2", "protocol.test_freq=4"]
    # the uninterrupted reference, inline in this process
    ref = load_sweep(workdir / "sweeps" / "smoke.yaml", [*overrides, "launcher=inline"])
    assert launch_sweep(ref, tmp_path / "ref") == 0
    (ref_dir,) = collect_status(ref.sweep_dir(tmp_path / "ref"))
    expected = _comparable(read_metrics(ref_dir.path / "metrics.jsonl"))
    assert [s for s, _ in expected] == list(range(17))

    sweep_dir = workdir / "results" / "smoke"
    assert main(_sweep_args(workdir, *overrides)) == 0
    rd = RunDir(sweep_dir / "grpo" / "seed-0")
    job_id = str(rd.read_job()["job_id"])

    def last_step() -> int:
        return max((r["step"] for r in read_metrics(rd.metrics)), default=-1)

    # 1. the scheduler requeues the job from outside and kills it (no signal reaches
    #    Python: SIGKILL at once instead of Slurm's SIGTERM + KillWait, so a fast machine
    #    cannot finish the run meanwhile); the job restarts and resumes
    wait_until(lambda: last_step() >= 2, 60, "step 2 (the first checkpoint)", every=0.05)
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(rd.read_state()["pid"]), signal.SIGKILL)
    wait_until(lambda: collect_status(sweep_dir)[0].state == "requeued", 120, "status requeued")
    wait_until(lambda: rd.read_state().get("restarts") == 1, 60, "the first restart")
    old = last_step()
    # 2. timeout/preemption: Slurm's USR2 -> submitit calls RunJob.checkpoint -> requeue
    wait_until(lambda: int(rd.read_state().get("step", 0)) >= old + 2, 60,
          "two steps after the restart", every=0.05)
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    wait_until(lambda: rd.read_state().get("state") == "requeued", 120, "state.json requeued")
    assert collect_status(sweep_dir)[0].state == "requeued"
    wait_until(lambda: rd.read_state().get("state") == "completed", 120, "completion")
    assert rd.read_state()["restarts"] == 2
    assert _comparable(read_metrics(rd.metrics)) == expected
    capsys.readouterr()
    assert main(["status", str(sweep_dir)]) == 0
    assert "completed" in capsys.readouterr().out
    assert rd.read_job()["history"] == []  # requeues keep the job: no new submission


def test_call_in_job_runs_a_callable_in_one_job_with_the_runs_interpreter(
        tmp_path: Path) -> None:
    """What ``doctor --on-node`` uses: one job (no array) of the sweep's Slurm settings,
    started by the interpreter the run needs (``Needs.python``), its result returned."""
    import math
    import shlex
    import sys

    from ccpo_lab.launch.slurm import SlurmLauncher, SlurmSettings
    from ccpo_lab.placement import Needs

    used = tmp_path / "used"
    py = tmp_path / "trainer env" / "python"
    py.parent.mkdir()
    py.write_text(f"#!/bin/sh\necho \"$@\" >> {shlex.quote(str(used))}\n"
                  f"exec {shlex.quote(sys.executable)} \"$@\"\n")
    py.chmod(0o755)
    launcher = SlurmLauncher(SlurmSettings(partition="debug", time_min=5), tmp_path / "sweep",
                             name="probe",
                             needs=Needs(nodes=2, python=str(py)))
    where, value = launcher.call_in_job(math.factorial, 5, name="doctor", timeout_min=5)
    assert value == 120 and where.startswith("slurm job ")
    assert "-m submitit.core._submit" in used.read_text()
    jid = where.split()[-1]
    script = (tmp_path / "sweep" / "_jobs" / "doctor" / jid / f"{jid}_submission.sh")
    assert "#SBATCH --nodes=1" in script.read_text()        # one node, whatever a run spans
