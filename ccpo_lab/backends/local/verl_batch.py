"""verl's batch pipeline before the advantage, for the CPU backend (issue 30).

verl-agent's ``RayPPOTrainer.fit`` (796ed31) does two things to a step's turn rows before
it computes the advantage, and the CPU backend reproduces both when its sweep sets
``backend.local.batch_world_size`` (so that an ``as-run`` arm asks here the question it
asks on a cluster):

- :func:`pad_rows`: verl-agent's ``adjust_batch`` (mode ``copy``): when the row count is
  not a multiple of :func:`size_divisor`, copies of distinct randomly drawn rows are
  appended until it is;
- :func:`balanced_order`: ``_balance_batch``: verl's ``get_seqlen_balanced_partitions``
  (Karmarkar-Karp largest differencing, equal-size partitions) over ``world_size``
  partitions of the rows' sequence lengths; the rows are reordered to the concatenation
  of the partitions, each partition's indices ascending.

Written from the algorithm (and checked against verl's own functions in
``tests/backends/verl/test_r30_verl_batch.py``); numpy and the standard library only.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


def size_divisor(world_size: int, micro_batch: int, log_prob_micro_batch: int) -> int:
    """verl-agent's padding divisor: ``lcm`` of the ref and rollout log-prob micro-batches
    and the actor micro-batch, each times ``world_size`` GPUs."""
    return math.lcm(log_prob_micro_batch * world_size, log_prob_micro_batch * world_size,
                    micro_batch * world_size)


class PaddingUndefined(ValueError):
    """More copies are needed than there are rows to copy (verl-agent would crash)."""


def pad_rows(n_rows: int, divisor: int,
             rng: np.random.Generator | np.random.RandomState) -> np.ndarray:
    """``(M,)`` int64: ``0..n_rows-1`` then the copies (distinct rows drawn without
    replacement, ``rng.choice(n_rows, M - n_rows, replace=False)``), ``M`` the next
    multiple of ``divisor``.

    ``rng``: the trainer passes a seeded Generator; a ``RandomState(s)`` draws exactly the
    rows verl-agent's ``adjust_batch`` draws after ``np.random.seed(s)`` (its global
    generator is a RandomState). Raises :class:`PaddingUndefined` when
    ``M - n_rows > n_rows``.
    """
    extra = (-n_rows) % divisor
    if extra > n_rows:
        raise PaddingUndefined(f"{n_rows} rows need {extra} copies of distinct rows to reach "
                               f"a multiple of {divisor}")
    copies = rng.choice(n_rows, extra, replace=False) if extra else np.zeros(0, np.int64)
    return np.concatenate([np.arange(n_rows), copies]).astype(np.int64)


@dataclass
class _Part:
    """One partition under construction: its total and its ``(index, length)`` items."""

    total: int = 0
    items: list[tuple[int, int]] = field(default_factory=list)

    def key(self) -> tuple[int, int, list[tuple[int, int]]]:
        """verl's order of partitions: by total, then size, then items."""
        return self.total, len(self.items), self.items

    def absorb(self, other: _Part) -> None:
        self.items.extend(other.items)
        self.total += other.total


class _Node:
    """``k`` partitions kept largest first; the heap pops the widest spread first, and
    on a tie the node whose largest partition is larger."""

    def __init__(self, parts: list[_Part]) -> None:
        self.parts = sorted(parts, key=_Part.key, reverse=True)

    @property
    def spread(self) -> int:
        return self.parts[0].total - self.parts[-1].total

    def __lt__(self, other: _Node) -> bool:
        if self.spread != other.spread:
            return self.spread > other.spread
        return self.parts[0].key() > other.parts[0].key()

    def combine(self, other: _Node) -> None:
        """Largest with smallest: partition ``i`` absorbs ``other``'s ``k - 1 - i``."""
        k = len(self.parts)
        for i in range(k):
            self.parts[i].absorb(other.parts[k - 1 - i])
        self.parts = sorted(self.parts, key=_Part.key, reverse=True)


def balanced_partitions(seqlens: Sequence[int], k: int) -> list[list[int]]:
    """verl's ``get_seqlen_balanced_partitions(seqlens, k, equal_size=True)``: ``k``
    partitions of equal size, each a sorted list of row indices.

    ``seqlens``: ``(M,)`` with ``M`` a multiple of ``k``.
    """
    if k < 1 or len(seqlens) % k or len(seqlens) < k:
        raise ValueError(f"{len(seqlens)} rows cannot form {k} equal partitions")
    ranked = sorted((int(s), i) for i, s in enumerate(seqlens))
    heap: list[_Node] = []
    for start in range(0, len(ranked), k):
        parts = [_Part(s, [(i, s)]) for s, i in ranked[start:start + k]]
        heapq.heappush(heap, _Node(parts))
    while len(heap) > 1:
        first, second = heapq.heappop(heap), heapq.heappop(heap)
        first.combine(second)
        heapq.heappush(heap, first)
    return [sorted(i for i, _ in part.items) for part in heap[0].parts]


def balanced_order(seqlens: Sequence[int], k: int) -> np.ndarray:
    """``(M,)`` int64: the rows in ``_balance_batch``'s order (the partitions of
    :func:`balanced_partitions`, concatenated)."""
    return np.asarray([i for part in balanced_partitions(seqlens, k) for i in part],
                      dtype=np.int64)


def passed_rows(seqlens: Sequence[int], world_size: int, micro_batch: int,
                rng: np.random.Generator | np.random.RandomState) -> np.ndarray:
    """``(M,)`` int64: the batch verl-agent's ``fit`` passes to the advantage, as indices
    of the ``N`` rows (``seqlens``: ``(N,)``): padded, then balanced over
    ``world_size`` partitions."""
    padded = pad_rows(len(seqlens), size_divisor(world_size, micro_batch, micro_batch), rng)
    lengths = np.asarray(seqlens)[padded]
    return padded[balanced_order(lengths.tolist(), world_size)]
