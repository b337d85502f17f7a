"""verl adapter: a ``DataProto`` in, token-level advantages out; registry entries.

Importing this module registers ``gigpo`` and ``ccpo`` in verl's advantage-estimator
registry (``verl.trainer.ppo.core_algos.register_adv_est``); :func:`register_verl_estimators`
does it explicitly and is idempotent.

What upstream verl's registry call cannot pass. verl 0.9.1's ``compute_advantage`` calls a
registered function as ``fn(token_level_rewards=, response_mask=, config=, index=uid)``:
it passes neither ``traj_uid`` nor ``anchor_obs``, the turn index, the validity flags or
the features ``phi``. A step-level estimator therefore needs the trainer hook to call
:func:`apply_advantages` (or :func:`compute_token_advantages`) with the whole
``DataProto``; the registered functions accept those fields as extra keyword arguments
(``traj_index``, ``anchor_obs``, ``step``, ``step_rewards``, ``is_action_valid``, ``phi``,
``params``) and raise a clear error when called without them.

Expected ``DataProto`` fields (names configurable through :class:`DataProtoKeys`):

- ``non_tensor_batch["uid"]``: ``(bs,)`` task group; ``["traj_uid"]``: ``(bs,)``
  trajectory; ``["anchor_obs"]``: ``(bs,)`` str observation of the turn;
- turn index: ``non_tensor_batch["step"]`` ``(bs,)`` int when present, otherwise the
  position of the row among its trajectory's rows in batch order (verl-agent gathers
  rows turn by turn, so rows of a trajectory appear in turn order); rows duplicated for
  padding must be removed first (they would be turns of their own);
- per-turn raw reward: by default ``batch["token_level_rewards"].sum(-1)`` ``(bs,)``
  (upstream verl's convention: a turn's reward sits on its response tokens); ``reward_key``
  may name a ``(bs,)`` tensor or ``(bs, L)`` tensor in ``batch`` or a ``(bs,)`` array in
  ``non_tensor_batch``. verl-agent's ``token_level_rewards`` carry the *episode* reward
  (with the invalid-action penalty already subtracted), so its hook passes
  ``reward_key="rewards"``: its raw per-turn environment rewards;
- validity: ``non_tensor_batch["is_action_valid"]`` ``(bs,)`` (all valid when absent).
  Nothing here subtracts a penalty: the estimator applies its ``invalid_penalty`` to the
  invalid rows (episode score and step return of that row alone, as verl-agent does);
- features: ``batch["ccpo_phi_feats"]`` (or ``batch["ccpo_lab_phi"]``) ``(bs, d)``, optional;
- ``batch["response_mask"]`` ``(bs, L)``, or ``attention_mask[:, -L:]`` with
  ``L = responses.shape[1]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ccpo_lab.estimators import StepBatch, get_estimator
from ccpo_lab.estimators.errors import BatchError, EstimatorError

if TYPE_CHECKING:
    from verl import DataProto

    from ccpo_lab.estimators.base import Estimator, EstimatorOutput

VERL_ESTIMATORS = ("gigpo", "ccpo")
"""Names this module registers in verl's registry (``grpo`` is verl's own)."""


@dataclass(frozen=True)
class DataProtoKeys:
    """Where :func:`step_batch_from_dataproto` finds each field (module docstring)."""

    task: str = "uid"
    traj: str = "traj_uid"
    anchor_obs: str = "anchor_obs"
    step: str = "step"
    reward: str = "token_level_rewards"
    valid: str = "is_action_valid"
    phi: tuple[str, ...] = ("ccpo_phi_feats", "ccpo_lab_phi")


def _has(data: DataProto, key: str) -> bool:
    """Whether ``data.batch`` holds ``key`` (TensorDict refuses a bare ``in``)."""
    return data.batch is not None and key in data.batch.keys()  # noqa: SIM118


def response_mask_of(data: DataProto) -> torch.Tensor:
    """``(bs, L)`` response mask: ``batch["response_mask"]`` or the attention mask's tail."""
    if _has(data, "response_mask"):
        return data.batch["response_mask"]
    length = data.batch["responses"].shape[1]
    return data.batch["attention_mask"][:, -length:]


