"""One source of truth for the invalid-action penalty: the protocol's
``invalid_action_penalty`` flows into every estimator and into the verl command."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.backends.verl.command import build_command
from ccpo_lab.config.arms import load_arm
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError

SWEEP = "name: s\narms: [grpo, gigpo, ccpo-return-hard, fast]\nseeds: [0]\n"


def _overrides(cmd_overrides: tuple[str, ...]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in cmd_overrides)


@pytest.mark.parametrize("penalty", [0.1, 0.25, 0.0])
def test_protocol_penalty_reaches_estimator_and_command(workdir: Path, penalty: float) -> None:
    (workdir / "arms" / "fast.yaml").write_text("extends: gigpo\ntraining: {lr: 2.0e-6}\n")
    (workdir / "sweeps" / "s.yaml").write_text(SWEEP)
    sw = load_sweep(workdir / "sweeps" / "s.yaml",
                    [f"protocol.invalid_action_penalty={penalty}", "backend=verl"])
    for run in sw.runs:
        assert run.estimator.params["invalid_penalty"] == penalty, run.arm
        ov = _overrides(build_command(run, workdir / "r").overrides)
        assert ov["actor_rollout_ref.actor.invalid_action_penalty_coef"] == repr(penalty)
        assert ov["actor_rollout_ref.actor.use_invalid_action_penalty"] == str(penalty > 0)
        assert ov["++algorithm.ccpo_lab.params.invalid_penalty"] == repr(penalty)


def test_arm_training_override_binds_its_estimator(workdir: Path) -> None:
    (workdir / "arms" / "nopen.yaml").write_text(
        "extends: grpo\ntraining: {invalid_action_penalty: 0.0}\n")
    assert load_arm("nopen", workdir / "arms").estimator.params["invalid_penalty"] == 0.0
    (workdir / "sweeps" / "s.yaml").write_text("name: s\narms: [grpo, nopen]\nseeds: [0]\n")
    grpo, nopen = load_sweep(workdir / "sweeps" / "s.yaml").runs
    assert grpo.estimator.params["invalid_penalty"] == 0.1
    assert nopen.estimator.params["invalid_penalty"] == 0.0
    assert nopen.protocol.invalid_action_penalty == 0.0
    assert grpo.run_id != nopen.run_id


def test_arm_cannot_set_the_penalty_itself(workdir: Path) -> None:
    path = workdir / "arms" / "bad.yaml"
    path.write_text("extends: ccpo-return-hard\nestimator: {invalid_penalty: 0.2}\n")
    with pytest.raises(UserError) as err:
        load_arm("bad", workdir / "arms")
    msg = str(err.value)
    assert msg.startswith(f"{path}: estimator.invalid_penalty: set by the protocol")
    assert "invalid_action_penalty" in msg


def test_shipped_arms_resolve_to_the_reference_values(repo: Path) -> None:
    sw = load_sweep(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml")
    for run in sw.runs:
        p = run.estimator.params
        assert p["invalid_penalty"] == run.protocol.invalid_action_penalty == 0.1
        if run.estimator.name == "ccpo":
            assert (p["step_norm"], p["backoff_rho"], p["edge_w"], p["mode"]) == (
                "mode", 0.5, 1.0, "mean_std_norm")
