"""The as-run semantics: what the reference trainers computed on the batch they passed.

verl-agent's ``fit`` (796ed31) pads the turn rows with copies (``adjust_batch``) and
reorders them for load balance (``_balance_batch``) before the advantage; verl-agent's
GRPO and GiGPO and the CCPO authors' estimator then compute on that batch, copies
included, in float32 where their code does. This module holds the pieces every as-run
estimator shares, each over the *passed* batch (``M`` rows, :attr:`StepBatch.passed`):

- :func:`step_returns32`: verl-agent's ``compute_step_discounted_returns``, run before the
  padding, so in the true turn order of each trajectory; float32 throughout (numpy 2
  promotes ``gamma * float32`` to float32), the penalty subtracted afterwards as
  ``apply_invalid_action_penalty`` does;
- :func:`scores32`: the episode score each passed row carries on its last response token
  (``R - coef * [invalid]``, float32);
- :func:`verl_normalise`: verl-agent's per-group mean/std loop (``episode_norm_reward``,
  ``step_norm_reward``, ``compute_grpo_outcome_advantage``): each group's values in passed
  order, ``torch.mean`` and the unbiased ``torch.std`` in float32, a singleton group with
  mean 0 (episode) or its own value (step) and std 1;
- :func:`occurrences`: the passed batch as a :class:`StepBatch` of ``M`` rows whose turn
  index is the row's *position* among its trajectory's rows in the passed batch, as the
  CCPO authors' ``derive_context`` and ``g2po_node_values`` read it (a copy is one more
  turn of its trajectory; its successor is the next row of the trajectory in batch order).
"""

from __future__ import annotations

import numpy as np
import torch

from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.grouping import group_ids, group_sum


def _f32(x: float) -> np.float32:
    return np.float32(x)


def step_returns32(batch: StepBatch, gamma: float) -> torch.Tensor:
    """``(N,)`` float32 discounted return-to-go of the raw rewards, per unique row, in the
    true turn order, as verl-agent's ``compute_step_discounted_returns`` computes it
    (``running = r_t + gamma * running`` in float32, from the last turn back)."""
    r = batch.reward.detach().cpu().to(torch.float32).numpy()
    nxt = batch.next_row.cpu().numpy()
    step = batch.step_index.cpu().numpy()
    g = np.zeros(batch.n, dtype=np.float32)
    gam = _f32(gamma)
    for t in range(int(step.max()), -1, -1):
        rows = np.flatnonzero(step == t)
        after = nxt[rows]
        tail = np.where(after >= 0, g[np.maximum(after, 0)], np.float32(0.0))
        g[rows] = r[rows] + gam * tail
    return torch.from_numpy(g)


def penalties32(batch: StepBatch, penalty: float) -> torch.Tensor:
    """``(N,)`` float32 ``coef * [invalid]`` as ``apply_invalid_action_penalty`` forms it."""
    invalid = (~batch.valid.cpu()).to(torch.float32)
    return penalty * invalid


def episode_rewards32(batch: StepBatch) -> torch.Tensor:
    """``(N,)`` float32 episode reward ``R`` of each unique row's trajectory."""
    r = batch.reward.detach().cpu().to(torch.float64)
    sums = group_sum(r, batch.traj_index.cpu(), batch.n_traj)
    return sums[batch.traj_index.cpu()].to(torch.float32)


def scores32(batch: StepBatch, penalty: float) -> torch.Tensor:
    """``(M,)`` float32 per passed row: ``R - coef * [invalid]`` (verl-agent's
    ``token_level_rewards`` summed over the row's response)."""
    s = episode_rewards32(batch) - penalties32(batch, penalty)
    return s[batch.passed.cpu()]


