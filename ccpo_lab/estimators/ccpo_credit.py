"""CCPO's leave-one-trajectory-out kernel credit over buckets, vectorised over rows.

One *pass* credits the query rows of every eligible bucket (a bucket holding at least
two distinct trajectories and at least one query row). For a query row ``i`` of bucket
``B``: the peers are the rows of the *other* trajectories of ``B``; with
``d_ib = ||f_i - f_b||`` and ``s = tau * median{d_ab : a < b in B}`` (the median over all
pairs of rows in ``B``, numpy's median, replaced by 1.0 when it is ``<= 1e-9``),
``w_b = exp(-d_ib / s)``; per peer trajectory ``j``: ``alpha_j = sum w_b``,
``g_j = sum w_b TGT_b / alpha_j``; ``b_loo = sum alpha_j g_j / sum alpha_j``,
``n_eff = (sum alpha)^2 / sum alpha^2``, ``J`` = number of peer trajectories,
``b_obs`` / ``s2`` = mean / variance (ddof 0) of ``TGT`` over the peer rows. Shrinkage
(rule ``eb``): ``var_gain = max(1/n_eff - 1/J, 0)``, ``d = rho (b_obs - b_loo)``,
``lambda = clip(1 - s2 var_gain / d^2, 0, 1)`` (0 when ``|d| < 1e-12``), or 1 when forced.
A median ``<= 1e-9`` makes the bandwidth ``tau * 1.0`` (the reference code's rule: the
median, not the bandwidth, becomes 1.0). Without features ``b_loo = b_obs`` and ``n_eff`` is NaN
(only used where lambda cannot reach ``b_loo``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ccpo_lab.estimators.features import NEAR_D2, Features
from ccpo_lab.estimators.grouping import group_count, group_ids, group_sum


@dataclass
class Credit:
    """Per-row results of one pass (``(N,)`` each; meaningful where ``credited``)."""

    credited: torch.Tensor
    b_loo: torch.Tensor
    b_obs: torch.Tensor
    lam: torch.Tensor
    n_eff: torch.Tensor
    j: torch.Tensor


def eligible_rows(bucket: torch.Tensor, nb: int, traj: torch.Tensor,
                  query: torch.Tensor) -> torch.Tensor:
    """``(N,)`` rows of buckets with >= 2 distinct trajectories and >= 1 query row.

    ``bucket``: ``(N,)`` ids in ``[0, nb)``; ``traj``: ``(N,)``; ``query``: ``(N,)`` bool.
    """
    pair_id, npairs = group_ids(bucket, traj)
    first = torch.zeros(npairs, dtype=torch.int64, device=bucket.device)
    first[pair_id] = bucket
    n_traj = torch.bincount(first, minlength=nb)
    has_query = group_sum(query.to(torch.int64), bucket, nb) > 0
    return ((n_traj >= 2) & has_query)[bucket]


def uniform_stats(bucket: torch.Tensor, nb: int, traj: torch.Tensor, tgt: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row, over the rows of the other trajectories of its bucket (no pairs needed):
    ``(count, b_obs, s2, J)``, each ``(N,)``: peer rows, their mean and variance (ddof 0,
    0 for a single peer row) of ``tgt``, and the number of peer trajectories.

    ``bucket``: ``(N,)`` ids in ``[0, nb)``; ``traj``: ``(N,)``; ``tgt``: ``(N,)`` float64.
    Sums are taken about the bucket mean, so the variance does not cancel badly.
    """
    bt, nbt = group_ids(bucket, traj)
    mu = group_sum(tgt, bucket, nb) / group_count(bucket, nb).clamp_min(1)
    y = tgt - mu[bucket]
    ones = torch.ones_like(tgt)
    cnt = group_sum(ones, bucket, nb)[bucket] - group_sum(ones, bt, nbt)[bt]
    sy = group_sum(y, bucket, nb)[bucket] - group_sum(y, bt, nbt)[bt]
    syy = group_sum(y * y, bucket, nb)[bucket] - group_sum(y * y, bt, nbt)[bt]
    safe = cnt.clamp_min(1)
    mean_y = sy / safe
    s2 = torch.where(cnt > 1, (syy / safe - mean_y * mean_y).clamp_min(0.0),
                     torch.zeros_like(cnt))
    owner = torch.zeros(nbt, dtype=torch.int64, device=tgt.device)
    owner[bt] = bucket
    n_traj = torch.bincount(owner, minlength=nb).to(tgt.dtype)
    return cnt, mu[bucket] + mean_y, s2, n_traj[bucket] - 1


SLICE_ROWS = 512
"""Padded rows per batch of buckets: the gathered feature copy (about 7 MB at 3.6k
float32 features) stays in cache for the Gram product; larger batches measured slower."""


