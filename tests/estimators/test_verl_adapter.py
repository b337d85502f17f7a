"""The verl adapter, on real ``DataProto`` objects (CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from verl import DataProto  # noqa: E402
from verl.trainer.ppo.core_algos import get_adv_estimator_fn  # noqa: E402

from ccpo_lab.backends.verl.agent import advantage as adapter  # noqa: E402
from ccpo_lab.estimators import EstimatorError, StepBatch, get_estimator  # noqa: E402

from .conftest import random_columns  # noqa: E402

L = 7


def dataproto(cols: dict[str, Any], *, with_step: bool = True, token_rewards: bool = True,
              rng_seed: int = 0) -> tuple[DataProto, torch.Tensor]:
    """A DataProto whose turn rewards sit on the last response token of each row."""
    rng = np.random.default_rng(rng_seed)
    n = len(cols["task_uid"])
    lengths = torch.tensor(rng.integers(1, L + 1, size=n))
    mask = (torch.arange(L)[None, :] < lengths[:, None]).to(torch.float32)
    tensors: dict[str, torch.Tensor] = {
        "response_mask": mask,
        "ccpo_phi_feats": torch.tensor(cols["phi"], dtype=torch.float32),
    }
    reward = torch.tensor(cols["reward"], dtype=torch.float32)
    if token_rewards:
        tlr = torch.zeros(n, L)
        tlr[torch.arange(n), lengths - 1] = reward
        tensors["token_level_rewards"] = tlr
    non = {"uid": np.asarray(cols["task_uid"], dtype=object),
           "traj_uid": np.asarray(cols["traj_uid"], dtype=object),
           "anchor_obs": np.asarray(cols["anchor_obs"], dtype=object),
           "is_action_valid": np.asarray(cols["valid"])}
    if with_step:
        non["step"] = np.asarray(cols["step"])
    return DataProto.from_dict(tensors=tensors, non_tensors=non), mask


def pure(cols: dict[str, Any], reward: Any = None) -> StepBatch:
    return StepBatch(task_uid=cols["task_uid"], traj_uid=cols["traj_uid"], step=cols["step"],
                     anchor_obs=cols["anchor_obs"],
                     reward=torch.tensor(cols["reward"] if reward is None else reward,
                                         dtype=torch.float32),
                     valid=cols["valid"], phi=torch.tensor(cols["phi"], dtype=torch.float32))


PARAMS = [("gigpo", {}), ("ccpo", {"gate": "global", "target": "successor-node"}),
          ("ccpo", {"gate": "hard", "backoff_task": True, "jweight_c": 1.0})]


@pytest.mark.parametrize(("name", "params"), PARAMS)
def test_token_advantages_equal_pure_estimator(name: str, params: dict[str, Any]) -> None:
    cols = random_columns(np.random.default_rng(5), d=6)
    data, mask = dataproto(cols)
    adv, out = adapter.compute_token_advantages(data, name, params)
    want = get_estimator(name, **params)(pure(cols)).advantages
    assert adv.shape == (len(data), L) and adv.dtype == torch.float32
    torch.testing.assert_close(adv, want[:, None] * mask, rtol=0, atol=0)
    torch.testing.assert_close(out.advantages, want, rtol=0, atol=0)


def test_turn_index_derived_from_row_order() -> None:
    cols = random_columns(np.random.default_rng(6), d=4, shuffle=False)  # turn order
    data, _ = dataproto(cols, with_step=False)
    batch = adapter.step_batch_from_dataproto(data)
    assert batch.step.tolist() == cols["step"]


def test_env_rewards_pass_through_raw() -> None:
    # verl-agent's hook reads the raw per-turn rewards; nothing subtracts the penalty
    # before the estimator (which applies its invalid_penalty to the invalid rows itself)
    cols = random_columns(np.random.default_rng(7), d=4)
    assert not cols["valid"].all()
    data, _ = dataproto(cols, token_rewards=False)
    data.non_tensor_batch["rewards"] = cols["reward"].astype(np.float32)
    batch = adapter.step_batch_from_dataproto(data, adapter.DataProtoKeys(reward="rewards"))
    np.testing.assert_array_equal(batch.reward.numpy(), cols["reward"].astype(np.float32))
    np.testing.assert_array_equal(batch.valid.numpy(), cols["valid"])
    assert "invalid_penalty" not in {f.name for f in
                                     adapter.DataProtoKeys.__dataclass_fields__.values()}


def test_apply_writes_advantages_and_mask_from_attention() -> None:
    cols = random_columns(np.random.default_rng(8), d=4)
    data, mask = dataproto(cols)
    n = len(data)
    data.batch["responses"] = torch.zeros(n, L, dtype=torch.long)
    data.batch["attention_mask"] = torch.cat([torch.ones(n, 3), mask], dim=1).long()
    data.pop(batch_keys=["response_mask"])
    diag = adapter.apply_advantages(data, "gigpo")
    assert "adv_ep_absmean" in diag
    assert torch.equal(data.batch["advantages"], data.batch["returns"])
    assert bool((data.batch["advantages"][mask == 0] == 0).all())


def test_registered_in_verl() -> None:
    assert adapter.register_verl_estimators() == ["gigpo", "ccpo"]  # idempotent
    assert get_adv_estimator_fn("ccpo") is adapter.verl_ccpo_advantage
    assert get_adv_estimator_fn("gigpo") is adapter.verl_gigpo_advantage


def test_registered_function_with_extra_fields() -> None:
    cols = random_columns(np.random.default_rng(9), d=4)
    data, mask = dataproto(cols)
    fn = get_adv_estimator_fn("ccpo")
    params = {"gate": "global"}
    adv, ret = fn(token_level_rewards=data.batch["token_level_rewards"], response_mask=mask,
                  index=data.non_tensor_batch["uid"], config=None,
                  traj_index=data.non_tensor_batch["traj_uid"],
                  anchor_obs=data.non_tensor_batch["anchor_obs"],
                  step=data.non_tensor_batch["step"],
                  is_action_valid=data.non_tensor_batch["is_action_valid"],
                  phi=data.batch["ccpo_phi_feats"], params=params)
    want = get_estimator("ccpo", **params)(pure(cols)).advantages
    torch.testing.assert_close(adv, want[:, None] * mask, rtol=0, atol=0)
    assert adv is ret


def test_registered_function_refuses_upstream_call() -> None:
    cols = random_columns(np.random.default_rng(10), d=4)
    data, mask = dataproto(cols)
    with pytest.raises(EstimatorError, match="without traj_index, anchor_obs"):
        get_adv_estimator_fn("gigpo")(token_level_rewards=data.batch["token_level_rewards"],
                                      response_mask=mask, index=data.non_tensor_batch["uid"],
                                      config=None)