def _column(data: DataProto, key: str, required: bool = True) -> np.ndarray | None:
    if key in data.non_tensor_batch:
        arr = np.asarray(data.non_tensor_batch[key])
        return arr.reshape(len(data)) if arr.ndim > 1 and arr.size == len(data) else arr
    if required:
        raise BatchError("missing from the DataProto's non_tensor_batch", key=key,
                         valid=sorted(data.non_tensor_batch))
    return None


def turn_index_from_order(traj: np.ndarray) -> np.ndarray:
    """``(bs,)`` position of each row among its trajectory's rows, in batch order.

    ``traj``: ``(bs,)`` trajectory ids.
    """
    from ccpo_lab.estimators.grouping import factorize

    codes, _ = factorize(traj, "traj_uid")
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes)
    starts = np.cumsum(counts) - counts
    pos = np.empty(len(codes), dtype=np.int64)
    pos[order] = np.arange(len(codes)) - starts[codes[order]]
    return pos


def _rewards(data: DataProto, key: str) -> torch.Tensor:
    if _has(data, key):
        r = data.batch[key]
        return r.sum(dim=-1) if r.ndim == 2 else r
    if key in data.non_tensor_batch:
        arr = np.asarray(data.non_tensor_batch[key], dtype=np.float64).reshape(len(data))
        return torch.as_tensor(arr, dtype=torch.float32)
    tensors = list(data.batch.keys()) if data.batch is not None else []  # noqa: SIM118
    raise BatchError("no per-turn rewards in the DataProto", key=key,
                     valid=sorted(tensors + list(data.non_tensor_batch)))


def step_batch_from_dataproto(data: DataProto, keys: DataProtoKeys | None = None,
                              rows: np.ndarray | None = None) -> StepBatch:
    """The :class:`StepBatch` of a verl ``DataProto`` (fields: module docstring).

    ``rows``: ``(M,)`` the batch the trainer passed, as indices of ``data``'s rows
    (``StepBatch.rows``), when ``data`` holds its unique rows only."""
    keys = keys or DataProtoKeys()
    traj = _column(data, keys.traj)
    assert traj is not None
    step = _column(data, keys.step, required=False)
    if step is None:
        step = turn_index_from_order(traj)
    reward = _rewards(data, keys.reward)
    valid_col = _column(data, keys.valid, required=False)
    valid = np.ones(len(data), dtype=bool) if valid_col is None else (
        np.asarray(valid_col, dtype=np.float64).reshape(len(data)) > 0.5)
    phi = next((data.batch[k] for k in keys.phi if _has(data, k)), None)
    return StepBatch(task_uid=_column(data, keys.task), traj_uid=traj, step=step,
                     anchor_obs=_column(data, keys.anchor_obs), reward=reward, valid=valid,
                     phi=phi, rows=rows)


def _estimator(estimator: Estimator | str, params: Mapping[str, Any] | None) -> Estimator:
    if isinstance(estimator, str):
        return get_estimator(estimator, **dict(params or {}))
    if params:
        raise TypeError("params are only used with an estimator name")
    return estimator


def compute_token_advantages(
    data: DataProto, estimator: Estimator | str, params: Mapping[str, Any] | None = None,
    keys: DataProtoKeys | None = None,
) -> tuple[torch.Tensor, EstimatorOutput]:
    """``(advantages (bs, L), output)``: each row's advantage times the response mask.

    ``estimator``: an estimator, or a name built with ``params``. The token advantages
    have the dtype of ``token_level_rewards`` when present, else float32.
    """
    est = _estimator(estimator, params)
    out = est(step_batch_from_dataproto(data, keys))
    return token_advantages(out, data), out


