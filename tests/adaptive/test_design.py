"""AdaptiveDesign: defaults, derived values, validation naming the key, dict round trip."""

from __future__ import annotations

import dataclasses

import pytest

from ccpo_lab.adaptive import AdaptiveDesign, every_arm_versus
from ccpo_lab.errors import UserError

COMPS = (("gigpo", "grpo"), ("ccpo", "grpo"))


def design(**kw: object) -> AdaptiveDesign:
    fields: dict[str, object] = {"comparisons": COMPS, "initial_seeds": (0, 1, 2)}
    fields.update(kw)
    return AdaptiveDesign(**fields)  # type: ignore[arg-type]


def test_defaults_and_derived_values() -> None:
    d = design()
    assert (d.max_seeds, d.seeds_per_look, d.alpha, d.power) == (12, 3, 0.05, 0.8)
    assert (d.spending, d.futility, d.futility_confidence) == ("power-3", True, 0.95)
    assert (d.test, d.family) == ("paired", "joint")
    assert d.arms == ("gigpo", "grpo", "ccpo")
    assert d.first_look_seeds == 3
    assert d.planned_seeds() == (3, 6, 9, 12)
    assert design(seeds_per_look=4).planned_seeds() == (3, 7, 11, 12)
    assert design(max_seeds=3).planned_seeds() == (3,)
    assert every_arm_versus("grpo", ["gigpo", "grpo", "ccpo"]) == COMPS
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.alpha = 0.1  # type: ignore[misc]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("comparisons", (), "at least one"),
    ("comparisons", (("a", "a"),), "itself"),
    ("comparisons", (("a", "b"), ("a", "b")), "twice"),
    ("comparisons", (("a",),), "pair"),
    ("initial_seeds", (0,), "at least 2"),
    ("initial_seeds", (0, 0, 1), "distinct"),
    ("initial_seeds", (-1, 0), "non-negative"),
    ("initial_seeds", (0, 1.5), "integers"),
    ("max_seeds", 2, "at least the 3 initial seeds"),
    ("max_seeds", 0, "positive integer"),
    ("max_seeds", 201, "at most 200"),
    ("seeds_per_look", 0, "positive integer"),
    ("seeds_per_look", True, "positive integer"),
    ("alpha", 1.0, r"\(0, 0.5\)"),
    ("alpha", 0.5, r"\(0, 0.5\)"),
    ("alpha", 0.0, r"\(0, 0.5\)"),
    ("test", "welch", "unknown test"),
    ("family", "bonferroni", "unknown family"),
    ("comparisons", tuple((f"a{i}", "ref") for i in range(13)), "at most 12 comparisons"),
    ("power", 0.0, r"\(0, 1\)"),
    ("futility_confidence", 0.4, r"\[0.5, 1\)"),
    ("spending", "haybittle", "valid: obrien-fleming, pocock"),
    ("futility", "yes", "true or false"),
])
def test_validation_names_the_key(field: str, value: object, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        design(**{field: value})
    assert e.value.key == field
    assert str(e.value).startswith(f"{field}:")


def test_from_dict_prefixes_keys_and_lists_valid_ones() -> None:
    base = {"comparisons": [["gigpo", "grpo"]], "initial_seeds": [0, 1, 2]}
    d = AdaptiveDesign.from_dict(base)
    assert d.comparisons == (("gigpo", "grpo"),) and d.initial_seeds == (0, 1, 2)
    with pytest.raises(UserError, match=r"^analysis.adaptive.max_seeds: must be at least"):
        AdaptiveDesign.from_dict({**base, "max_seeds": 1}, key="analysis.adaptive")
    with pytest.raises(UserError, match=r"analysis.adaptive.max_seed: unknown key.*max_seeds"):
        AdaptiveDesign.from_dict({**base, "max_seed": 8}, key="analysis.adaptive")
    with pytest.raises(UserError, match=r"initial_seeds: missing key"):
        AdaptiveDesign.from_dict({"comparisons": [["a", "b"]]})
    with pytest.raises(UserError, match="expected a mapping"):
        AdaptiveDesign.from_dict([1, 2], key="x")  # type: ignore[arg-type]


def test_dict_round_trip() -> None:
    d = design(max_seeds=9, seeds_per_look=2, alpha=0.1, spending="pocock", futility=False,
               futility_confidence=0.8)
    data = d.to_dict()
    assert data["comparisons"] == [["gigpo", "grpo"], ["ccpo", "grpo"]]
    assert AdaptiveDesign.from_dict(data) == d
