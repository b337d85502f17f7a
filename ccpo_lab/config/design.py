"""The adaptive design: a frozen, validated, JSON round-tripping description of the looks.

One source of truth for the design's parameters: the sweep configuration (stage B) builds an
:class:`AdaptiveDesign`; the state file in the sweep directory stores it
(:meth:`AdaptiveDesign.to_dict`); every decision is taken from it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ccpo_lab.errors import UserError
from ccpo_lab.stats.joint import (
    MAX_JOINT_COMPARISONS,
    STATISTICS,
    VARIANCES,
    default_statistic,
)
from ccpo_lab.stats.sequential import SPENDING_FUNCTIONS, planned_information

__all__ = ["FAMILIES", "MAX_ALPHA", "MAX_COMPARISONS", "MAX_SEEDS_LIMIT", "STATISTICS", "TESTS",
           "AdaptiveDesign", "every_arm_versus"]

MAX_COMPARISONS = MAX_JOINT_COMPARISONS
"""The most comparisons a design may hold (the joint boundary's calibration limit)."""
MAX_ALPHA = 0.5
"""Family-wise levels must lie in (0, 0.5): a two-sided level of 0.5 or more is no test."""
TESTS = ("paired", "unpaired")
"""The per-comparison tests a design can declare."""
FAMILIES = ("joint", "holm")

"""How the level is shared across comparisons: the joint max-|t| boundary or Holm."""

MAX_SEEDS_LIMIT = 200
"""Largest ``max_seeds`` accepted (the boundaries' calibration simulates this many seeds
per null study; no RL study runs more)."""


def every_arm_versus(reference: str, arms: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The default comparisons: every arm other than ``reference`` against it, in order.

    >>> every_arm_versus("grpo", ["grpo", "gigpo", "ccpo"])
    (('gigpo', 'grpo'), ('ccpo', 'grpo'))
    """
    return tuple((a, reference) for a in arms if a != reference)


@dataclass(frozen=True)
class AdaptiveDesign:
    """A group-sequential seed design (see :mod:`ccpo_lab.stats.sequential` for the rule).

    Validation runs on construction and raises :class:`~ccpo_lab.errors.UserError` naming
    the field (:meth:`from_dict` prefixes it with the caller's key path).
    """

    comparisons: tuple[tuple[str, str], ...]
    """The comparisons that matter, each ``(arm, baseline)``: the difference is
    ``arm - baseline``. Non-empty, no pair repeated, no arm against itself. The default of
    a sweep is :func:`every_arm_versus` its reference."""
    initial_seeds: tuple[int, ...]
    """The seeds of the first look (the sweep's listed seeds), shared by every arm; at least
    two, distinct, non-negative."""
    max_seeds: int = 12
    """Largest number of seeds any arm gets (the first look included); at most
    :data:`MAX_SEEDS_LIMIT`. At 12 the design has 2-3 points less power than a fixed
    12-seed design; 13 (about 1.1 x the fixed design's seeds) matches it with fewer seeds
    on average (``tests/adaptive/test_simulation.py``)."""
    seeds_per_look: int = 3
    """Seeds added to each continuing arm per look (the last look may add fewer, to stop at
    ``max_seeds``)."""
    alpha: float = 0.05
    """Family-wise level over every look and every comparison (two-sided)."""
    power: float = 0.8
    """Power behind the seeds-needed figures (Colas et al. 2018): the one quoted for
    unresolved comparisons and the one of the futility rule."""
    spending: str = "power-3"
    """Alpha-spending function (Lan & DeMets 1983): a key of
    :data:`ccpo_lab.stats.sequential.SPENDING_FUNCTIONS`. The default, Kim & DeMets'
    ``alpha t^3``, spends enough at the second look to stop a clear effect there and
    keeps most of alpha for the last (docs/adaptive-seeds.md)."""
    test: str = "paired"
    """The test of every comparison, declared before any data: ``paired`` (the arms run
    the same seeds, as ccpo-lab runs them: the t-test of per-seed differences) or
    ``unpaired`` (the two-sample t; for arms whose seeds share nothing)."""
    family: str = "joint"
    """``joint``: the max-|t| boundary of the comparisons sharing one baseline, stepped
    down (:mod:`ccpo_lab.stats.joint`); ``holm``: Holm's alpha / r. Comparisons against
    different baselines always use Holm."""
    statistic: str | None = None
    """What the joint family tests (:mod:`ccpo_lab.stats.joint`): ``mean`` (the pooled t
    of the mean difference) or ``mean-or-rank`` (the maximum test of that t and the t of
    the comparison's ranks, on a boundary calibrated for the pair: the ranks keep the
    power on skewed scores that the mean's t loses). Declared before any data; unset, it
    is the recommended one for the declared ``test``: ``mean-or-rank`` for ``unpaired``,
    ``mean`` for ``paired`` (where the ranks of differences add nothing measured:
    docs/adaptive-seeds.md). Holm families test the mean."""
    variance: str = "own"
    """What each comparison's t divides by: ``own`` (the default), its own test's variance
    (the paired t or Welch's, on a boundary calibrated to hold whatever the arms'
    variances: Welch's at the least favourable of several ratios), or ``pooled``, the
    variance pooled over the family (Dunnett's: more degrees of freedom, more power, but
    it assumes every arm's seeds vary alike; one arm whose sd is 2 or 4 times the others'
    raises the family-wise error to 0.065-0.08 or 0.11-0.13, docs/adaptive-seeds.md)."""
    futility: bool = True
    """Stop adding seeds to a comparison whose observed difference would need more than
    ``max_seeds`` seeds (non-binding: it never raises the error rate)."""
    futility_confidence: float = 0.95
    """How optimistic the futility rule is: a comparison is futile when even the far end
    of the one-sided ``futility_confidence`` bound of its difference would need more than
    ``max_seeds`` seeds per arm (at ``power`` and its final-look level). 0.5 uses the
    observed difference itself (stops often, loses much power: see the README); higher
    stops less often. In [0.5, 1)."""

    def __post_init__(self) -> None:
        self._validate()
        if self.statistic is None:
            object.__setattr__(self, "statistic", default_statistic(self.test))

    # -- derived values ------------------------------------------------------------------
    @property
    def arms(self) -> tuple[str, ...]:
        """Every arm that enters a comparison, in first-mention order."""
        seen: dict[str, None] = {}
        for a, b in self.comparisons:
            seen.setdefault(a, None)
            seen.setdefault(b, None)
        return tuple(seen)

    @property
    def first_look_seeds(self) -> int:
        """Seeds per arm at the first look."""
        return len(self.initial_seeds)

    def planned_seeds(self) -> tuple[int, ...]:
        """Seeds per arm at each planned look, e.g. ``(3, 6, 9, 12)``."""
        return planned_information(self.first_look_seeds, self.seeds_per_look, self.max_seeds)

    # -- validation and (de)serialisation -------------------------------------------------
    def _validate(self) -> None:
        def bad(key: str, msg: str, value: Any, valid: Any = None) -> UserError:
            return UserError(msg, key=key, value=value, valid=valid)

        comps = self.comparisons
        if not isinstance(comps, tuple) or not comps:
            raise bad("comparisons", "must list at least one (arm, baseline) pair", comps)
        for pair in comps:
            if (not isinstance(pair, tuple) or len(pair) != 2
                    or not all(isinstance(a, str) and a for a in pair)):
                raise bad("comparisons", "each comparison must be a pair of arm names", pair)
            if pair[0] == pair[1]:
                raise bad("comparisons", "an arm cannot be compared with itself", list(pair))
        if len(set(comps)) != len(comps):
            raise bad("comparisons", "a comparison is listed twice", [list(p) for p in comps])
        seeds = self.initial_seeds
        if (not isinstance(seeds, tuple)
                or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
            raise bad("initial_seeds", "must be a list of integers", seeds)
        if len(seeds) < 2:
            raise bad("initial_seeds", "the first look needs at least 2 seeds per arm",
                      list(seeds))
        if len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise bad("initial_seeds", "seeds must be distinct and non-negative", list(seeds))
        for key in ("max_seeds", "seeds_per_look"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(key, "must be a positive integer", v)
        if self.max_seeds > MAX_SEEDS_LIMIT:
            raise bad("max_seeds", f"must be at most {MAX_SEEDS_LIMIT}", self.max_seeds)
        if self.max_seeds < len(seeds):
            raise bad("max_seeds", f"must be at least the {len(seeds)} initial seeds",
                      self.max_seeds)
        if len(comps) > MAX_COMPARISONS:
            raise bad("comparisons", f"at most {MAX_COMPARISONS} comparisons are supported "
                      f"(got {len(comps)})", len(comps))
        if not (_is_prob(self.alpha) and self.alpha < MAX_ALPHA):
            raise bad("alpha", f"must be a number in (0, {MAX_ALPHA:g})", self.alpha)
        if not _is_prob(self.power):
            raise bad("power", "must be a number in (0, 1)", self.power)
        fc = self.futility_confidence
        if not (_is_prob(fc) and fc >= 0.5):
            raise bad("futility_confidence", "must be a number in [0.5, 1)", fc)
        if self.spending not in SPENDING_FUNCTIONS:
            raise bad("spending", "unknown spending function", self.spending,
                      valid=list(SPENDING_FUNCTIONS))
        for key, valid in (("test", TESTS), ("family", FAMILIES)):
            if getattr(self, key) not in valid:
                raise bad(key, f"unknown {key}", getattr(self, key), valid=list(valid))
        if not isinstance(self.futility, bool):
            raise bad("futility", "must be true or false", self.futility)
        if self.variance not in VARIANCES:
            raise bad("variance", "unknown variance", self.variance, valid=list(VARIANCES))
        if self.statistic is not None and self.statistic not in STATISTICS:
            raise bad("statistic", "unknown statistic", self.statistic,
                      valid=list(STATISTICS))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (lists for tuples), every field present."""
        return {
            "comparisons": [list(p) for p in self.comparisons],
            "initial_seeds": list(self.initial_seeds),
            "max_seeds": self.max_seeds,
            "seeds_per_look": self.seeds_per_look,
            "alpha": self.alpha,
            "power": self.power,
            "spending": self.spending,
            "test": self.test,
            "family": self.family,
            "statistic": self.statistic,
            "variance": self.variance,
            "futility": self.futility,
            "futility_confidence": self.futility_confidence,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], key: str = "") -> AdaptiveDesign:
        """Build from plain values (e.g. :meth:`to_dict`'s or a config section).

        Args:
            data: field name -> value; lists stand for tuples; missing fields take
                their defaults (``comparisons`` and ``initial_seeds`` are required).
            key: key path of ``data`` in the caller's file (e.g. ``analysis.adaptive``),
                used to prefix the key named by an error.

        Raises:
            UserError: unknown or missing key (listing the valid ones), wrong type or
                invalid value, naming ``<key>.<field>``.
        """
        def path(k: str) -> str:
            return f"{key}.{k}" if key else k

        valid = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(data, Mapping):
            raise UserError("expected a mapping", key=key or None, value=data, valid=valid)
        for k in data:
            if k not in valid:
                raise UserError("unknown key", key=path(str(k)), valid=valid)
        kwargs: dict[str, Any] = dict(data)
        for k in ("comparisons", "initial_seeds"):
            if k not in kwargs:
                raise UserError("missing key", key=path(k))
        comps = kwargs["comparisons"]
        if isinstance(comps, (list, tuple)):
            kwargs["comparisons"] = tuple(
                tuple(p) if isinstance(p, (list, tuple)) else p for p in comps)
        if isinstance(kwargs["initial_seeds"], list):
            kwargs["initial_seeds"] = tuple(kwargs["initial_seeds"])
        try:
            return cls(**kwargs)
        except UserError as e:
            raise UserError(e.message, key=path(e.key or ""), value=e.value,
                            valid=e.valid) from None


def _is_prob(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and 0.0 < float(v) < 1.0)
