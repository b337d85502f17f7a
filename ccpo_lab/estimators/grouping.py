"""Shared grouping helpers: factorising ids, per-group statistics, returns, the episode term.

Every function is vectorised over rows (``index_add_``/``scatter_reduce_`` over group
ids); the only Python loops run over turn indices (at most the trajectory length) or
over a handful of unique values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ccpo_lab.estimators.errors import BatchError

if TYPE_CHECKING:
    import torch

    from ccpo_lab.estimators.batch import StepBatch


def factorize(values: Sequence[Any] | np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes for hashable ``values``; return ``(codes, uniques)``.

    ``values``: shape ``(N,)``. Codes are ``int64`` in ``[0, len(uniques))`` and follow the
    sorted order of the unique values when they can be sorted (so they do not depend on
    row order). A missing value (``None``/NaN) raises :class:`BatchError` naming ``name``.
    """
    arr = values if isinstance(values, np.ndarray) else np.asarray(list(values), dtype=object)
    if arr.ndim != 1:
        raise BatchError(f"expected a 1-d sequence, got shape {arr.shape}", key=name)
    if arr.dtype == object:
        for i, v in enumerate(arr):
            if v is None or (isinstance(v, float) and v != v):
                raise BatchError(f"missing value at row {i}", key=name, value=v)
    elif arr.dtype.kind in "fc" and len(arr) and np.isnan(arr).any():
        bad = int(np.flatnonzero(np.isnan(arr))[0])
        raise BatchError(f"missing value at row {bad}", key=name, value=arr[bad])
    try:
        uniques, codes = np.unique(arr, return_inverse=True)
    except TypeError:  # mixed types that cannot be sorted (e.g. str and int): first seen
        first: dict[Any, int] = {}
        codes = np.fromiter((first.setdefault(v, len(first)) for v in arr.tolist()),
                            dtype=np.int64, count=len(arr))
        uniques = np.empty(len(first), dtype=object)
        uniques[:] = list(first)
    return codes.astype(np.int64, copy=False).reshape(-1), np.asarray(uniques, dtype=object)


