"""Run verl-agent's own advantage path and ccpo-lab's hook on one batch (a subprocess).

    python tests/estimators/verl_agent_reference.py CHECKOUT IN.npz OUT.npz

``CHECKOUT`` (a verl-agent checkout, commit 796ed31) goes FIRST on ``sys.path``: its
``verl`` package shadows the installed verl 0.9.1, which is why this runs in its own
process. ``IN.npz`` holds the columns of :func:`tests.estimators.test_verl_reference.
agent_arrays`. Both paths run on the same verl-agent ``DataProto``, as ``RayPPOTrainer.fit``
runs them (796ed31, no padding):

1. ``core_gigpo.compute_step_discounted_returns`` on the raw per-turn rewards
   (``step_rewards``);
2. ``EpisodeRewardManager`` puts each trajectory's episode reward on the last valid
   response token (``token_level_scores``);
3. ``apply_invalid_action_penalty`` (coef 0.1) subtracts the penalty from that token and
   from ``step_rewards`` of the invalid rows;
4. GRPO: ``core_algos.compute_grpo_outcome_advantage(index=uid, traj_index=traj_uid)``;
   GiGPO: ``core_gigpo.compute_gigpo_outcome_advantage(mode=mean_std_norm)``;
5. ccpo-lab: the verl-agent hook (``ccpo_lab_advantage``) on the same batch, after
   ``patch_core_algos`` as in a real run.

Stand-ins, for what this environment lacks and the functions never use: the ``openai``
package (imported by ``ray_trainer``'s async-server module, when not installed) and the
tokenizer (the reward manager decodes text only to print examples; ``num_examine=0``).
``OUT.npz`` holds the per-row advantages (first response token) of each path.
"""

from __future__ import annotations

import copy
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import numpy as np


class _OpenAIStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty ``openai`` modules whose attributes are empty classes."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name == "openai" or name.startswith("openai."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        mod = types.ModuleType(spec.name)
        mod.__path__ = []  # type: ignore[attr-defined]
        mod.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        return mod

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        return None


class _Tokenizer:
    def decode(self, ids, skip_special_tokens=False):  # type: ignore[no-untyped-def]
        return ""


def main(checkout: str, src: str, dst: str) -> None:
    sys.path.insert(0, checkout)
    if importlib.util.find_spec("openai") is None:
        sys.meta_path.insert(0, _OpenAIStandIn())
    import torch
    import verl
    from agent_system.reward_manager.episode import EpisodeRewardManager
    from gigpo import core_gigpo
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import apply_invalid_action_penalty

    assert verl.__file__.startswith(checkout), verl.__file__
    from ccpo_lab.backends.verl.agent import patches as P

    P.patch_core_algos(core_algos)
    a = dict(np.load(src, allow_pickle=True))
    tensors = {k: torch.from_numpy(a[k]) for k in
               ("prompts", "responses", "input_ids", "attention_mask", "position_ids")}
    non = {k: a[k] for k in ("uid", "traj_uid", "anchor_obs", "rewards", "is_action_valid",
                             "active_masks", "episode_rewards", "episode_lengths",
                             "data_source", P.STEP_KEY)}
    batch = DataProto.from_dict(tensors=tensors, non_tensors=non)
    penalty = float(a["penalty"])
    gamma = float(a["gamma"])
    batch.batch["step_rewards"] = core_gigpo.compute_step_discounted_returns(batch, gamma)
    resp_len = batch.batch["responses"].shape[1]
    batch.batch["response_mask"] = batch.batch["attention_mask"][:, -resp_len:]
    batch.batch["token_level_scores"] = EpisodeRewardManager(_Tokenizer(), num_examine=0)(batch)
    batch, _ = apply_invalid_action_penalty(batch, invalid_action_penalty_coef=penalty)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    nt = batch.non_tensor_batch
    mask = batch.batch["response_mask"]
    out: dict[str, np.ndarray] = {}
    grpo, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=batch.batch["token_level_rewards"], response_mask=mask,
        index=nt["uid"], traj_index=nt["traj_uid"], norm_adv_by_std_in_grpo=True)
    out["verl_agent_grpo"] = grpo[:, 0].numpy()
    gigpo, _ = core_gigpo.compute_gigpo_outcome_advantage(
        token_level_rewards=batch.batch["token_level_rewards"],
        step_rewards=batch.batch["step_rewards"], response_mask=mask,
        anchor_obs=nt["anchor_obs"], index=nt["uid"], traj_index=nt["traj_uid"],
        step_advantage_w=1.0, mode="mean_std_norm")
    out["verl_agent_gigpo"] = gigpo[:, 0].numpy()
    out["score"] = batch.batch["token_level_rewards"].sum(-1).numpy()
    out["step_rewards"] = batch.batch["step_rewards"].numpy()
    for name in ("grpo", "gigpo"):
        config = OmegaConf.create({
            "algorithm": {"adv_estimator": name, "gamma": gamma,
                          "ccpo_lab": {"estimator": name, "params": {"gamma": gamma}}},
            "actor_rollout_ref": {"actor": {"use_invalid_action_penalty": penalty > 0,
                                            "invalid_action_penalty_coef": penalty}}})
        P.STATE = P.HookState()
        data = P.ccpo_lab_advantage(copy.deepcopy(batch), name, {"gamma": gamma}, config)
        out[f"ccpo_lab_{name}"] = data.batch["advantages"][:, 0].numpy()
    np.savez(dst, **out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
