"""Reliability round 3 (issue 36), item 11: a second ``sweep --wait`` (inline) on a sweep
whose runs another launch executes waits for them, as the docs say, instead of exiting 1
at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.owner import current_owner
from tests.conftest import wait_until

pytestmark = pytest.mark.slow


def test_a_second_wait_waits_for_the_runs_another_launch_executes(workdir: Path) -> None:
    args = [sys.executable, "-m", "ccpo_lab.cli.main", "sweep",
            str(workdir / "sweeps" / "smoke.yaml"), "arms=[grpo]", "seeds=[0]",
            "protocol.total_steps=300", "launcher=inline", "--results",
            str(workdir / "results"), "--wait"]
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        rd = RunDir(workdir / "results" / "smoke" / "grpo" / "seed-0")
        wait_until(lambda: current_owner(rd) is not None
                   and int(rd.read_state().get("step") or 0) >= 2, 120,
                   "the first launch to execute the run")
        second = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert "waiting for the runs other processes execute" in second.stdout
        assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
        assert rd.read_state()["state"] == "completed"
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(timeout=300)