def group_ids(*codes: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Dense ids of the distinct tuples ``(codes[0][i], codes[1][i], ...)``.

    Each ``codes[j]``: shape ``(N,)``, non-negative ``int64``. Returns ``(ids (N,), count)``
    with ids in ``[0, count)``, ordered like the sorted tuples.
    """
    import torch

    key = codes[0].to(torch.int64)
    for c in codes[1:]:
        c = c.to(torch.int64)
        key = key * (int(c.max()) + 1 if c.numel() else 1) + c
    uniq, inverse = torch.unique(key, return_inverse=True)
    return inverse, int(uniq.numel())


def group_sum(values: torch.Tensor, ids: torch.Tensor, count: int) -> torch.Tensor:
    """Per-group sums: ``values`` ``(N,)``, ``ids`` ``(N,)`` in ``[0, count)`` -> ``(count,)``."""
    return values.new_zeros(count).index_add_(0, ids, values)


def group_count(ids: torch.Tensor, count: int) -> torch.Tensor:
    """Rows per group as ``int64``. ``ids``: ``(N,)``; returns ``(count,)``."""
    import torch

    return torch.bincount(ids, minlength=count)


def group_mean_std(
    values: torch.Tensor, ids: torch.Tensor, count: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-group mean, unbiased standard deviation (two-pass) and size.

    ``values``: ``(N,)`` float; ``ids``: ``(N,)``. Returns three ``(count,)`` tensors; the
    standard deviation of a group of size 1 is 0 (callers apply their singleton rule).
    """
    n = group_count(ids, count).to(values.dtype)
    mean = group_sum(values, ids, count) / n.clamp_min(1)
    dev = values - mean[ids]
    ss = group_sum(dev * dev, ids, count)
    std = (ss / (n - 1).clamp_min(1)).sqrt()
    return mean, std, n


def group_constant(values: torch.Tensor, ids: torch.Tensor, count: int) -> torch.Tensor:
    """``(count,)`` bool: whether every value of the group is the same (empty: True).

    ``values``: ``(N,)`` float; ``ids``: ``(N,)``.
    """
    import torch

    lo = torch.full((count,), float("inf"), dtype=values.dtype, device=values.device)
    hi = torch.full((count,), float("-inf"), dtype=values.dtype, device=values.device)
    lo.scatter_reduce_(0, ids, values, "amin")
    hi.scatter_reduce_(0, ids, values, "amax")
    return (hi <= lo)


def normalise_in_groups(
    values: torch.Tensor, ids: torch.Tensor, count: int, mode: str, epsilon: float,
    *, singleton: str,
) -> torch.Tensor:
    """``(v - mean_g) [/ (std_g + epsilon)]`` per group, as GRPO / GiGPO do.

    ``values``: ``(N,)`` float64; ``ids``: ``(N,)``. ``mode``: ``mean_norm`` |
    ``mean_std_norm``. ``singleton``: ``"zero_mean"`` (mean 0, std 1: GRPO's rule, the
    value passes through) or ``"self"`` (the mean includes the row itself: the result is 0).
    A singleton's divisor is ``1 + epsilon`` rounded to float32, as verl computes it
    (``torch.tensor(1.0) + epsilon``), so the result equals verl's to the last digit.
    A group of two or more equal values gives exactly 0 (verl, in float32, gives rounding
    noise there when the value is not representable: the one intended difference).
    """
    import torch

    mean, std, n = group_mean_std(values, ids, count)
    single = n <= 1
    if singleton == "zero_mean":
        mean = mean.masked_fill(single, 0.0)
    denom = std + epsilon
    one = float(torch.tensor(1.0, dtype=torch.float32) + epsilon)
    denom = denom.masked_fill(single, one)
    const = group_constant(values, ids, count) & ~single
    centred = torch.where(const[ids], torch.zeros_like(values), values - mean[ids])
    if mode == "mean_std_norm":
        return centred / denom[ids]
    return centred


def zscore_in_groups(values: torch.Tensor, ids: torch.Tensor, count: int, epsilon: float,
                     mask: torch.Tensor | None = None, *, small: str = "zero") -> torch.Tensor:
    """``(v - mean) / (std + epsilon)`` (unbiased std) over the ``mask`` rows of each group
    that has at least two of them; a constant group gives exactly 0.

    ``values``, ``ids``, ``mask``: ``(N,)`` (``mask`` None: every row). Rows outside the
    mask keep their value; the mask rows of a group with fewer than two mask rows get 0
    (``small="zero"``) or keep their value (``small="keep"``). Returns ``(N,)``.
    """
    import torch

    sel = torch.arange(values.numel(), device=values.device) if mask is None \
        else torch.nonzero(mask).flatten()
    out = values.clone()
    if sel.numel() == 0:
        return out
    v, g = values[sel], ids[sel]
    mean, std, n = group_mean_std(v, g, count)
    const = group_constant(v, g, count)
    z = torch.where(const[g], torch.zeros_like(v), (v - mean[g]) / (std[g] + epsilon))
    few = n[g] < 2
    out[sel] = torch.where(few, torch.zeros_like(v) if small == "zero" else v, z)
    return out


def discounted_returns(reward: torch.Tensor, batch: StepBatch, gamma: float) -> torch.Tensor:
    """Return-to-go ``G_t = r_t + gamma * G_{t+1}`` inside each trajectory.

    ``reward``: ``(N,)`` float64 in batch row order. Loops over turn indices (at most the
    longest trajectory), vectorised over trajectories.
    """
    import torch

    g = torch.zeros_like(reward)
    nxt = batch.next_row
    step = batch.step_index
    by_step = torch.argsort(step, descending=True, stable=True)
    counts = torch.bincount(step).tolist()
    pos = 0
    for t in range(len(counts) - 1, -1, -1):
        rows = by_step[pos:pos + counts[t]]
        pos += counts[t]
        if rows.numel() == 0:
            continue
        after = nxt[rows]
        tail = torch.where(after >= 0, g[after.clamp_min(0)], torch.zeros_like(g[rows]))
        g[rows] = reward[rows] + gamma * tail
    return g


def episode_scores(reward: torch.Tensor, batch: StepBatch) -> torch.Tensor:
    """Sum of each row's trajectory rewards. ``reward``: ``(N,)`` float64; returns ``(N,)``."""
    sums = group_sum(reward, batch.traj_index, batch.n_traj)
    return sums[batch.traj_index]


def row_penalties(batch: StepBatch, penalty: float) -> torch.Tensor:
    """``(N,)`` float64 ``penalty * [row's action invalid]``: what verl-agent's
    ``apply_invalid_action_penalty`` subtracts from that row alone (its episode score and
    its step return), never from the trajectory's other rows."""
    import torch

    return penalty * (~batch.valid).to(torch.float64)


def episode_term(score: torch.Tensor, batch: StepBatch, mode: str, epsilon: float) -> torch.Tensor:
    """GRPO's episode term over the rows of each task group (singleton: mean 0, std 1).

    ``score``: ``(N,)`` float64 episode scores. Returns ``(N,)`` float64.
    """
    return normalise_in_groups(score, batch.task_index, batch.n_tasks, mode, epsilon,
                               singleton="zero_mean")


def anchor_buckets(batch: StepBatch) -> tuple[torch.Tensor, int]:
    """Hard anchor-state buckets ``(task_uid, anchor_obs)``: ``(ids (N,), count)``."""
    return group_ids(batch.task_index, batch.obs_index)


def percentile(values: torch.Tensor, q: float) -> float:
    """numpy's default (linear) percentile ``q`` in [0, 100] of a 1-d tensor; NaN if empty."""
    import torch

    if values.numel() == 0:
        return float("nan")
    return float(torch.quantile(values.to(torch.float64), q / 100.0))
