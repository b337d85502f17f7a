"""Records of an adaptive design's looks, and the state that round-trips through JSON.

The state is the design plus every look decided so far. It is what the sweep directory
holds between looks (stage B writes it atomically); a look, once recorded, is never
decided again (:func:`ccpo_lab.adaptive.decide.decide_look` only appends). JSON output
is deterministic: keys sorted, nan written as null, no whitespace variation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ccpo_lab.config.design import AdaptiveDesign

__all__ = ["STATE_VERSION", "Action", "AdaptiveState", "Decision", "Look"]

STATE_VERSION = 1
"""Version of the JSON layout written by :meth:`AdaptiveState.to_json`."""

Action = Literal["better", "worse", "continue", "futile", "unresolved"]
"""What a look decided for one comparison: ``better``/``worse`` (resolved: the arm against
its baseline), ``continue`` (more seeds), ``futile`` (stopped early: even the maximum would
not resolve it) or ``unresolved`` (the maximum was reached without a decision)."""

SEEDS_NEEDED_MAX = 1000
"""Largest seed count searched for a quoted seeds-needed figure (None above it)."""

CLOSED: tuple[Action, ...] = ("better", "worse", "futile", "unresolved")
"""Actions after which a comparison is never tested again."""


def _num(v: float | None) -> float | None:
    """A float for JSON: nan and inf become None."""
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class Decision:
    """One comparison at one look: the test, the boundary in force, the decision and why."""

    arm: str
    """The arm (X); the difference is ``arm - baseline``."""
    baseline: str
    """The arm it is compared with (Y)."""
    action: Action
    """The decision (see :data:`Action`)."""
    reason: str
    """One line saying why, for reports and logs (no trailing period)."""
    test: Literal["paired", "welch"]
    """Paired t-test on common seeds, or Welch (as :func:`ccpo_lab.stats.compare_arms`)."""
    n_x: int
    """Seeds of the arm with a value at this look."""
    n_y: int
    """Seeds of the baseline with a value at this look."""
    n_pairs: int
    """Seeds present in both."""
    information: float
    """The comparison's information: ``n_pairs`` (paired) or ``2 n_x n_y / (n_x + n_y)``
    (Welch); its fraction of the design is ``information / max_seeds``."""
    diff: float | None
    """Mean difference ``arm - baseline`` (None when not computable)."""
    t: float | None
    """The t statistic (None when the test is degenerate)."""
    df: float | None
    """Its degrees of freedom."""
    p_value: float | None
    """Two-sided p-value of this look's t-test (unadjusted; the boundary does the rest)."""
    level: float
    """The level in force: with ``family: holm`` the comparison's Holm share of alpha,
    ``alpha / r`` with ``r`` comparisons not yet rejected (after this look's earlier
    rejections, if it was rejected); with ``family: joint`` the family's alpha."""
    alpha_spent: float | None
    """Cumulative two-sided alpha that ``level`` has spent by this look."""
    nominal: float | None
    """The boundary as a nominal two-sided level: rejected when ``p_value <= nominal``."""
    boundary_t: float | None
    """The same boundary as ``|t|`` at this look's df."""
    seeds_needed: int | None
    """Seeds per arm to resolve the observed difference at the design's power and the
    final-look level (quoted for ``futile`` and ``unresolved``; None if unknown or above
    :data:`SEEDS_NEEDED_MAX`)."""
    final: bool
    """True when no more seeds can be added to this comparison (its last look)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (nan as None)."""
        return {
            "arm": self.arm, "baseline": self.baseline, "action": self.action,
            "reason": self.reason, "test": self.test, "n_x": self.n_x, "n_y": self.n_y,
            "n_pairs": self.n_pairs, "information": _num(self.information),
            "diff": _num(self.diff), "t": _num(self.t), "df": _num(self.df),
            "p_value": _num(self.p_value), "level": _num(self.level),
            "alpha_spent": _num(self.alpha_spent), "nominal": _num(self.nominal),
            "boundary_t": _num(self.boundary_t), "seeds_needed": self.seeds_needed,
            "final": self.final,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Decision:
        """Inverse of :meth:`to_dict`; raises ValueError on a malformed record."""
        if d.get("action") not in get_args(Action):
            raise ValueError(f"unknown action {d.get('action')!r} in {dict(d)}")
        return cls(
            arm=str(d["arm"]), baseline=str(d["baseline"]), action=d["action"],
            reason=str(d["reason"]), test=d["test"], n_x=int(d["n_x"]), n_y=int(d["n_y"]),
            n_pairs=int(d["n_pairs"]), information=float(d["information"] or 0.0),
            diff=d["diff"], t=d["t"], df=d["df"], p_value=d["p_value"],
            level=float(d["level"]), alpha_spent=d["alpha_spent"], nominal=d["nominal"],
            boundary_t=d["boundary_t"], seeds_needed=d["seeds_needed"], final=bool(d["final"]),
        )

    @property
    def key(self) -> tuple[str, str]:
        """``(arm, baseline)``: the comparison this decision is about."""
        return (self.arm, self.baseline)

    @property
    def closed(self) -> bool:
        """The comparison is never tested again after this decision."""
        return self.action in CLOSED

    @property
    def verdict(self) -> Literal["better", "worse", "unresolved"]:
        """The report's one word (:data:`ccpo_lab.stats.VerdictLabel`): better, worse, or
        unresolved for everything else (futile, unresolved, still continuing)."""
        if self.action == "better" or self.action == "worse":
            return self.action
        return "unresolved"

    def verdict_text(self) -> str:
        """``better``, ``worse``, ``unresolved (futile: about N seeds needed)``,
        ``unresolved (about N seeds needed)`` or ``continuing (look in progress)``."""
        if self.action in ("better", "worse"):
            return self.action
        if self.action == "continue":
            return "continuing (look in progress)"
        need = (f"more than {SEEDS_NEEDED_MAX} seeds needed" if self.seeds_needed is None
                else f"about {self.seeds_needed} seeds needed")
        if self.seeds_needed is None and self.p_value is None:
            need = "no test possible"
        prefix = "futile: " if self.action == "futile" else ""
        return f"unresolved ({prefix}{need})"


@dataclass(frozen=True)
class Look:
    """One look: the seeds it used, its decisions, and the seeds to launch next."""

    index: int
    """1-based look number."""
    seeds: dict[str, tuple[int, ...]]
    """Per arm (design order), the seeds with a value that this look used, ascending."""
    decisions: tuple[Decision, ...]
    """One per comparison open at this look, in design order (closed ones are not
    repeated: their last decision stands)."""
    add: dict[str, tuple[int, ...]]
    """Seeds to launch per arm before the next look (arms of continuing comparisons and
    their baselines); empty when the design is finished."""

    @property
    def finished(self) -> bool:
        """No comparison continues: this was the last look."""
        return not self.add

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {
            "index": self.index,
            "seeds": {a: list(s) for a, s in self.seeds.items()},
            "decisions": [d.to_dict() for d in self.decisions],
            "add": {a: list(s) for a, s in self.add.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Look:
        """Inverse of :meth:`to_dict`."""
        return cls(
            index=int(d["index"]),
            seeds={str(a): tuple(int(x) for x in s) for a, s in d["seeds"].items()},
            decisions=tuple(Decision.from_dict(x) for x in d["decisions"]),
            add={str(a): tuple(int(x) for x in s) for a, s in d["add"].items()},
        )


@dataclass(frozen=True)
class AdaptiveState:
    """The design and every look decided so far (immutable; a new look makes a new state)."""

    design: AdaptiveDesign
    """The design in force (never changes during a study)."""
    looks: tuple[Look, ...] = field(default=())
    """Looks decided so far, in order."""

    @property
    def finished(self) -> bool:
        """The last look added no seeds: every comparison is closed."""
        return bool(self.looks) and self.looks[-1].finished

    def assigned_seeds(self) -> dict[str, tuple[int, ...]]:
        """Per arm (design order): the initial seeds plus every seed a look added."""
        out = {a: list(self.design.initial_seeds) for a in self.design.arms}
        for look in self.looks:
            for a, s in look.add.items():
                out[a].extend(s)
        return {a: tuple(s) for a, s in out.items()}

    def last_decisions(self) -> dict[tuple[str, str], Decision]:
        """Per comparison ever decided: its latest decision (the verdict once closed)."""
        out: dict[tuple[str, str], Decision] = {}
        for look in self.looks:
            for d in look.decisions:
                out[d.key] = d
        return out

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, 1-space indent, trailing newline)."""
        doc = {
            "version": STATE_VERSION,
            "design": self.design.to_dict(),
            "looks": [look.to_dict() for look in self.looks],
        }
        return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> AdaptiveState:
        """Inverse of :meth:`to_json`.

        Raises:
            ValueError: not JSON, another layout version, or malformed records.
            UserError: an invalid design (naming ``design.<field>``).
        """
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"adaptive state is not JSON: {e}") from None
        if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION:
            got = doc.get("version") if isinstance(doc, dict) else None
            raise ValueError(f"adaptive state version {got!r}; this ccpo-lab reads "
                             f"{STATE_VERSION}")
        design = AdaptiveDesign.from_dict(_legacy_design(doc["design"]), key="design")
        try:
            looks = tuple(Look.from_dict(x) for x in doc["looks"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed look in adaptive state: {e!r}") from None
        for i, look in enumerate(looks, start=1):
            if look.index != i:
                raise ValueError(f"adaptive state looks out of order: {look.index} at {i}")
        return cls(design, looks)


def _legacy_design(d: Any) -> Any:
    """A design stored before the rule had ``family``/``test`` ran Holm with the
    O'Brien-Fleming default and the data's test; one stored before it had ``statistic``
    tested the mean, before ``variance`` the pooled one: read it as it ran (issue 31)."""
    if not isinstance(d, Mapping):
        return d
    if "family" not in d:
        d = {"spending": "obrien-fleming", "test": "paired", **d, "family": "holm"}
    if "statistic" not in d:
        d = {**d, "statistic": "mean"}
    if "variance" not in d:
        d = {**d, "variance": "pooled"}
    return d
