"""Probability of improvement P(X > Y), as rliable, with a stratified bootstrap interval.

``P(X > Y)`` on task ``t`` is the Mann-Whitney U statistic of X's runs against
Y's runs on that task divided by ``n_x * n_y``: the fraction of (x-run, y-run)
pairs in which X scores higher, ties counting 0.5. The overall value averages
the per-task values over tasks. 0.5 means no difference; it is a statement
about how often X beats Y, not by how much.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ccpo_lab.stats.bootstrap import DEFAULT_N_REPS, MAX_ELEMENTS, Interval, percentile_interval
from ccpo_lab.stats.checks import check_confidence, check_reps, check_rng

__all__ = [
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "probability_of_improvement_distribution",
]


def _matrix(scores: ArrayLike, name: str) -> NDArray[np.float64]:
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim < 2 or a.shape[-2] == 0 or a.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., runs, tasks) with both >= 1, got {a.shape}")
    return a


def _poi(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """(..., n_x, tasks), (..., n_y, tasks) -> (...): P(X > Y) averaged over tasks."""
    xa = x[..., :, None, :]
    ya = y[..., None, :, :]
    wins = (xa > ya).mean(axis=(-3, -2)) + 0.5 * (xa == ya).mean(axis=(-3, -2))
    return wins.mean(axis=-1)


def probability_of_improvement(
    scores_x: ArrayLike, scores_y: ArrayLike
) -> NDArray[np.float64] | float:
    """P(X > Y): Mann-Whitney U / (n_x n_y) per task, averaged over tasks (rliable).

    Args:
        scores_x: float (..., n_x, tasks) -- runs of X per task; a 1-D (n_x,) is one task.
        scores_y: float (..., n_y, tasks) -- runs of Y; same tasks (and leading axes).
            The run counts may differ.

    Returns:
        A float in [0, 1] for 2-D inputs (else an array of the leading shape). nan if
        either matrix holds nan (a matrix's leading-axis slice, for batched input).

    Raises:
        ValueError: if the task counts or leading shapes differ.
    """
    x = _matrix(scores_x, "scores_x")
    y = _matrix(scores_y, "scores_y")
    if x.shape[-1] != y.shape[-1] or x.shape[:-2] != y.shape[:-2]:
        raise ValueError(f"scores_x {x.shape} and scores_y {y.shape} must have the same tasks")
    res = _poi(x, y)
    bad = np.isnan(x).any(axis=(-2, -1)) | np.isnan(y).any(axis=(-2, -1))
    res = np.where(bad, np.nan, res)
    return float(res) if np.ndim(res) == 0 else res


def _check_pair(scores_x: ArrayLike, scores_y: ArrayLike) -> tuple[NDArray[np.float64], ...]:
    x = _matrix(scores_x, "scores_x")
    y = _matrix(scores_y, "scores_y")
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"scores_x {x.shape} and scores_y {y.shape} must be (runs, same tasks)")
    return x, y


def _run_counts(idx: NDArray[np.intp], n: int) -> NDArray[np.float64]:
    """How often each run is drawn: int (reps, n, tasks) in [0, n) -> float (tasks, reps, n)."""
    reps, _, tasks = idx.shape
    lin = (np.arange(tasks) * reps + np.arange(reps)[:, None, None]) * n + idx
    counts = np.bincount(lin.ravel(), minlength=tasks * reps * n)
    return counts.reshape(tasks, reps, n).astype(np.float64)


def probability_of_improvement_distribution(
    scores_x: ArrayLike,
    scores_y: ArrayLike,
    rng: np.random.Generator,
    n_reps: int = DEFAULT_N_REPS,
    max_elements: int = MAX_ELEMENTS,
) -> NDArray[np.float64]:
    """P(X > Y) of ``n_reps`` independent stratified resamples of X and Y.

    Resample ``b`` takes, for every task ``t``, X's runs ``ix[b, :, t]`` and Y's runs
    ``iy[b, :, t]``, where each chunk draws ``ix = rng.integers(0, n_x, (c, n_x,
    tasks))`` and then ``iy`` likewise. P(X > Y) of a resample is computed from how
    often each run is drawn: ``sum_ij cx_i W_ij cy_j / (n_x n_y)`` per task with
    ``W_ij = [x_i > y_j] + 0.5 [x_i == y_j]``, identical to comparing the resampled
    scores pairwise but several times faster.

    Args:
        scores_x: float (n_x, tasks) (or (n_x,)); no nan.
        scores_y: float (n_y, tasks) (or (n_y,)); no nan.
        rng: explicit Generator.
        n_reps: number of resamples.
        max_elements: bound on the indices drawn per chunk; the stream (hence the
            result) depends on it, because X and Y draws interleave per chunk.

    Returns:
        float (n_reps,).
    """
    check_rng(rng)
    n_reps = check_reps(n_reps)
    x, y = _check_pair(scores_x, scores_y)
    (n_x, tasks), n_y = x.shape, y.shape[0]
    xt, yt = x.T[:, :, None], y.T[:, None, :]
    win = (xt > yt) + 0.5 * (xt == yt)  # (tasks, n_x, n_y)
    chunk = max(1, max_elements // ((n_x + n_y) * tasks))
    out = np.empty(n_reps, dtype=np.float64)
    done = 0
    while done < n_reps:
        k = min(chunk, n_reps - done)
        cx = _run_counts(rng.integers(0, n_x, size=(k, n_x, tasks), dtype=np.intp), n_x)
        cy = _run_counts(rng.integers(0, n_y, size=(k, n_y, tasks), dtype=np.intp), n_y)
        per_task = (np.matmul(cx, win) * cy).sum(axis=-1)  # (tasks, k)
        out[done : done + k] = per_task.mean(axis=0) / (n_x * n_y)
        done += k
    return out


def probability_of_improvement_ci(
    scores_x: ArrayLike,
    scores_y: ArrayLike,
    rng: np.random.Generator,
    confidence: float = 0.95,
    n_reps: int = DEFAULT_N_REPS,
    max_elements: int = MAX_ELEMENTS,
) -> Interval:
    """P(X > Y) with a percentile interval from an independent stratified bootstrap.

    Each resample draws, for every task independently, ``n_x`` runs of X and
    ``n_y`` runs of Y with replacement (rliable's StratifiedIndependentBootstrap);
    see :func:`probability_of_improvement_distribution`.

    Args:
        scores_x: float (n_x, tasks) (or (n_x,) for one task).
        scores_y: float (n_y, tasks) (or (n_y,)).
        rng: explicit Generator.
        confidence: level in (0, 1).
        n_reps: number of resamples (default 50,000).
        max_elements: memory bound per chunk; keep the default for reproducibility.

    Returns:
        :class:`Interval`. nan everywhere if either matrix holds nan; the estimate
        and nan bounds if either arm has a single run (nothing is drawn).
    """
    check_rng(rng)
    c = check_confidence(confidence)
    n_reps = check_reps(n_reps)
    x, y = _check_pair(scores_x, scores_y)
    nan = float("nan")
    estimate = probability_of_improvement(x, y)
    if np.isnan(estimate):
        return Interval(estimate=nan, low=nan, high=nan, confidence=c, n_reps=0)
    if x.shape[0] < 2 or y.shape[0] < 2:
        return Interval(estimate=float(estimate), low=nan, high=nan, confidence=c, n_reps=0)
    dist = probability_of_improvement_distribution(x, y, rng, n_reps, max_elements)
    lo, hi = percentile_interval(dist, c)
    return Interval(estimate=float(estimate), low=lo, high=hi, confidence=c, n_reps=int(n_reps))
