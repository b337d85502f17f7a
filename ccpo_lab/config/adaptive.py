"""The sweep's ``analysis.adaptive`` section: an adaptive seed design (issue 17).

The design is on when ``analysis.adaptive.max_seeds`` is set (in the file or as an
override, e.g. ``analysis.adaptive.max_seeds=12``); the sweep's listed ``seeds`` are its
first look, ``analysis.alpha`` and ``analysis.power`` its level and power (one source of
truth with the report). :func:`adaptive_design` turns the section into the validated
:class:`~ccpo_lab.config.design.AdaptiveDesign` when the sweep is loaded, so a bad value
is refused before anything is written, naming the file, key and value.

The section is analysis, not training: it is no part of any run's identity (run ids do
not change when a design is added, changed or removed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.config.design import AdaptiveDesign
    from ccpo_lab.config.schema import AnalysisConfig


@dataclass(frozen=True)
class AdaptiveConfig:
    """``analysis.adaptive``: add seeds in looks where they decide something (see the
    README's "Adaptive seeds"); off unless ``max_seeds`` is set."""

    max_seeds: int | None = None
    """Largest number of seeds any arm gets, the listed seeds included; setting it turns
    the design on. To match the power of a fixed design of N seeds, choose about 1.1 N
    rounded up (13 for 12): the design then reaches it with fewer seeds on average; at
    N itself it loses 2-3 points of power for the interim looks (README, measured)."""
    seeds_per_look: int = 3
    """Seeds added per look to the arms of every comparison still open."""
    comparisons: list[list[str]] = field(default_factory=list)
    """The comparisons that matter, each ``[arm, baseline]``; empty: every arm against
    ``analysis.reference`` (the first arm when unset)."""
    spending: str = "power-3"
    """Alpha-spending function: ``power-3`` (alpha t^3, the default), ``power-2``,
    ``hsd-4``, ``obrien-fleming`` (little alpha early) or ``pocock``."""
    test: str = "paired"
    """The comparisons' test, declared before any data: ``paired`` (arms share seeds, as
    ccpo-lab runs them) or ``unpaired``."""
    family: str = "joint"
    """``joint`` (max-|t| boundary over comparisons sharing the reference) or ``holm``."""
    statistic: str | None = None
    """What the joint family tests: ``mean`` (the pooled t) or ``mean-or-rank`` (the
    maximum test of that t and the ranks' t); unset: ``mean-or-rank`` for ``unpaired``,
    ``mean`` for ``paired``."""
    variance: str = "own"
    """What each comparison's t divides by: ``own`` (its own test's; calibrated to hold
    whatever the arms' variances) or ``pooled`` (over the family: more power, but it
    assumes the arms' seeds vary alike)."""
    futility: bool = True
    """Stop adding seeds to a comparison that even an optimistic reading of its
    difference could not resolve within ``max_seeds`` (non-binding)."""
    futility_confidence: float = 0.95
    """How optimistic that reading is: the one-sided bound of the difference, in
    [0.5, 1); 0.5 uses the observed difference (loses much power)."""

    @property
    def enabled(self) -> bool:
        """Whether the sweep asks for an adaptive design."""
        return self.max_seeds is not None


KEYS = {"max_seeds": "analysis.adaptive.max_seeds",
        "seeds_per_look": "analysis.adaptive.seeds_per_look",
        "comparisons": "analysis.adaptive.comparisons",
        "spending": "analysis.adaptive.spending",
        "test": "analysis.adaptive.test", "family": "analysis.adaptive.family",
        "statistic": "analysis.adaptive.statistic",
        "variance": "analysis.adaptive.variance",
        "futility": "analysis.adaptive.futility",
        "futility_confidence": "analysis.adaptive.futility_confidence",
        "initial_seeds": "seeds", "alpha": "analysis.alpha", "power": "analysis.power"}
"""Design field -> the sweep key it comes from (errors name the sweep's key)."""


def adaptive_design(analysis: AnalysisConfig, arms: Sequence[str], seeds: Sequence[int],
                    where: Callable[[str], str | None] = lambda _k: None
                    ) -> AdaptiveDesign | None:
    """The validated design of a sweep's ``analysis`` section (None when it asks for none).

    Args:
        analysis: the sweep's analysis settings.
        arms: the sweep's arms, in order (the reference defaults to the first).
        seeds: the sweep's listed seeds (the design's first look).
        where: key path -> the file (or "command line") it came from.

    Raises:
        UserError: naming the file, the sweep key (``analysis.adaptive.<field>``,
            ``seeds``, ``analysis.alpha``...) and the value: settings without
            ``max_seeds``, an arm of a comparison not in the sweep, or an invalid design.
    """
    cfg = analysis.adaptive
    if not cfg.enabled:
        off = [f.name for f in dataclasses.fields(cfg)
               if getattr(cfg, f.name) != getattr(AdaptiveConfig(), f.name)]
        if off:
            key = KEYS[off[0]]
            raise UserError("an adaptive setting without analysis.adaptive.max_seeds (which "
                            "turns the design on)", file=where(key), key=key,
                            value=getattr(cfg, off[0]))
        return None
    # Imported only for a design: it needs scipy, which a trainer environment (ccpo-lab
    # installed with --no-deps) may lack, and a sweep without a design must load there.
    from ccpo_lab.config.design import AdaptiveDesign, every_arm_versus

    comps = [tuple(c) for c in cfg.comparisons]
    for i, c in enumerate(cfg.comparisons):
        key = f"{KEYS['comparisons']}[{i}]"
        if len(c) != 2:
            raise UserError("a comparison is a pair [arm, baseline]", file=where(KEYS[
                "comparisons"]), key=key, value=c)
        for a in c:
            if a not in arms:
                raise UserError("arm of a comparison is not in the sweep",
                                file=where(KEYS["comparisons"]), key=key, value=a,
                                valid=list(arms))
    reference = analysis.reference or arms[0]
    fields = {
        "comparisons": tuple(comps) if comps else every_arm_versus(reference, arms),
        "initial_seeds": tuple(int(s) for s in seeds), "max_seeds": cfg.max_seeds,
        "seeds_per_look": cfg.seeds_per_look, "alpha": analysis.alpha,
        "power": analysis.power, "spending": cfg.spending, "test": cfg.test,
        "family": cfg.family, "statistic": cfg.statistic, "variance": cfg.variance,
        "futility": cfg.futility,
        "futility_confidence": cfg.futility_confidence,
    }
    try:
        return AdaptiveDesign(**fields)  # type: ignore[arg-type]
    except UserError as e:
        key = KEYS.get(e.key or "", e.key or "analysis.adaptive")
        raise UserError(f"adaptive design: {e.message}", file=where(key), key=key,
                        value=e.value, valid=e.valid) from None
