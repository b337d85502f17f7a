"""CCPO features: batch-wide whitening of phi, the context block, the stored feature rows.

Whitening (as the reference ``whiten_feats``): centre the batch, remove the top
``whiten_k`` principal directions, L2-normalise each row (floor 1e-9); a batch of one
row is left as it is, and nothing is removed unless ``N > whiten_k``. The directions are
the EXACT top-``k`` subspace, as the reference's SVD gives it (to :data:`CERTIFY_SIN` in
the projection), even when the top singular values are nearly tied: an exact
eigendecomposition of the small Gram/covariance matrix when ``min(N, d) <=
EXACT_LIMIT``; otherwise randomized subspace iteration with a fixed-seed
``torch.Generator`` (oversampling 10, power iterations until the top Ritz values settle),
whose result is then certified in float64 (:func:`certified_directions`: Rayleigh-Ritz
on ``k + 1`` Ritz vectors, residual bound over the ``k``/``k+1`` gap) and, when the
certificate fails (a nearly tied spectrum), replaced by the exact eigendecomposition of
the float64 covariance (or Gram) matrix.

Arithmetic runs in float64 when ``phi`` is float64 or small (``N*d <= SMALL_ELEMENTS``)
and in float32 otherwise, to keep the extra memory near one copy of ``phi``.

Context block (``phi = hidden+ctx``), per row, from the batch alone: ``t`` = the turn
index; ``n_unique`` = distinct anchor observations of the trajectory at turns ``<= t``;
``revisit`` = the observation occurred at an earlier turn of the trajectory; ``progress``
= ``n_unique / (t + 1)`` (the fraction of turns so far that reached a new observation;
the reference's ``derive_context``). Coded as 12-bin thermometers of ``t`` on [0, 30],
``n_unique`` on [0, 25], ``progress`` on [0, 1] (bin ``j`` is on when
``j < floor(12 * clip((v - lo) / (hi - lo), 0, 1))``) plus the revisit bit: 37 values,
L2-normalised, times ``ctx_w``, appended to the whitened row, then the row is renormalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.grouping import group_ids

EXACT_LIMIT = 256
"""``min(N, d)`` at or below which the top directions are computed exactly."""
SMALL_ELEMENTS = 1 << 22
"""``N * d`` at or below which all feature arithmetic runs in float64."""
OVERSAMPLE = 10
MAX_POWER_ITERS = 8
NEAR_D2 = 1e-4
"""Squared distances below this are recomputed by direct differences in float64."""
CERTIFY_SIN = 1e-7
"""Largest sine of the angle between the whitening subspace and the exact one accepted
from the randomized path (a Davis-Kahan bound: residual norm over the Ritz gap)."""
ROW_CHUNK = 1024
PASS_CHUNK = 256
"""Rows per chunk of a fused pass over the feature buffer (small enough to stay in cache:
measured fastest among 128-1024 rows)."""
THERMO_BINS = 12
CTX_DIM = 3 * THERMO_BINS + 1


def _work_dtype(phi: torch.Tensor) -> torch.dtype:
    if phi.dtype == torch.float64 or phi.shape[0] * phi.shape[1] <= SMALL_ELEMENTS:
        return torch.float64
    return torch.float32


class _NormalProducts:
    """Accumulates ``(x^T x z, (x z)^T (x z))`` in float64 over chunks of rows of ``x``,
    so that a pass that already holds a chunk in cache (the copy) can feed it."""

    def __init__(self, z: torch.Tensor, dtype: torch.dtype) -> None:
        d, width = z.shape
        self.zt = z.T.to(dtype).contiguous()
        self.wt = torch.zeros((width, d), dtype=torch.float64, device=z.device)
        self.g = torch.zeros((width, width), dtype=torch.float64, device=z.device)

    def add(self, blk: torch.Tensor) -> None:
        yt = self.zt @ blk.T  # (l, chunk): in this orientation BLAS runs about twice as fast
        self.wt += (yt @ blk).to(torch.float64)
        yd = yt.to(torch.float64)
        self.g += yd @ yd.T

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.wt.T, self.g


def _normal_products(x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x^T x z, (x z)^T (x z))`` in float64, in ONE pass over the rows of ``x``.

    ``x``: ``(N, d)``; ``z``: ``(d, l)``. Each chunk of ``PASS_CHUNK`` rows is used for both
    products while it is in cache, so a power iteration reads ``x`` once, not twice.
    """
    acc = _NormalProducts(z, x.dtype)
    for r in range(0, x.shape[0], PASS_CHUNK):
        acc.add(x[r:r + PASS_CHUNK])
    return acc.result()