def _bucket_slices(sizes: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
    """Batches of eligible buckets: ``(S, bucket ids)``, every bucket of a batch padded to
    ``S`` rows (its largest). Buckets go largest first; a batch takes the next bucket while
    ``S x count <= SLICE_ROWS`` and the bucket has at least ``S / 2`` rows (padding at
    most doubles a bucket). A bucket above ``SLICE_ROWS`` rows is a batch of its own."""
    order = torch.argsort(sizes, descending=True, stable=True).tolist()
    sz = sizes.tolist()
    units: list[tuple[int, torch.Tensor]] = []
    i = 0
    while i < len(order):
        s = sz[order[i]]
        j = i + 1
        while j < len(order) and (j - i + 1) * s <= SLICE_ROWS and 2 * sz[order[j]] >= s:
            j += 1
        units.append((s, torch.tensor(order[i:j], device=sizes.device)))
        i = j
    return units


def _masked_median(values: torch.Tensor, valid: torch.Tensor, count: torch.Tensor
                   ) -> torch.Tensor:
    """numpy's median of each row's ``valid`` entries: ``values``, ``valid`` ``(B, P)``,
    ``count`` ``(B,)`` valid entries (>= 1). Returns ``(B,)``."""
    ordered = torch.sort(values.masked_fill(~valid, float("inf")), dim=1).values
    lo = ((count - 1) // 2)[:, None]
    hi = (count // 2)[:, None]
    return (ordered.gather(1, lo) + ordered.gather(1, hi))[:, 0] / 2


def kernel_stats(bucket: torch.Tensor, traj: torch.Tensor, step: torch.Tensor,
                 tgt: torch.Tensor, rows_mask: torch.Tensor, feats: Features, tau: float,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: ``(b_loo, n_eff)``, ``(N,)`` each, NaN outside ``rows_mask``.

    ``bucket``, ``traj``, ``step``: ``(N,)`` int64; ``tgt``: ``(N,)`` float64;
    ``rows_mask``: ``(N,)`` bool, whole eligible buckets. Rows are sorted by (bucket,
    trajectory, turn); buckets are handled in batches of equal padded size
    (:func:`_bucket_slices`, :func:`_batch_stats`), so pairwise work never leaves a bucket
    and no ``N x N`` matrix is formed.
    """
    n = tgt.numel()
    dev = tgt.device
    b_loo = torch.full((n,), float("nan"), dtype=torch.float64, device=dev)
    n_eff = b_loo.clone()
    rows = torch.nonzero(rows_mask).flatten()
    if rows.numel() == 0:
        return b_loo, n_eff
    for key in (step, traj, bucket):  # lexicographic (bucket, traj, step) by stable sorts
        rows = rows[torch.argsort(key[rows], stable=True)]
    pos_bucket, nb = group_ids(bucket[rows])
    run, _ = group_ids(bucket[rows], traj[rows])
    sizes = group_count(pos_bucket, nb)
    starts = torch.cumsum(sizes, 0) - sizes
    local_traj = run - run[starts][pos_bucket]  # trajectory index inside the bucket
    for s, ids in _bucket_slices(sizes):
        ar = torch.arange(s, device=dev)
        valid = ar[None, :] < sizes[ids][:, None]  # (B, S)
        idx = torch.where(valid, starts[ids][:, None] + ar[None, :], starts[ids][:, None])
        r = rows[idx]  # (B, S) batch rows (padding repeats the bucket's first row)
        loo, eff = _batch_stats(r, valid, local_traj[idx], tgt[r], feats, max(tau, 1e-6))
        b_loo[r[valid]] = loo[valid]
        n_eff[r[valid]] = eff[valid]
    return b_loo, n_eff


def _batch_stats(r: torch.Tensor, valid: torch.Tensor, lt: torch.Tensor, t: torch.Tensor,
                 feats: Features, width: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(b_loo, n_eff)`` ``(B, S)`` of a batch of ``B`` buckets padded to ``S`` rows.

    ``r``: ``(B, S)`` batch rows; ``valid``: ``(B, S)`` real (not padding) rows; ``lt``:
    ``(B, S)`` trajectory index inside the bucket; ``t``: ``(B, S)`` float64 targets.
    One batched Gram product, distances (squared distances below ``NEAR_D2`` recomputed
    directly in float64), the per-bucket median, weights and per-trajectory sums.
    """
    b, s = r.shape
    dev = r.device
    # one bucket: a contiguous view of the stored rows (no copy) when stored in this order
    x = feats.block(r[0])[None] if b == 1 else feats.rows(r.flatten()).view(b, s, -1)
    gram = torch.bmm(x, x.transpose(1, 2)).to(torch.float64)
    sq = torch.diagonal(gram, dim1=1, dim2=2)
    d2 = (sq[:, :, None] + sq[:, None, :] - 2.0 * gram).clamp_min_(0.0)
    pair = valid[:, :, None] & valid[:, None, :] & ~torch.eye(s, dtype=torch.bool,
                                                             device=dev)[None]
    d2.masked_fill_(~pair, 0.0)
    near = torch.nonzero(pair & (d2 < NEAR_D2))
    if near.numel():
        ra, rb = r[near[:, 0], near[:, 1]], r[near[:, 0], near[:, 2]]
        d2[near[:, 0], near[:, 1], near[:, 2]] = feats.exact_sq_dist(ra, rb)
    dist = d2.sqrt_()
    iu = torch.triu_indices(s, s, 1, device=dev)
    if b == 1:  # no padding: selection instead of a sort
        vals = dist[0, iu[0], iu[1]]
        k = vals.numel()
        lo = torch.kthvalue(vals, (k - 1) // 2 + 1).values
        hi = lo if k % 2 else torch.kthvalue(vals, k // 2 + 1).values
        med = ((lo + hi) / 2)[None]
    else:
        m = valid.sum(1)
        med = _masked_median(dist[:, iu[0], iu[1]], pair[:, iu[0], iu[1]], m * (m - 1) // 2)
    scale = torch.where(med > 1e-9, med, torch.ones_like(med)) * width
    peer = pair & (lt[:, :, None] != lt[:, None, :])
    w = torch.exp(-dist / scale[:, None, None]) * peer
    k = int(lt.max()) + 1  # trajectories of the batch's largest bucket
    onehot = torch.zeros((b, s, k), dtype=torch.float64, device=dev)
    onehot.scatter_(2, lt[:, :, None], valid[:, :, None].to(torch.float64))
    alpha = torch.bmm(w, onehot)  # (B, S, K) weight of each peer trajectory
    g = torch.bmm(w, onehot * t[:, :, None]) / alpha.clamp_min(1e-12)
    a_sum = alpha.sum(2)
    loo = (alpha * g).sum(2) / a_sum.clamp_min(1e-12)
    eff = a_sum.square() / alpha.square().sum(2).clamp_min(1e-12)
    return loo, eff


def credit_pass(
    bucket: torch.Tensor, nb: int, traj: torch.Tensor, step: torch.Tensor, tgt: torch.Tensor,
    query: torch.Tensor, feats: Features | None, tau: float, rho: float, force_lambda: bool,
    kernel_for_diagnostics: bool = True,
) -> Credit:
    """Credit the ``query`` rows (``(N,)`` bool) against their ``bucket`` (``(N,)``).

    ``traj``, ``step``: ``(N,)`` int64; ``tgt``: ``(N,)`` float64 targets; ``feats``: the
    features, or None (then ``b_loo = b_obs`` and ``n_eff`` is NaN: only valid when the
    kernel baseline cannot reach the result). ``kernel_for_diagnostics``: compute the
    kernel (for ``n_eff``) even when it cannot change the credit (rho = 0, not forced).
    Formulas: module docstring.
    """
    n = tgt.numel()
    nan = torch.full((n,), float("nan"), dtype=torch.float64, device=tgt.device)
    out = Credit(torch.zeros(n, dtype=torch.bool, device=tgt.device), nan.clone(), nan.clone(),
                 nan.clone(), nan.clone(), nan.clone())
    mask = eligible_rows(bucket, nb, traj, query)
    on = mask & query
    if not bool(on.any()):
        return out
    _, b_obs, s2, j = uniform_stats(bucket, nb, traj, tgt)
    useful = force_lambda or rho > 0 or kernel_for_diagnostics
    if feats is not None and useful:
        b_loo, n_eff = kernel_stats(bucket, traj, step, tgt, mask, feats, tau)
    else:
        b_loo, n_eff = b_obs, nan
    if force_lambda:
        lam = torch.ones_like(b_obs)
    else:
        var_gain = (1.0 / n_eff.clamp_min(1e-9) - 1.0 / j.clamp_min(1e-9)).clamp_min(0.0)
        d = rho * (b_obs - b_loo)
        small = d.abs() < 1e-12
        ratio = s2 * var_gain / torch.where(small, torch.ones_like(d), d * d)
        lam = torch.where(small, torch.zeros_like(d), 1.0 - ratio).clamp(0.0, 1.0)
    out.credited = on
    out.b_loo = torch.where(on, b_loo, nan)
    out.b_obs = torch.where(on, b_obs, nan)
    out.lam = torch.where(on, lam, nan)
    out.n_eff = torch.where(on, n_eff, nan)
    out.j = torch.where(on, j, nan)
    return out
