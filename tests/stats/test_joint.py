"""Joint max-|t| boundaries for comparisons sharing a reference (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest

from ccpo_lab.stats.joint import joint_df, joint_levels, pooled
from ccpo_lab.stats.sequential import nominal_table


def test_levels_grow_across_looks_and_fall_with_the_family() -> None:
    for test in ("paired", "unpaired"):
        lv = joint_levels((3, 6, 9, 12), 12, 0.05, 4, "power-3", test)  # type: ignore[arg-type]
        assert lv.shape == (4, 4)
        assert np.all(np.diff(lv, axis=0) > 0)  # later looks: larger nominal levels
        assert np.all(np.diff(lv, axis=1) < 0)  # more open comparisons: smaller levels
        # at the first look a max over r correlated comparisons needs less than
        # Bonferroni's level / r (later looks condition on not having crossed before)
        assert np.all(lv[0, 1:] * np.arange(2, 5) > lv[0, 0])


def test_a_single_look_gives_dunnett_s_level() -> None:
    """One look, one comparison pooled with itself: the plain t-test at alpha."""
    (lv,) = joint_levels((12,), 12, 0.05, 1, "power-3", "paired")
    assert lv[0] == pytest.approx(0.05, abs=0.002)


def test_joint_df_and_pooled_variance() -> None:
    assert joint_df(12, "paired", 4) == 44.0
    assert joint_df(12, "unpaired", 4) == 55.0
    v, df = pooled(np.array([[2.0, 4.0, 0.0]]), np.array([[2.0, 2.0, 0.0]]))
    assert v[0] == pytest.approx(1.5) and df[0] == 4.0
    v, _ = pooled(np.zeros((1, 2)), np.zeros((1, 2)))
    assert np.isnan(v[0])


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        joint_levels((3, 3, 6), 12, 0.05, 2)
    with pytest.raises(ValueError, match="m must be in"):
        joint_levels((3, 6), 12, 0.05, 13)
    with pytest.raises(ValueError, match="test must be"):
        joint_levels((3, 6), 12, 0.05, 2, test="welch")  # type: ignore[arg-type]


def test_spending_more_early_moves_alpha_to_the_second_look() -> None:
    """power-3 spends more than O'Brien-Fleming at the second look, less than Pocock."""
    obf, p3, poc = (joint_levels((3, 6, 9, 12), 12, 0.05, 4, sp, "unpaired")
                    for sp in ("obrien-fleming", "power-3", "pocock"))
    assert obf[1, 3] < p3[1, 3] < poc[1, 3]
    assert poc[-1, 3] < p3[-1, 3]  # Pocock pays at the end
    holm = nominal_table((3, 6, 9, 12), 12, 0.05, 4, "power-3", "welch")
    assert holm.shape == p3.shape