def _power_step(x: torch.Tensor, z: torch.Tensor,
                products: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> torch.Tensor | None:
    """``x^T Q`` with ``Q`` the orthonormal basis of ``x z`` (``(d, l)``, float64), from one
    pass (Cholesky QR: ``(xz)^T (xz) = L L^T``, ``x^T Q = x^T x z L^{-T}``; ``products``:
    that pass's result when already computed); None when ``x z`` is rank-deficient."""
    w, g = products if products is not None else _normal_products(x, z)
    chol, info = torch.linalg.cholesky_ex(g)
    if int(info) != 0:
        return None
    return torch.linalg.solve_triangular(chol, w.T, upper=False).T


def sketch(d: int, k: int, n: int, dtype: torch.dtype, device: torch.device,
           seed: int = 0) -> torch.Tensor:
    """The fixed-seed ``(d, min(k + OVERSAMPLE, n, d))`` Gaussian start of the subspace
    iteration."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(d, min(k + OVERSAMPLE, n, d), generator=gen, dtype=dtype,
                       device=device)


def randomized(n: int, d: int) -> bool:
    """Whether :func:`top_directions` uses the randomized path for an ``(n, d)`` input."""
    return min(n, d) > EXACT_LIMIT


def top_directions(x: torch.Tensor, k: int, seed: int = 0,
                   first: tuple[torch.Tensor, torch.Tensor] | None = None,
                   extra: int = 0) -> torch.Tensor:
    """Top ``k`` right singular vectors of ``x``: ``(d, k')`` orthonormal, ``k' <= k``.

    ``x``: ``(N, d)`` centred rows. Exact (eigendecomposition of the ``min(N, d)``-sized
    Gram or covariance matrix in float64) when ``min(N, d) <= EXACT_LIMIT``; otherwise
    randomized subspace iteration seeded with ``seed``, one pass over ``x`` per
    iteration (:func:`_power_step`; Householder QR when that is rank-deficient). Directions
    with zero singular value are dropped (they do not change a projection). ``first``: the
    products of the first pass (``x`` times :func:`sketch`), when the caller computed them
    while writing ``x``. ``extra``: Ritz vectors returned beyond ``k`` on the randomized
    path (for :func:`certified_directions`), float64 there.
    """
    n, d = x.shape
    if not randomized(n, d):
        xd = x.to(torch.float64)
        small_rows = n <= d
        gram = xd @ xd.T if small_rows else xd.T @ xd
        evals, evecs = torch.linalg.eigh(gram)
        evals, evecs = evals.flip(0)[:k], evecs.flip(1)[:, :k]
        keep = evals > 1e-12 * float(evals.max().clamp_min(1e-300))
        evals, evecs = evals[keep], evecs[:, keep]
        v = (xd.T @ evecs) / evals.sqrt() if small_rows else evecs
        return v.to(x.dtype)
    omega = sketch(d, k, n, x.dtype, x.device, seed)

    def step(z: torch.Tensor, products: tuple[torch.Tensor, torch.Tensor] | None = None
             ) -> torch.Tensor:
        out = _power_step(x, z, products)
        if out is None:  # rank-deficient sketch: Householder QR, two passes
            out = (x.T @ torch.linalg.qr(x @ z.to(x.dtype)).Q).to(torch.float64)
        return out

    tol = 1e-10 if x.dtype == torch.float64 else 1e-5
    prev: torch.Tensor | None = None
    z = step(omega, first)
    for _ in range(MAX_POWER_ITERS):
        s = torch.linalg.svdvals(z)
        if prev is not None and bool(((s[:k] - prev[:k]).abs() <= tol * s[0]).all()):
            break
        prev = s
        z = step(z)
    u, s, _ = torch.linalg.svd(z, full_matrices=False)
    if extra:
        return u[:, :k + extra]
    keep = s[:k] > 1e-12 * float(s[0].clamp_min(1e-300))
    return u[:, :k][:, keep].to(x.dtype)


def _centred64(phi: torch.Tensor, centre: torch.Tensor, rows: slice) -> torch.Tensor:
    """A float64 copy of ``phi[rows] - centre`` (never a view: ``phi`` is the caller's)."""
    return torch.sub(phi[rows].to(torch.float64), centre)


def _apply_cov(phi: torch.Tensor, centre: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``C u`` in float64, ``C = X^T X`` of ``X = phi - centre`` (``phi`` ``(N, d)``, any
    float dtype; ``centre`` ``(d,)`` and ``u`` ``(d, m)`` float64), chunk by chunk."""
    w = torch.zeros_like(u)
    for r in range(0, phi.shape[0], PASS_CHUNK):
        xd = _centred64(phi, centre, slice(r, r + PASS_CHUNK))
        w += xd.T @ (xd @ u)
    return w


def exact_directions(phi: torch.Tensor, centre: torch.Tensor, k: int) -> torch.Tensor:
    """``(d, k')`` float64: the exact top-``k`` right singular vectors of ``phi - centre``
    (``phi`` ``(N, d)``, ``centre`` ``(d,)`` float64), from ``eigh`` of the float64
    covariance (``N > d``) or Gram (``N <= d``) matrix; zero directions dropped."""
    n, d = phi.shape
    if n > d:
        cov = torch.zeros((d, d), dtype=torch.float64, device=phi.device)
        for r in range(0, n, ROW_CHUNK):
            xd = _centred64(phi, centre, slice(r, r + ROW_CHUNK))
            cov.addmm_(xd.T, xd)
        evals, evecs = torch.linalg.eigh(cov)
        evals, v = evals.flip(0)[:k], evecs.flip(1)[:, :k]
    else:
        xd = _centred64(phi, centre, slice(0, n))
        evals, evecs = torch.linalg.eigh(xd @ xd.T)
        evals, evecs = evals.flip(0)[:k], evecs.flip(1)[:, :k]
        v = (xd.T @ evecs) / evals.clamp_min(1e-300).sqrt()
    keep = evals > 1e-12 * float(evals.max().clamp_min(1e-300))
    return v[:, keep]


def certified_directions(phi: torch.Tensor, centre: torch.Tensor, ritz: torch.Tensor,
                         k: int) -> torch.Tensor | None:
    """The top-``k`` directions refined from ``ritz`` (``(d, k + 1)`` float64 orthonormal
    Ritz vectors of the randomized path), or None when they cannot be certified.

    Rayleigh-Ritz of the float64 covariance of ``phi - centre`` on ``ritz``: eigenpairs
    ``(theta_i, u_i)`` and residuals ``r_i = C u_i - theta_i u_i``. Accepted when
    ``||[r_1..r_k]||_F / (theta_k - theta_{k+1} - ||r_{k+1}||) <= CERTIFY_SIN`` (a
    Davis-Kahan bound on the sine of the angle to the exact subspace, with the
    ``k + 1``-th Ritz value standing for the rest of the spectrum: a sketch that missed a
    top direction entirely would pass, which a Gaussian sketch oversampled by 10 and
    power-iterated makes vanishingly unlikely; it is not a proof).
    """
    w = _apply_cov(phi, centre, ritz)
    theta, rot = torch.linalg.eigh(ritz.T @ w)
    theta, rot = theta.flip(0), rot.flip(1)
    u, cu = ritz @ rot, w @ rot
    res = torch.linalg.vector_norm(cu - u * theta, dim=0)
    gap = float(theta[k - 1] - theta[k] - res[k])
    if gap <= 0 or float(torch.linalg.vector_norm(res[:k])) > CERTIFY_SIN * gap:
        return None
    keep = theta[:k] > 1e-12 * float(theta[0].clamp_min(1e-300))
    return u[:, :k][:, keep]


def whitening_directions(x: torch.Tensor, phi: torch.Tensor, centre: torch.Tensor, k: int,
                         first: tuple[torch.Tensor, torch.Tensor] | None = None
                         ) -> torch.Tensor:
    """``(d, k')`` the exact top-``k`` directions of the centred ``phi`` (module docstring),
    in ``x``'s dtype. ``x``: ``(N, d)`` the centred rows in the work dtype (what the
    randomized search reads); ``phi``: the raw rows (any order); ``centre``:
    ``(d,)`` float64 mean of ``phi``."""
    n, d = x.shape
    if not randomized(n, d):
        return top_directions(x, k)
    ritz = top_directions(x, k, first=first, extra=1)
    v = certified_directions(phi, centre, ritz, k) if ritz.shape[1] > k else None
    if v is None:
        v = exact_directions(phi, centre, k)
    return v.to(x.dtype)


def _remove_(blk: torch.Tensor, vt: torch.Tensor | None) -> None:
    """``blk -= (blk v) v^T`` in place; ``vt``: ``(k, d)`` directions as rows (None: no-op)."""
    if vt is not None and vt.numel():
        blk.addmm_((vt @ blk.T).T, vt, alpha=-1.0)


def _finish_rows_(x: torch.Tensor, v: torch.Tensor | None) -> None:
    """In place, chunk by chunk: remove the directions ``v`` (``(d, k)``), L2-normalise
    each row (floor 1e-9). ``x``: ``(N, d)`` centred rows."""
    vt = None if v is None else v.T.contiguous()
    for r in range(0, x.shape[0], PASS_CHUNK):
        blk = x[r:r + PASS_CHUNK]
        _remove_(blk, vt)
        blk.div_(torch.linalg.vector_norm(blk, dim=1).clamp_min(1e-9)[:, None])


def _directions(x: torch.Tensor, k: int) -> torch.Tensor | None:
    return top_directions(x, k) if k > 0 and x.shape[0] > k else None


def whiten_(x: torch.Tensor, k: int) -> torch.Tensor:
    """In place: centre, remove the top ``k`` principal directions, L2-normalise (floor
    1e-9). ``x``: ``(N, d)`` float (may be a column slice). A single row is left unchanged
    (as the reference does). Returns ``x``."""
    if x.shape[0] < 2:
        return x
    x.sub_(x.mean(0))
    _finish_rows_(x, _directions(x, k))
    return x


def whiten(phi: torch.Tensor, k: int) -> torch.Tensor:
    """A whitened copy of ``phi`` (``(N, d)``) in the work dtype (see :func:`whiten_`)."""
    return whiten_(phi.to(_work_dtype(phi), copy=True), k)


def _thermometer(v: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    f = ((v - lo) / max(hi - lo, 1e-9)).clamp(0.0, 1.0)
    on = torch.floor(f * THERMO_BINS)
    bins = torch.arange(THERMO_BINS, dtype=v.dtype, device=v.device)
    return (bins[None, :] < on[:, None]).to(v.dtype)


def context_block(batch: StepBatch) -> torch.Tensor:
    """The 37-d context block of every row, L2-normalised: ``(N, 37)`` float64."""
    step = batch.step_index
    t = step.to(torch.float64)
    key, nk = group_ids(batch.traj_index, batch.obs_index)
    first = torch.full((nk,), int(step.max()) + 1, dtype=torch.int64, device=step.device)
    first.scatter_reduce_(0, key, step, "amin")
    is_first = step == first[key]
    width = int(step.max()) + 1
    order = torch.argsort(batch.traj_index * width + step)
    csum = torch.cumsum(is_first[order].to(torch.int64), 0)
    traj_sorted = batch.traj_index[order]
    start = torch.ones_like(traj_sorted, dtype=torch.bool)
    start[1:] = traj_sorted[1:] != traj_sorted[:-1]
    base = torch.zeros(batch.n_traj, dtype=torch.int64, device=step.device)
    base[traj_sorted[start]] = (csum - is_first[order].to(torch.int64))[start]
    n_unique = torch.empty_like(csum)
    n_unique[order] = csum - base[traj_sorted]
    nu = n_unique.to(torch.float64)
    progress = nu / (t + 1.0).clamp_min(1.0)
    block = torch.cat([
        _thermometer(t, 0.0, 30.0),
        _thermometer(nu, 0.0, 25.0),
        _thermometer(progress, 0.0, 1.0),
        (~is_first).to(torch.float64)[:, None],
    ], dim=1)
    norm = torch.linalg.vector_norm(block, dim=1).clamp_min(1e-9)
    return block / norm[:, None]


@dataclass
class Features:
    """The final CCPO features ``f_i = [z_i, w c_i] / ||[z_i, w c_i]||`` (``z`` the
    whitened ``phi``; no context part under ``phi = hidden``).

    ``f``: ``(N, D)`` rows stored in a bucket-friendly order; ``pos``: ``(N,)`` storage
    position of each batch row; ``phi``: ``(N, d)`` raw input and ``ctx``: ``(N, 37)``
    float64 scaled context block or None, both in batch row order, for the exact-duplicate
    test of :meth:`exact_sq_dist`.
    """

    f: torch.Tensor
    pos: torch.Tensor
    phi: torch.Tensor
    ctx: torch.Tensor | None

    def rows(self, idx: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Final feature rows of batch rows ``idx`` (``(m,)``): ``(m, D)``."""
        out = self.f[self.pos[idx]]
        return out if dtype is None else out.to(dtype)

    def block(self, idx: torch.Tensor) -> torch.Tensor:
        """``(m, D)`` rows ``idx`` (``(m,)``) in that order: a view when they are stored
        contiguously in that order, else a copy."""
        sp = self.pos[idx]
        lo = int(sp[0])
        if int(sp[-1]) - lo == sp.numel() - 1 and torch.equal(
                sp, torch.arange(lo, lo + sp.numel(), device=sp.device)):
            return self.f[lo:lo + sp.numel()]
        return self.f[sp]

    def exact_sq_dist(self, ra: torch.Tensor, rb: torch.Tensor) -> torch.Tensor:
        """``(k,)`` float64 squared distances of row pairs ``(ra, rb)`` (``(k,)`` each) by
        direct differences; exactly 0 when both rows have identical ``phi`` and context."""
        out = torch.empty(ra.numel(), dtype=torch.float64, device=ra.device)
        for s in range(0, ra.numel(), 2048):
            a, b = ra[s:s + 2048], rb[s:s + 2048]
            same = (self.phi[a] == self.phi[b]).all(1)
            if self.ctx is not None:
                same &= (self.ctx[a] == self.ctx[b]).all(1)
            diff = self.rows(a, torch.float64) - self.rows(b, torch.float64)
            out[s:s + 2048] = torch.where(same, torch.zeros_like(same, dtype=torch.float64),
                                          (diff * diff).sum(1))
        return out


def build_features(batch: StepBatch, whiten_k: int, mode: str, ctx_w: float,
                   order: torch.Tensor, dtype: torch.dtype | None = None) -> Features:
    """Features of ``batch.phi`` (``(N, d)``), stored in the row ``order`` (``(N,)``), in
    ``dtype`` (default: the work dtype, :func:`_work_dtype`).

    One ``(N, D)`` buffer in the work dtype is the only large allocation. Passes over it:
    ``phi`` copied in ``order`` and centred, one per power iteration of the whitening
    directions, and one that removes them, normalises each row, appends the context block
    and renormalises, chunk by chunk while the chunk is in cache.
    """
    assert batch.phi is not None
    phi = batch.phi
    n, d = phi.shape
    with_ctx = mode == "hidden+ctx" and ctx_w > 0
    width = d + (CTX_DIM if with_ctx else 0)
    dt = dtype or _work_dtype(phi)
    f = torch.empty((n, width), dtype=dt, device=phi.device)
    x = f[:, :d]
    # torch accumulates a float32 mean in double: the rounded mean is accurate to an ulp,
    # and it is computed without a float64 copy of phi
    centre64 = phi.mean(0).to(torch.float64) if n >= 2 else None
    centre = None if centre64 is None else centre64.to(dt)
    fuse = centre is not None and whiten_k > 0 and n > whiten_k and randomized(n, d)
    acc = _NormalProducts(sketch(d, whiten_k, n, dt, phi.device), dt) if fuse else None
    for r in range(0, n, PASS_CHUNK):
        rows = phi[order[r:r + PASS_CHUNK]].to(dt)
        if centre is None:  # a single row is left as it is (the reference's whitening)
            x[r:r + PASS_CHUNK] = rows
            continue
        blk = torch.sub(rows, centre, out=x[r:r + PASS_CHUNK])
        if acc is not None:  # the first power-iteration pass, while the chunk is in cache
            acc.add(blk)
    pos = torch.empty_like(order)
    pos[order] = torch.arange(n, device=order.device)
    ctx = ctx_w * context_block(batch) if with_ctx else None
    v = None
    if centre is not None and whiten_k > 0 and n > whiten_k:
        assert centre64 is not None
        v = whitening_directions(x, phi, centre64, whiten_k,
                                 first=None if acc is None else acc.result())
    vt = None if v is None else v.T.contiguous()
    for r in range(0, n, PASS_CHUNK):
        blk = x[r:r + PASS_CHUNK]
        scale = torch.ones(blk.shape[0], dtype=torch.float64, device=blk.device)
        if centre is not None:
            _remove_(blk, vt)
            norm = torch.linalg.vector_norm(blk, dim=1).to(torch.float64)
            scale = 1.0 / norm.clamp_min(1e-9)
            zz = (norm * scale).square()  # the whitened row's squared norm: 1, or 0
        else:
            zz = torch.linalg.vector_norm(blk, dim=1).to(torch.float64).square()
        if ctx is not None:
            c = ctx[order[r:r + PASS_CHUNK]]
            total = (zz + (c * c).sum(1)).sqrt().clamp_min(1e-9)
            f[r:r + PASS_CHUNK, d:] = (c / total[:, None]).to(dt)
            scale = scale / total
        if centre is not None or ctx is not None:
            blk.mul_(scale.to(dt)[:, None])
    return Features(f=f, pos=pos, phi=phi, ctx=ctx)
