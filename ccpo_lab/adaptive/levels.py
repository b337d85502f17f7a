"""The family's nominal levels for a design: the joint max-|t| boundary or Holm's.

One function that both the live decision (:mod:`ccpo_lab.adaptive.decide`) and the
simulation (:mod:`ccpo_lab.adaptive.simulate`) call, so they use the same table.

* ``family: joint`` (the default) when every comparison has the same baseline: the
  max-statistic boundary of :func:`ccpo_lab.stats.joint.joint_levels` for the design's
  ``statistic`` (the mean's t, or the maximum test of it and the ranks' t), stepped down
  as comparisons are rejected (a family of ``r`` open comparisons uses the ``r`` column).
* Otherwise (``family: holm``, or comparisons against different baselines) Holm's
  group-sequential levels at ``alpha / r`` (:func:`ccpo_lab.stats.sequential.nominal_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ccpo_lab.config.design import AdaptiveDesign
from ccpo_lab.stats.joint import JointStatistic, joint_levels
from ccpo_lab.stats.sequential import nominal_table

__all__ = ["is_joint", "levels_table", "statistic"]


def statistic(design: AdaptiveDesign) -> JointStatistic:
    """The joint family's statistic (the design's, resolved for its test)."""
    return "mean-or-rank" if design.statistic == "mean-or-rank" else "mean"


def is_joint(design: AdaptiveDesign) -> bool:
    """Whether the design's family uses the joint boundary (``family: joint`` and one
    baseline shared by every comparison)."""
    return design.family == "joint" and len({b for _, b in design.comparisons}) == 1


def levels_table(
    design: AdaptiveDesign,
    looks: Sequence[int],
    paired: bool,
    method: Literal["calibrated", "normal"] = "calibrated",
    max_seeds: int | None = None,
) -> NDArray[np.float64]:
    """float (K, m): ``[k, r - 1]`` the nominal p-level of look ``k`` with ``r`` open.

    Args:
        design: the design (its ``alpha``, ``spending``, ``family``, comparisons).
        looks: seeds per arm at each look (equal in both arms); the last is final.
        paired: the paired test, else the unpaired one (joint: the two-sample t with
            ``2 n - 2`` df; Holm: Welch).
        method: ``normal`` (Holm's significance-level approach, for comparison) forces Holm.
        max_seeds: information of the final planned look (default ``design.max_seeds``).
    """
    m = len(design.comparisons)
    cap = design.max_seeds if max_seeds is None else int(max_seeds)
    if is_joint(design) and method == "calibrated":
        return joint_levels(looks, cap, design.alpha, m, design.spending,
                            "paired" if paired else "unpaired", statistic(design),
                            "own" if design.variance == "own" else "pooled")
    return nominal_table(looks, cap, design.alpha, m, design.spending,
                         "paired" if paired else "welch", method)
