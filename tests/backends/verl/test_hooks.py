"""The hook machinery: patch-on-import, the file logger, the entry point, Ray workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.agent.io import RunFileLogger, turn_indices
from ccpo_lab.backends.verl.agent.trainer import with_hook
from ccpo_lab.runs.metrics import read_metrics

REPO = Path(__file__).resolve().parents[3]


def test_file_logger_appends_one_line_per_step_and_survives_restarts(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    log = RunFileLogger(tmp_path / "metrics.jsonl", tmp_path)
    log.log({"val/success_rate": 0.25, "text": "dropped", "nan": float("nan")}, step=0)
    log.log({"episode/reward/mean": 1.5, "flag": True}, step=1)
    restarted = RunFileLogger(tmp_path / "metrics.jsonl", tmp_path)
    restarted.log({"episode/reward/mean": 9.0}, step=1)      # logged before the restart
    restarted.log({"episode/reward/mean": 2.5}, step=2)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert rows == [{"step": 0, "data": {"val/success_rate": 0.25}},
                    {"step": 1, "data": {"episode/reward/mean": 1.5, "flag": 1}},
                    {"step": 2, "data": {"episode/reward/mean": 2.5}}]
    assert json.loads((tmp_path / "state.json").read_text())["step"] == 2


def test_turn_indices_count_earlier_rows_of_the_trajectory() -> None:
    assert turn_indices(["a", "a", "b", "a", "b"]).tolist() == [0, 1, 0, 2, 1]


def test_entry_point_adds_the_setup_hook_once() -> None:
    added = with_hook(["trainer.nnodes=1"])
    assert added == ["trainer.nnodes=1", "++ray_init.runtime_env.worker_process_setup_hook="
                     "ccpo_lab.backends.verl.agent.hooks.setup"]
    assert with_hook(added) == added
    mine = ["+ray_init.runtime_env.worker_process_setup_hook=my.hook"]
    assert with_hook(mine) == mine


_CHILD = """
import json, sys
import numpy as np
from ccpo_lab.backends.verl.agent import hooks as h
assert "verl.utils.tracking" not in sys.modules
h.setup()
from verl.utils.tracking import Tracking          # patched on this first import
from ccpo_lab.backends.verl.agent.patches import STATE
t = Tracking("proj", "exp", ["console", "file"])
STATE.pending = {"adv/lambda_mean": 0.0}
t.log({"val/success_rate": np.float32(0.5)}, step=0)
t.log({"episode/success_rate": 0.25}, step=1)
print("STATUS", json.dumps(h.status()))
"""


@pytest.mark.slow
def test_import_hook_patches_verl_tracking_on_first_import(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(tmp_path / "metrics.jsonl"),
           "CCPO_LAB_RUN_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    status = json.loads(out.stdout.split("STATUS ", 1)[1])
    assert status["installed"] and status["patched"] == ["verl.utils.tracking"]
    assert read_metrics(tmp_path / "metrics.jsonl") == [
        {"step": 0, "data": {"val/success_rate": 0.5, "adv/lambda_mean": 0.0}},
        {"step": 1, "data": {"episode/success_rate": 0.25}}]


@pytest.mark.slow
def test_setup_hook_runs_in_ray_worker_processes() -> None:
    """Ray's worker_process_setup_hook installs the hooks in a worker, not in the driver:
    there, importing verl's core_algos registers ccpo-lab's estimators in verl's registry."""
    import ray

    from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    assert not verl_agent_hooks.installed()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook":
                          "ccpo_lab.backends.verl.agent.hooks.setup"})
    try:
        @ray.remote
        def probe() -> dict[str, object]:
            import os as _os

            from verl.trainer.ppo import core_algos

            from ccpo_lab.backends.verl.agent import hooks as h

            return {"pid": _os.getpid(), "installed": h.installed(),
                    "patched": h.patched_modules(),
                    "ccpo": "ccpo" in core_algos.ADV_ESTIMATOR_REGISTRY,
                    "gigpo": "gigpo" in core_algos.ADV_ESTIMATOR_REGISTRY}

        # a bound, not a delay: under load, starting a worker and importing verl took > 120 s
        got = ray.get(probe.remote(), timeout=900)
    finally:
        ray.shutdown()
    assert got["pid"] != os.getpid()
    assert got["installed"] and "verl.trainer.ppo.core_algos" in got["patched"]
    assert got["ccpo"] and got["gigpo"]
    assert not verl_agent_hooks.installed()
