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

    python tests/estimators/verl_agent_reference.py CHECKOUT IN.npz OUT.npz WORLD MICRO SEED

runs the batch as ``fit`` really passes it (issue 30): after step 1, verl-agent's own
``adjust_batch`` pads it with copies (global ``np.random`` seeded with ``SEED``; divisor
``lcm`` of the micro-batches x ``WORLD``) and verl's ``get_seqlen_balanced_partitions``
over ``WORLD`` partitions reorders it as ``_balance_batch`` does; then steps 2-4, and
ccpo-lab's hook for grpo, gigpo and the three published CCPO arms in both semantics.
``OUT.npz`` then also holds the passed batch's columns (``uid``, ``traj_uid``, the turn,
``anchor_obs``, ``rewards``, ``is_action_valid``, ``phi``), so the test can run the
transcription of the CCPO authors' semantics on the same rows.
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


CCPO_ARMS = {
    "ccpo_return_hard": {},
    "ccpo_global_successor": {"gate": "global", "target": "successor-node"},
    "ccpo_return_hard_fbjw": {"backoff_task": True, "jweight_c": 1.0},
}
"""The published CCPO arms' flags (the rest: ccpo-lab's defaults, the published ones)."""


def pad_and_balance(batch, world: int, micro: int, seed: int):  # type: ignore[no-untyped-def]
    """``fit``'s ``adjust_batch`` then ``_balance_batch``, with verl-agent's own code."""
    import torch
    from agent_system.multi_turn_rollout import adjust_batch
    from omegaconf import OmegaConf
    from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions

    config = OmegaConf.create({
        "trainer": {"n_gpus_per_node": world, "nnodes": 1},
        "algorithm": {"use_kl_in_reward": False},
        "actor_rollout_ref": {
            "actor": {"use_kl_loss": True, "ppo_micro_batch_size_per_gpu": micro,
                      "ppo_mini_batch_size": 16},
            "ref": {"log_prob_micro_batch_size_per_gpu": micro},
            "rollout": {"log_prob_micro_batch_size_per_gpu": micro}}})
    np.random.seed(seed)
    batch = adjust_batch(config, batch)
    seqlens = batch.batch["attention_mask"].view(len(batch), -1).sum(-1).tolist()
    parts = get_seqlen_balanced_partitions(seqlens, k_partitions=world, equal_size=True)
    batch.reorder(torch.tensor([j for part in parts for j in part]))
    return batch


def main(checkout: str, src: str, dst: str, world: str | None = None,
         micro: str | None = None, seed: str | None = None) -> None:
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
    if "phi" in a:
        tensors[P.PHI_KEY] = torch.from_numpy(a["phi"].astype(np.float32))
    batch = DataProto.from_dict(tensors=tensors, non_tensors=non)
    penalty = float(a["penalty"])
    gamma = float(a["gamma"])
    batch.batch["step_rewards"] = core_gigpo.compute_step_discounted_returns(batch, gamma)
    padded = world is not None
    if padded:
        assert micro is not None and seed is not None
        batch = pad_and_balance(batch, int(world), int(micro), int(seed))
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
    arms: list[tuple[str, str, dict]] = [("grpo", "grpo", {}), ("gigpo", "gigpo", {})]
    if padded:
        arms += [(arm, "ccpo", flags) for arm, flags in CCPO_ARMS.items()]
    for semantics in ("described", "as-run") if padded else ("described",):
        for arm, name, flags in arms:
            params = {"gamma": gamma, **flags, "semantics": semantics}
            config = OmegaConf.create({
                "algorithm": {"adv_estimator": name, "gamma": gamma,
                              "ccpo_lab": {"estimator": name, "params": params}},
                "actor_rollout_ref": {"actor": {"use_invalid_action_penalty": penalty > 0,
                                                "invalid_action_penalty_coef": penalty}}})
            P.STATE = P.HookState()
            data = P.ccpo_lab_advantage(copy.deepcopy(batch), name, params, config)
            key = f"ccpo_lab_{arm}" + ("_as_run" if semantics == "as-run" else "")
            out[key] = data.batch["advantages"][:, 0].numpy()
    if padded:
        for k in ("uid", "traj_uid", "anchor_obs", P.STEP_KEY):
            out[k] = np.asarray([str(v) for v in nt[k]]) if k != P.STEP_KEY \
                else np.asarray(nt[k], dtype=np.int64)
        out["rewards"] = np.asarray(nt["rewards"], dtype=np.float64)
        out["is_action_valid"] = np.asarray(nt["is_action_valid"], dtype=bool)
        out["phi"] = batch.batch[P.PHI_KEY].numpy()
    np.savez(dst, **out)


if __name__ == "__main__":
    main(*sys.argv[1:])
