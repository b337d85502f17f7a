"""The design's seeds-needed figures and the report's are one formula.

``stats.sequential.seeds_needed_at`` (the design: futility and the figure quoted for
futile and unresolved comparisons) and ``stats.power`` (the report's column) both use
Colas et al.'s two-sided t-test approximation with the comparison's own test: paired
from the variance of the per-seed differences, Welch from the two arms' variances. They
differ only in the level: the report's is ``alpha / m``, the design's the comparison's
last-look nominal level (its boundary, below ``alpha / r``), so a design's figure is at
least the report's at the same data. The report shows the design's for the comparisons
the design decides.
"""

from __future__ import annotations

import numpy as np

from ccpo_lab.stats.power import paired_seeds_needed, seeds_needed
from ccpo_lab.stats.sequential import seeds_needed_at


def test_the_design_and_the_report_need_the_same_seeds_at_the_same_level() -> None:
    rng = np.random.default_rng(17)
    for _ in range(300):
        eps = float(rng.uniform(0.01, 0.3))
        sd_d, sx, sy = (float(v) for v in rng.uniform(0.02, 0.3, 3))
        level = float(rng.choice([0.05, 0.025, 0.0167, 0.0123, 0.003]))
        power = float(rng.choice([0.8, 0.9]))
        assert seeds_needed_at(eps, sd_d**2, 0.0, level, power) == \
            paired_seeds_needed(eps, sd_d, level, power, two_sided=True)
        assert seeds_needed_at(eps, sx**2, sy**2, level, power) == \
            seeds_needed(eps, sx, sy, level, power, two_sided=True)


def test_a_smaller_level_never_needs_fewer_seeds() -> None:
    for eps in (0.05, 0.1, 0.2):
        need = [paired_seeds_needed(eps, 0.1, lv, 0.8, two_sided=True)
                for lv in (0.05, 0.025, 0.01, 0.005)]
        assert all(a is not None and b is not None and a <= b
                   for a, b in zip(need, need[1:], strict=False))
