"""Scores with chosen paired statistics, for the decision tests."""

from __future__ import annotations

import numpy as np

Scores = dict[str, dict[int, float]]


def standard(n: int) -> np.ndarray:
    """(n,) fixed values with mean 0 and sd (ddof=1) 1 (zeros for n = 1)."""
    if n < 2:
        return np.zeros(n)
    z = np.sin(np.arange(1, n + 1) * 1.7)
    z = z - z.mean()
    return z / z.std(ddof=1)


def paired(base: dict[int, float], seeds: list[int], mean: float, sd: float) -> dict[int, float]:
    """Scores on ``seeds`` whose differences from ``base`` have exactly this mean and sd."""
    d = mean + sd * standard(len(seeds))
    return {s: base[s] + float(v) for s, v in zip(seeds, d, strict=True)}


def reference(seeds: list[int] | range) -> dict[int, float]:
    """A reference arm's scores (their own spread is irrelevant to paired tests)."""
    return {int(s): 0.4 + 0.05 * float(np.cos(3.1 * s)) for s in seeds}


def extend(scores: Scores, arm: str, values: dict[int, float]) -> Scores:
    """A copy of ``scores`` with ``values`` added to ``arm``."""
    out = {a: dict(v) for a, v in scores.items()}
    out.setdefault(arm, {}).update(values)
    return out
