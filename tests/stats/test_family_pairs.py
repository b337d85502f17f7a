"""Explicit pairs as the comparison family (issue 30: each arm against its twin)."""

from __future__ import annotations

import numpy as np
import pytest

from ccpo_lab.stats import compare_pairs, compare_to_reference


def test_pairs_with_one_reference_are_compare_to_reference() -> None:
    rng = np.random.default_rng(0)
    values = {a: rng.normal(loc, 1.0, 6) for a, loc in (("r", 0.0), ("a", 0.5), ("b", 2.0))}
    seeds = {a: np.arange(6) for a in values}
    ref = compare_to_reference(values, "r", seeds)
    pairs = compare_pairs(values, [("a", "r"), ("b", "r")], seeds)
    assert [(x.arm, x.p_holm, x.seeds_needed) for x in ref] == \
        [(x.arm, x.p_holm, x.seeds_needed) for x in pairs]
    assert {x.reference for x in pairs} == {"r"}


def test_each_pair_has_its_own_reference_and_holm_spans_the_pairs() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(0.0, 1.0, 8)
    values = {"x": base, "x-as-run": base + 3.0 + rng.normal(0, 0.1, 8),
              "y": base, "y-as-run": base + rng.normal(0, 0.1, 8)}
    seeds = {a: np.arange(8) for a in values}
    rows = compare_pairs(values, [("x-as-run", "x"), ("y-as-run", "y")], seeds)
    assert [(r.arm, r.reference) for r in rows] == [("x-as-run", "x"), ("y-as-run", "y")]
    assert rows[0].comparison.test == "paired" and rows[0].comparison.diff == pytest.approx(
        3.0, abs=0.2)
    assert rows[0].p_holm < 0.01 and rows[0].power_alpha == pytest.approx(0.025)
    with pytest.raises(KeyError, match="not among"):
        compare_pairs(values, [("z", "x")], seeds)
