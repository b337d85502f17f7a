"""The trainer invocation: seeds, names, estimator, resume, determinism, layout checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.checkout import CheckoutInfo, inspect_checkout
from ccpo_lab.backends.verl.command import build_command, hydra_value, path_value
from ccpo_lab.backends.verl.layout import (
    check_run_layout,
    check_sweep_layout,
    layout_of,
    validate_layout,
)
from ccpo_lab.backends.verl.runner import describe
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import init_run_dir
from tests.backends.verl.conftest import REPO, planned, run_dir, sweep_runs


def _ov(run: RunConfig, tmp: Path, **kw: object) -> dict[str, str]:
    kw.setdefault("placement", planned("alfworld-qwen7b-slurm"))
    cmd = build_command(run, run_dir(tmp, run).path, **kw)  # type: ignore[arg-type]
    out = {}
    for o in cmd.overrides:
        k, _, v = o.partition("=")
        assert k not in out, f"{k} set twice"
        out[k] = v
    return out


def _pick(runs: list[RunConfig], arm: str, seed: int) -> RunConfig:
    return next(r for r in runs if r.arm == arm and r.seed == seed)


def test_reference_protocol_values(slurm_runs: list[RunConfig], tmp_path: Path) -> None:
    ov = _ov(_pick(slurm_runs, "gigpo", 0), tmp_path)
    want = {  # examples/gigpo_trainer/run_alfworld.sh with the 7B model on 8 GPUs
        "algorithm.adv_estimator": "gigpo", "data.train_batch_size": "16",
        "data.val_batch_size": "128", "data.max_prompt_length": "2048",
        "data.max_response_length": "512", "actor_rollout_ref.actor.optim.lr": "1e-06",
        "actor_rollout_ref.actor.kl_loss_coef": "0.01",
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": "2",
        "actor_rollout_ref.rollout.gpu_memory_utilization": "0.6",
        "actor_rollout_ref.rollout.val_kwargs.temperature": "0.4",
        "actor_rollout_ref.rollout.val_kwargs.do_sample": "True",
        "actor_rollout_ref.actor.invalid_action_penalty_coef": "0.1",
        "algorithm.gamma": "0.95", "algorithm.gigpo.mode": "mean_std_norm",
        "env.env_name": "alfworld/AlfredTWEnv", "env.max_steps": "50",
        "env.history_length": "2", "env.rollout.n": "8",
        "env.alfworld.eval_dataset": "eval_in_distribution",
        "trainer.n_gpus_per_node": "8", "trainer.nnodes": "1", "trainer.test_freq": "5",
        "trainer.total_epochs": "150", "trainer.logger": "[console,file]",
        "actor_rollout_ref.model.path": "Qwen/Qwen2.5-7B-Instruct",
        "ray_init.num_cpus": "64",   # the CPUs per task the Slurm launcher allocates
    }
    assert {k: ov[k] for k in want} == want


def test_names_seeds_and_run_files(slurm_runs: list[RunConfig], tmp_path: Path) -> None:
    run = _pick(slurm_runs, "ccpo-return-hard", 2)
    rd = run_dir(tmp_path, run).path
    ov = _ov(run, tmp_path)
    assert ov["trainer.project_name"] == "alfworld-qwen7b"
    assert ov["trainer.experiment_name"] == "ccpo-return-hard-seed2"
    # env.seed: run seeds 10,000 apart (verl-agent's streams never overlap); no rollout.seed
    assert ov["env.seed"] == "20000" and "++actor_rollout_ref.rollout.seed" not in ov
    assert ov["trainer.default_local_dir"] == str(rd / "checkpoints")
    assert ov["trainer.resume_mode"] == "auto" and ov["trainer.val_before_train"] == "True"
    assert ov["data.train_files"] == str(rd / "data" / "train.parquet")
    env = "++ray_init.runtime_env.env_vars."
    assert ov[env + "VERL_FILE_LOGGER_PATH"] == hydra_value(str(rd / "metrics.jsonl"))
    assert ov[env + "CCPO_LAB_RUN_DIR"] == hydra_value(str(rd))
    assert ov[env + "CCPO_LAB_CAPTURE_PHI"] == "'1'"
    assert ov["++ray_init.runtime_env.worker_process_setup_hook"] == \
        "ccpo_lab.backends.verl.agent.hooks.setup"
    assert ov["++algorithm.ccpo_lab.estimator"] == "ccpo"
    # every parameter, except semantics while it is the default (described)
    assert {k.rsplit(".", 1)[1] for k in ov if k.startswith("++algorithm.ccpo_lab.params.")} \
        == set(run.estimator.params) - {"semantics"}
    assert ov["++algorithm.ccpo_lab.params.gate"] == "'hard'"
    assert "++ray_init.runtime_env.env_vars.CCPO_LAB_CAPTURE_PHI" not in \
        _ov(_pick(slurm_runs, "grpo", 2), tmp_path)


def test_arms_of_a_seed_differ_only_in_estimator_and_names(slurm_runs: list[RunConfig],
                                                             tmp_path: Path) -> None:
    per_arm = [_ov(r, tmp_path) for r in slurm_runs if r.seed == 1]
    varying = {"algorithm.adv_estimator", "trainer.experiment_name", "data.train_files",
               "data.val_files", "trainer.default_local_dir"}

    def shared(ov: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in ov.items() if k not in varying and "ccpo_lab" not in k
                and "CCPO_LAB" not in k and "VERL_FILE_LOGGER" not in k}

    assert all(shared(ov) == shared(per_arm[0]) for ov in per_arm)


def test_resume_skips_the_evaluation_before_training(slurm_runs: list[RunConfig],
                                                     tmp_path: Path) -> None:
    assert _ov(slurm_runs[0], tmp_path, resume=True)["trainer.val_before_train"] == "False"


def test_full_determinism_only_where_the_checkout_has_it(slurm_runs: list[RunConfig],
                                                          tmp_path: Path) -> None:
    cfg = tmp_path / "va" / "verl" / "trainer" / "config"
    cfg.mkdir(parents=True)
    (cfg.parent / "main_ppo.py").write_text("")
    (cfg / "ppo_trainer.yaml").write_text(
        "actor_rollout_ref:\n  rollout:\n    name: vllm\n    full_determinism: false\n"
        "    seed: 0\nenv:\n  seed: 0\n")
    info = inspect_checkout(tmp_path / "va")
    assert info.exists and info.has_full_determinism and info.has_rollout_seed
    run = slurm_runs[0]
    cmd = build_command(run, run_dir(tmp_path, run).path, checkout=info)
    assert "++actor_rollout_ref.rollout.full_determinism=True" in cmd.overrides
    assert cmd.determinism["full_determinism"] is True
    none = CheckoutInfo(tmp_path, False, None, False, False)
    cmd = build_command(run, run_dir(tmp_path, run).path, checkout=none)
    assert not any(o.split("=")[0].endswith("full_determinism") for o in cmd.overrides)
    assert cmd.determinism["full_determinism"] is None
    assert cmd.determinism["rollout_seed"] == run.seed


def test_paths_with_spaces_are_quoted_for_hydra(slurm_runs: list[RunConfig],
                                                tmp_path: Path) -> None:
    assert path_value("/a/b-c_d.e/f") == "/a/b-c_d.e/f"
    assert path_value("/res ults/it's") == "'/res ults/it\\'s'"
    ov = _ov(slurm_runs[0], tmp_path / "my results")
    assert ov["trainer.default_local_dir"].startswith("'") and " " in ov["data.val_files"]


def test_describe_is_the_rendered_command(slurm_runs: list[RunConfig], tmp_path: Path) -> None:
    run = slurm_runs[0]
    rd = run_dir(tmp_path, run)
    head, line = describe(run, rd).split("\n  ")
    assert head.startswith("# seeding: env.seed=0 (verl-agent streams 0-15, 1000-1127; ")
    assert "vLLM engine seed 0, one sampling seed per request, rollout.seed unset" in head
    assert line.startswith(f"cd {rd.path / 'logs'} && env ")
    assert " python3 -m ccpo_lab.backends.verl.agent.trainer --verl-agent /opt/verl-agent -- " \
        in line


def test_layout_must_fit_the_trainer(slurm_runs: list[RunConfig]) -> None:
    run = slurm_runs[0]
    s, p = run.backend.verl, run.protocol
    validate_layout(s, p)
    with pytest.raises(UserError, match="rollout_tp must divide"):
        validate_layout(dataclasses.replace(s, rollout_tp=3), p)
    with pytest.raises(UserError, match="train_batch_size must be divisible") as e:
        validate_layout(dataclasses.replace(s, nnodes=4), p)   # 16 tasks on 32 GPUs
    assert e.value.key == "protocol.train_batch_size"
    with pytest.raises(UserError, match="ppo_micro_batch_size_per_gpu"):
        validate_layout(dataclasses.replace(s, ppo_micro_batch_size_per_gpu=24), p)
    assert layout_of(s)["rollout_dp"] == 4


def test_a_sweep_with_two_layouts_is_refused() -> None:
    runs = sweep_runs("alfworld-qwen7b-slurm")
    check_sweep_layout(runs)
    other = dataclasses.replace(runs[3], backend=dataclasses.replace(
        runs[3].backend, verl=dataclasses.replace(runs[3].backend.verl, rollout_tp=4)))
    with pytest.raises(UserError, match="rollout_tp: 4 vs 2"):
        check_sweep_layout([*runs[:3], other])


def test_resources_are_stated_once_by_the_backend(tmp_path: Path) -> None:
    """The launcher takes nodes and GPUs from the backend's needs; it refuses what it
    cannot give, naming its own key."""
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.plan import launcher_for, plan_sweep

    multi = load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml", [
        "backend.verl.nnodes=2", "backend.verl.ppo_micro_batch_size_per_gpu=16"])
    assert len(plan_sweep(multi, tmp_path)) == 15
    params = launcher_for(multi, tmp_path).parameters()  # type: ignore[attr-defined]
    assert (params["nodes"], params["gpus_per_node"]) == (2, 8)
    node = REPO / "sweeps" / "alfworld-qwen7b-node.yaml"
    with pytest.raises(UserError, match="gpus_per_run") as e:
        plan_sweep(load_sweep(node, ["launcher.gpus_per_run=4"]), tmp_path)
    assert e.value.key == "launcher.gpus_per_run"
    with pytest.raises(UserError, match="needs 2 nodes") as e:
        plan_sweep(load_sweep(node, ["backend.verl.nnodes=2",
                                     "backend.verl.ppo_micro_batch_size_per_gpu=16"]), tmp_path)
    assert e.value.key == "launcher.kind"
    with pytest.raises(UserError, match="not a slurm setting.*backend.verl.nnodes") as e:
        load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml", ["launcher.nodes=2"])
    assert e.value.key == "launcher.nodes"
    assert not any(tmp_path.iterdir())


def test_a_run_whose_layout_differs_from_its_sweep_is_refused(tmp_path: Path) -> None:
    runs = sweep_runs("alfworld-qwen7b-slurm")
    first = runs[0]
    init_run_dir(run_dir(tmp_path, first), first)
    check_run_layout(runs[1], run_dir(tmp_path, runs[1]).path)      # same layout: fine
    odd = sweep_runs("alfworld-qwen7b-slurm",
                     ["backend.verl.gpu_memory_utilization=0.5"])[1]
    with pytest.raises(UserError, match="gpu_memory_utilization: 0.5 vs 0.6"):
        check_run_layout(odd, run_dir(tmp_path, odd).path)


def test_plan_refuses_a_layout_before_anything_is_written(tmp_path: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.plan import plan_sweep
    from tests.conftest import snapshot

    path = REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml"
    bad = load_sweep(path, ["backend.verl.rollout_tp=3"])
    with pytest.raises(UserError, match="rollout_tp must divide") as e:
        plan_sweep(bad, tmp_path)
    assert e.value.file == bad.source
    assert not any(tmp_path.iterdir())
    # a run already on disk with the sweep's layout; a relaunch with another is refused
    runs = sweep_runs("alfworld-qwen7b-slurm")
    init_run_dir(run_dir(tmp_path, runs[0]), runs[0])
    before = snapshot(tmp_path)
    assert len(plan_sweep(load_sweep(path), tmp_path)) == len(runs)
    odd = load_sweep(path, ["backend.verl.gpu_memory_utilization=0.5"])
    with pytest.raises(UserError, match="gpu_memory_utilization: 0.5 vs 0.6") as e:
        plan_sweep(odd, tmp_path)
    assert e.value.file.endswith("config.yaml")
    assert snapshot(tmp_path) == before


def test_ray_limits_are_defaults_overridable_and_recorded(tmp_path: Path) -> None:
    """Defect 6: 128 + 128 env actors hit Ray's process ceiling without thread limits."""
    run = sweep_runs("alfworld-qwen7b-slurm")[0]
    cmd = build_command(run, run_dir(tmp_path, run).path)
    want = {"RAY_num_server_call_thread": "1", "RAY_num_grpc_internal_threads": "1",
            "RAY_num_prestart_python_workers": "4", "OMP_NUM_THREADS": "1"}
    assert {k: cmd.env[k] for k in want} == want              # the trainer (and its raylet)
    ov = _ov(run, tmp_path)
    for k, v in want.items():                                 # every Ray worker
        assert ov[f"++ray_init.runtime_env.env_vars.{k}"] == hydra_value(v)
    assert cmd.determinism["ray_env"] == want
    odd = sweep_runs("alfworld-qwen7b-slurm",
                     ["backend.verl.env.OMP_NUM_THREADS=4",
                      "backend.verl.ray_env.RAY_num_prestart_python_workers=0"])[0]
    env = build_command(odd, run_dir(tmp_path, odd).path).env
    assert env["OMP_NUM_THREADS"] == "4" and env["RAY_num_prestart_python_workers"] == "0"
    assert env["RAY_num_server_call_thread"] == "1"


def test_slurm_jobs_run_the_sweeps_interpreter(tmp_path: Path) -> None:
    """Defect 5: the job ran whatever python the submitting shell had. The verl backend
    declares the interpreter (``Needs.python``); the launchers that start a job process
    start it."""
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.plan import launcher_for

    sw = load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml",
                    ["backend.verl.python=/opt/trainer env/bin/python"])
    slurm = launcher_for(sw, tmp_path)
    assert slurm.needs.python == "/opt/trainer env/bin/python"
    ex = slurm.executor(tmp_path, max_num_timeout=0)            # type: ignore[attr-defined]
    assert ex._submitit_command_str.startswith("'/opt/trainer env/bin/python' -u -m submitit")
    node = launcher_for(load_sweep(REPO / "sweeps" / "alfworld-qwen7b-node.yaml",
                                   ["backend.verl.python=/opt/trainer env/bin/python"]),
                        tmp_path)
    assert node.job_python() == "'/opt/trainer env/bin/python'"   # local jobs: the same
    local = launcher_for(load_sweep(REPO / "sweeps" / "smoke.yaml"), tmp_path)
    assert local.needs.python is None and local.job_python() is None   # CPU backend: this one
