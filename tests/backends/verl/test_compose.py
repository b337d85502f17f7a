"""The generated overrides against the configs they target.

- Every override without a ``+``/``++`` prefix names a key of verl-agent's
  ``ppo_trainer.yaml`` (the key list shipped in ``ccpo_lab/backends/verl``, taken from the
  pinned commit), and every ``++`` override names a key verl-agent lacks.
- The overrides whose key exists in verl 0.9.1's packaged ``ppo_trainer`` config compose
  with Hydra's compose API and set the values asked for; the others are exactly the
  verl-agent-only keys (present in verl-agent's list, absent from verl 0.9.1).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.command import build_command
from tests.backends.verl.conftest import SHIPPED, planned, run_dir, sweep_runs


def verl_agent_keys() -> set[str]:
    text = resources.files("ccpo_lab.backends.verl").joinpath("verl_agent_keys.txt").read_text()
    return {line.strip() for line in text.splitlines() if line.strip() and not
            line.startswith("#")}


def _split(override: str) -> tuple[str, str, str]:
    key, _, value = override.partition("=")
    prefix = key[:len(key) - len(key.lstrip("+"))]
    return prefix, key.lstrip("+"), value


def _is_under(key: str, keys: set[str]) -> bool:
    return key in keys or any(k.startswith(key + ".") for k in keys)


def all_overrides(tmp_path: Path) -> list[tuple[str, str, str]]:
    out = []
    for name in SHIPPED:
        where = planned(name)
        for run in sweep_runs(name):
            out += [_split(o) for o in build_command(run, run_dir(tmp_path, run).path,
                                                     placement=where).overrides]
    return out


def test_key_list_is_data_from_the_pinned_commit() -> None:
    keys = verl_agent_keys()
    text = resources.files("ccpo_lab.backends.verl").joinpath("verl_agent_keys.txt").read_text()
    assert "796ed310287fa605c9292a0fce07a86d79fde05e" in text
    assert {"env.rollout.n", "algorithm.gigpo.mode", "ray_init.num_cpus",
            "actor_rollout_ref.actor.use_invalid_action_penalty"} <= keys
    assert "actor_rollout_ref.rollout.seed" not in keys   # (ccpo-lab does not set it)


def test_plain_keys_exist_in_verl_agent_and_added_keys_do_not(tmp_path: Path) -> None:
    keys = verl_agent_keys()
    for prefix, key, _ in all_overrides(tmp_path):
        if prefix:
            assert prefix == "++", key
            assert not _is_under(key, keys), f"{key} exists in verl-agent: drop the ++"
        else:
            assert key in keys, f"{key} is not a key of verl-agent's ppo_trainer.yaml"


@pytest.mark.slow
def test_overrides_compose_against_verl_091(tmp_path: Path) -> None:
    import verl
    from hydra import compose, initialize_config_dir
    keys = verl_agent_keys()
    cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    agent_only: set[str] = set()
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        base = compose(config_name="ppo_trainer")
        for name in SHIPPED:
            # every arm at seed 0, every seed of one arm (the rest differ only in paths)
            for run in [r for r in sweep_runs(name) if r.seed == 0 or r.arm == "gigpo"]:
                upstream = []
                for o in build_command(run, run_dir(tmp_path, run).path,
                                       placement=planned(name)).overrides:
                    prefix, key, _ = _split(o)
                    if prefix or _has_key(base, key):
                        upstream.append(o)
                    else:
                        agent_only.add(key)
                cfg = compose(config_name="ppo_trainer", overrides=upstream)
                assert cfg.algorithm.adv_estimator == run.estimator.name
                assert cfg.algorithm.ccpo_lab.estimator == run.estimator.name
                # every parameter, semantics only when as-run (its default stays out of
                # the command, as out of the run id)
                from ccpo_lab.estimators.spec import resolve_params

                assert resolve_params(run.estimator.name, dict(
                    cfg.algorithm.ccpo_lab.params)) == run.estimator.params
                # never set: vLLM would give that one seed to every request (the hooks
                # seed the engine and each request instead)
                assert not any(_split(o)[1] == "actor_rollout_ref.rollout.seed"
                               for o in upstream)
                assert cfg.trainer.experiment_name == f"{run.arm}-seed{run.seed}"
                assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
                assert cfg.actor_rollout_ref.rollout.val_kwargs.temperature == 0.4
                assert cfg.actor_rollout_ref.actor.kl_loss_coef == 0.01
                assert list(cfg.trainer.logger) == ["console", "file"]
                assert cfg.trainer.total_epochs == 150 and cfg.trainer.test_freq == 5
                hook = cfg.ray_init.runtime_env.worker_process_setup_hook
                assert hook == "ccpo_lab.backends.verl.agent.hooks.setup"
    # the keys verl 0.9.1 lacks are verl-agent's own (env.*, GiGPO, invalid-action penalty,
    # its top-level ray_init): all on the list taken from verl-agent's ppo_trainer.yaml
    assert agent_only <= keys
    assert agent_only == VERL_AGENT_ONLY


def _has_key(cfg: object, key: str) -> bool:
    """Whether ``key`` exists in ``cfg`` (a mandatory ``???`` value counts)."""
    from omegaconf import OmegaConf

    parent, _, last = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    return node is not None and OmegaConf.is_dict(node) and last in list(node.keys())

VERL_AGENT_ONLY = {
    "actor_rollout_ref.actor.invalid_action_penalty_coef",
    "actor_rollout_ref.actor.use_invalid_action_penalty",
    "algorithm.gigpo.mode",
    "algorithm.gigpo.step_advantage_w",
    "env.alfworld.eval_dataset",
    "env.env_name",
    "env.history_length",
    "env.max_steps",
    "env.resources_per_worker.num_cpus",
    "env.rollout.n",
    "env.seed",
    "ray_init.num_cpus",
}
"""Generated keys that exist in verl-agent but not in verl 0.9.1 (hand-checked)."""