def verl_normalise(values: torch.Tensor, groups: torch.Tensor, mode: str, epsilon: float,
                   *, singleton: str) -> torch.Tensor:
    """verl-agent's group normalisation, in float32, group by group in passed order.

    ``values``: ``(M,)`` float32; ``groups``: ``(M,)`` int64 group ids. A group of two or
    more: ``(v - mean) / (std + epsilon)`` (``mean_std_norm``) or ``v - mean``, with
    ``torch.mean`` / ``torch.std`` (unbiased) of its values in passed order. A singleton:
    ``singleton="zero_mean"`` (episode term: mean 0, std 1) or ``"self"`` (step term:
    mean = its value, std 1). Returns ``(M,)`` float32.
    """
    v = values.to(torch.float32)
    mean = torch.empty_like(v)
    std = torch.empty_like(v)
    order = torch.argsort(groups, stable=True)
    sizes = torch.bincount(groups[order]).tolist()
    start = 0
    for size in sizes:
        if size == 0:
            continue
        idx = order[start:start + size]
        start += size
        seg = v[idx]
        if size == 1:
            mean[idx] = 0.0 if singleton == "zero_mean" else seg
            std[idx] = 1.0
        else:
            mean[idx] = torch.mean(seg)
            std[idx] = torch.std(seg.reshape(1, -1))
    if mode == "mean_std_norm":
        return (v - mean) / (std + epsilon)
    return v - mean


def episode_term32(batch: StepBatch, penalty: float, mode: str, epsilon: float
                   ) -> torch.Tensor:
    """``(M,)`` float32 verl-agent's ``episode_norm_reward`` (= verl's GRPO) on the
    passed batch: every passed row of a task counts, copies included."""
    task = batch.task_index.cpu()[batch.passed.cpu()]
    return verl_normalise(scores32(batch, penalty), task, mode, epsilon,
                          singleton="zero_mean")


def standardise_credited32(step: torch.Tensor, task: torch.Tensor, credited: torch.Tensor,
                           epsilon: float) -> torch.Tensor:
    """The CCPO authors' trainer standardisation of the step term, in float32: per task,
    the credited rows in batch order, when there are two or more: ``(v - v.mean()) /
    (v.std() + epsilon)`` (unbiased). ``step``: ``(M,)`` float32; ``task``: ``(M,)``
    int64; ``credited``: ``(M,)`` bool. Returns ``(M,)`` float32."""
    out = step.clone()
    rows = torch.nonzero(credited.cpu()).flatten()
    groups = task.cpu()[rows]
    order = torch.argsort(groups, stable=True)
    start = 0
    for size in torch.bincount(groups[order]).tolist() if rows.numel() else []:
        idx = rows[order[start:start + size]]
        start += size
        if size > 1:
            v = step[idx]
            out[idx] = (v - v.mean()) / (v.std() + epsilon)
    return out


def positions(traj: torch.Tensor) -> torch.Tensor:
    """``(M,)`` int64 position of each passed row among its trajectory's passed rows.

    ``traj``: ``(M,)`` trajectory codes in passed order.
    """
    order = torch.argsort(traj, stable=True)
    counts = torch.bincount(traj)
    starts = torch.cumsum(counts, 0) - counts
    pos = torch.empty_like(traj)
    pos[order] = torch.arange(traj.numel(), dtype=traj.dtype) - starts[traj[order]]
    return pos


def occurrences(batch: StepBatch) -> StepBatch:
    """The passed batch as a :class:`StepBatch` of ``M`` rows (module docstring): the row
    ``k`` is passed row ``k``, its ``step`` its position in its trajectory's passed rows;
    tasks, trajectories and observations are named by their codes in ``batch``.
    ``reward`` is the raw reward of its source row (unused by the as-run terms, which
    take the true-order returns of :func:`step_returns32`); ``phi`` keeps its dtype (the
    as-run features are computed from it in float64)."""
    src = batch.passed.cpu()
    traj = batch.traj_index.cpu()[src]
    phi = None if batch.phi is None else batch.phi.cpu()[src]
    return StepBatch(task_uid=batch.task_index.cpu()[src].tolist(), traj_uid=traj.tolist(),
                     step=positions(traj).numpy(),
                     anchor_obs=[str(o) for o in batch.obs_index.cpu()[src].tolist()],
                     reward=batch.reward.detach().cpu()[src], valid=batch.valid.cpu()[src],
                     phi=phi)


def anchor_groups(batch: StepBatch) -> torch.Tensor:
    """``(M,)`` int64 ids of the anchor buckets ``(task, observation)`` of the passed rows."""
    ids, _ = group_ids(batch.task_index.cpu(), batch.obs_index.cpu())
    return ids[batch.passed.cpu()]
