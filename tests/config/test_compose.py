"""Sweep composition, overrides and arm inheritance."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.config.arms import arm_names, distinguishing_flags, load_arm
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError

PUBLISHED_ARMS = ["ccpo-global-successor", "ccpo-return-hard", "ccpo-return-hard-fbjw", "gigpo",
                  "grpo"]
SHIPPED_ARMS = sorted(PUBLISHED_ARMS + [f"{a}-as-run" for a in PUBLISHED_ARMS])
"""Each published arm as described and as it ran (issue 30)."""


def test_shipped_arms_resolve(repo: Path) -> None:
    assert arm_names(repo / "arms") == SHIPPED_ARMS
    fbjw = load_arm("ccpo-return-hard-fbjw", repo / "arms")
    assert fbjw.chain == ("ccpo-return-hard-fbjw", "ccpo-return-hard")
    p = fbjw.estimator.params
    assert (p["gate"], p["target"], p["rho"], p["backoff_task"], p["jweight_c"]) == (
        "hard", "return", 0.0, True, 1.0)
    assert (p["shrink"], p["tau"], p["whiten_k"], p["phi"], p["edge_w"], p["step_norm"]) == (
        "eb", 0.15, 3, "hidden+ctx", 1.0, "mode")
    assert (p["backoff_rho"], p["invalid_penalty"]) == (0.5, 0.1)  # the reference's values
    glob = load_arm("ccpo-global-successor", repo / "arms").estimator.params
    assert (glob["gate"], glob["target"], glob["rho"], glob["backoff_task"]) == (
        "global", "successor-node", 0.0, False)
    for name in PUBLISHED_ARMS:  # each twin differs by the semantics alone
        twin = load_arm(f"{name}-as-run", repo / "arms").estimator
        plain = load_arm(name, repo / "arms").estimator
        assert twin.name == plain.name and plain.params["semantics"] == "described"
        assert twin.params == {**plain.params, "semantics": "as-run"}
    assert distinguishing_flags(load_arm("ccpo-return-hard-fbjw", repo / "arms")) == {
        "backoff_task": True, "jweight_c": 1.0}


def test_lint_warns_rho_zero_hard_gate(repo: Path) -> None:
    warnings = load_arm("ccpo-return-hard", repo / "arms").warnings
    assert any("lambda is always 0" in w for w in warnings)
    assert load_arm("grpo", repo / "arms").warnings == []


def test_child_with_other_estimator_drops_parent_params(workdir: Path) -> None:
    (workdir / "arms" / "child.yaml").write_text(
        "extends: ccpo-return-hard\nestimator: {name: gigpo, step_advantage_w: 0.5}\n")
    arm = load_arm("child", workdir / "arms")
    assert arm.estimator.name == "gigpo"
    assert arm.estimator.params == {"gamma": 0.95, "mode": "mean_std_norm", "epsilon": 1e-6,
                                    "invalid_penalty": 0.1, "semantics": "described",
                                    "step_advantage_w": 0.5}


def test_training_overrides_apply_to_protocol(workdir: Path) -> None:
    (workdir / "arms" / "fast.yaml").write_text(
        "extends: grpo\ntraining: {lr: 2.0e-6, total_steps: 100}\n")
    (workdir / "sweeps" / "s.yaml").write_text("name: s\narms: [grpo, fast]\nseeds: [0]\n")
    sw = load_sweep(workdir / "sweeps" / "s.yaml")
    grpo, fast = sw.runs
    assert grpo.protocol == ProtocolConfig()
    assert (fast.protocol.lr, fast.protocol.total_steps) == (2e-6, 100)
    assert grpo.run_id != fast.run_id


def test_demo_sweep_expands_arms_by_seeds(repo: Path) -> None:
    sw = load_sweep(repo / "sweeps" / "demo.yaml")
    assert sw.name == "demo"
    assert len(sw.runs) == 15
    assert [(r.arm, r.seed) for r in sw.runs][:4] == [("grpo", 0), ("grpo", 1), ("grpo", 2),
                                                     ("gigpo", 0)]
    assert sw.reference_arm == "grpo"
    assert len({r.run_id for r in sw.runs}) == 15


def test_overrides(repo: Path) -> None:
    sw = load_sweep(repo / "sweeps" / "demo.yaml",
                    ["seeds=[0,1,2,3]", "launcher=slurm", "launcher.partition=gpu",
                     "protocol.lr=0.01", "analysis.window_start=10"])
    cfg = sw.config
    assert cfg.seeds == [0, 1, 2, 3]
    assert (cfg.launcher.kind, cfg.launcher.partition) == ("slurm", "gpu")
    assert cfg.protocol.lr == 0.01 and isinstance(cfg.protocol.lr, float)
    assert cfg.analysis.window_start == 10


def test_an_override_adds_or_replaces_an_entry_of_a_mapping(repo: Path) -> None:
    """``backend.verl.env.X=v``, ``backend.verl.ray_env.X=v`` and, under the launcher the
    overrides select, ``launcher.sbatch_extra.X=v``: entries of free-form mappings."""
    sw = load_sweep(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml",
                    ["backend.verl.env.HF_HOME=/hf", "backend.verl.ray_env.OMP_NUM_THREADS=2",
                     "launcher.sbatch_extra.exclusive=true"])
    verl = sw.config.backend.verl
    assert verl.env == {"HF_HOME": "/hf"} and verl.ray_env["OMP_NUM_THREADS"] == "2"
    assert verl.ray_env["RAY_num_server_call_thread"] == "1"     # the other defaults stay
    assert sw.config.launcher.sbatch_extra == {"exclusive": True}
    demo = load_sweep(repo / "sweeps" / "demo.yaml",
                      ["launcher=slurm", "launcher.sbatch_extra.exclusive=true"])
    assert demo.config.launcher.sbatch_extra == {"exclusive": True}
    with pytest.raises(UserError, match=r"launcher.sbatch_extra.exclusive: a setting of "
                                        r"launcher slurm, not of local; valid: kind, "):
        load_sweep(repo / "sweeps" / "demo.yaml", ["launcher.sbatch_extra.exclusive=true"])
    with pytest.raises(UserError, match=r"launcher.sbatch_extra.nosuch: unknown sbatch"):
        load_sweep(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml",
                   ["launcher.sbatch_extra.nosuch=1"])
    with pytest.raises(UserError, match=r"backend.verl.envs.X: unknown key in override"):
        load_sweep(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml", ["backend.verl.envs.X=1"])


def test_launcher_does_not_change_identity(repo: Path) -> None:
    a = load_sweep(repo / "sweeps" / "demo.yaml")
    b = load_sweep(repo / "sweeps" / "demo.yaml", ["launcher=slurm", "launcher.time_min=5"])
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]


def test_slurm_and_node_sweeps_share_identities(repo: Path) -> None:
    a = load_sweep(repo / "sweeps" / "alfworld-qwen7b-slurm.yaml")
    b = load_sweep(repo / "sweeps" / "alfworld-qwen7b-node.yaml")
    assert a.config.protocol == ProtocolConfig()  # the reference protocol
    assert a.config.backend.kind == "verl"
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]


def test_override_type_error_names_command_line(repo: Path) -> None:
    with pytest.raises(UserError, match=r"command line: protocol.lr: wrong type"):
        load_sweep(repo / "sweeps" / "demo.yaml", ["protocol.lr=fast"])