def token_advantages(out: EstimatorOutput, data: DataProto) -> torch.Tensor:
    """``(bs, L)``: ``out``'s per-row advantages (one per row of ``data``) times the
    response mask, in the dtype of ``token_level_rewards`` when present, else float32."""
    mask = response_mask_of(data)
    dtype = data.batch["token_level_rewards"].dtype if _has(data, "token_level_rewards") \
        else torch.float32
    return out.advantages.to(device=mask.device, dtype=dtype)[:, None] * mask.to(dtype)


def apply_advantages(
    data: DataProto, estimator: Estimator | str, params: Mapping[str, Any] | None = None,
    keys: DataProtoKeys | None = None,
) -> dict[str, float]:
    """Write ``batch["advantages"]`` and ``batch["returns"]`` (``(bs, L)``, equal, as
    verl's GRPO does); return the estimator's diagnostics."""
    adv, out = compute_token_advantages(data, estimator, params, keys)
    data.batch["advantages"] = adv
    data.batch["returns"] = adv
    return dict(out.diagnostics)


def _registered(name: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                index: Any, kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    missing = [k for k in ("traj_index", "anchor_obs") if kwargs.get(k) is None]
    if index is None:
        missing.insert(0, "index")
    if missing:
        raise EstimatorError(
            f"verl called the {name!r} advantage estimator without {', '.join(missing)}",
            detail="upstream verl's compute_advantage passes only token_level_rewards, "
            "response_mask, config and index (uid); a step-level estimator needs the "
            "trainer hook to call "
            "ccpo_lab.backends.verl.agent.advantage.apply_advantages(data, ...) "
            "or to pass traj_index=, anchor_obs= (and step=, step_rewards=, "
            "is_action_valid=, phi=) to the registered function")
    reward = kwargs.get("step_rewards")
    reward = token_level_rewards.sum(dim=-1) if reward is None else torch.as_tensor(reward)
    traj = np.asarray(kwargs["traj_index"])
    step = kwargs.get("step")
    valid = kwargs.get("is_action_valid")
    batch = StepBatch(
        task_uid=np.asarray(index), traj_uid=traj,
        step=turn_index_from_order(traj) if step is None else np.asarray(step),
        anchor_obs=np.asarray(kwargs["anchor_obs"]), reward=reward,
        valid=np.ones(len(traj), dtype=bool) if valid is None else
        np.asarray(valid, dtype=np.float64).reshape(-1) > 0.5,
        phi=kwargs.get("phi"))
    out = get_estimator(name, **dict(kwargs.get("params") or {}))(batch)
    dtype = token_level_rewards.dtype
    adv = out.advantages.to(device=response_mask.device, dtype=dtype)[:, None] * \
        response_mask.to(dtype)
    return adv, adv


def verl_gigpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                         index: Any = None, config: Any = None,
                         **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl registry entry ``gigpo``: ``(advantages, returns)``, both ``(bs, L)``.

    ``token_level_rewards``, ``response_mask``: ``(bs, L)``; ``index``: ``(bs,)`` uid;
    ``traj_index``, ``anchor_obs`` (required), ``step``, ``step_rewards``,
    ``is_action_valid``, ``params`` (keyword). ``config`` is ignored.
    """
    return _registered("gigpo", token_level_rewards, response_mask, index, kwargs)


def verl_ccpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                        index: Any = None, config: Any = None,
                        **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl registry entry ``ccpo`` (as :func:`verl_gigpo_advantage`, plus ``phi``
    ``(bs, d)``)."""
    return _registered("ccpo", token_level_rewards, response_mask, index, kwargs)


def register_verl_estimators() -> list[str]:
    """Register :data:`VERL_ESTIMATORS` with verl (idempotent); return their names."""
    from verl.trainer.ppo.core_algos import register_adv_est

    for name, fn in (("gigpo", verl_gigpo_advantage), ("ccpo", verl_ccpo_advantage)):
        try:
            register_adv_est(name)(fn)
        except ValueError as err:  # another function already holds the name
            raise EstimatorError(f"verl already has an advantage estimator named {name!r}",
                                 detail=str(err)) from err
    return list(VERL_ESTIMATORS)


register_verl_estimators()
