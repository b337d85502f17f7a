"""The default (joint) rule live: unpaired agreement with the simulation, the decision's
record, old state files, and the sweep keys that declare the rule (issue 31)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ccpo_lab.adaptive import AdaptiveDesign, AdaptiveState, advance
from ccpo_lab.adaptive.simulate import run_design, simulate_scores
from ccpo_lab.errors import UserError

ARMS = ["ref", "a", "b", "c"]
COMPS = (("a", "ref"), ("b", "ref"), ("c", "ref"))


def _live(d: AdaptiveDesign, sc: np.ndarray, i: int) -> AdaptiveState:
    scores = {a: {k: float(sc[i, j, k]) for k in range(12)} for j, a in enumerate(ARMS)}
    s = AdaptiveState(d)
    while not s.finished:
        s = advance(s, scores)
    return s


def test_unpaired_decisions_match_the_vectorised_simulation() -> None:
    d = AdaptiveDesign(comparisons=COMPS, initial_seeds=(0, 1, 2), test="unpaired")
    rng = np.random.default_rng(3)
    seen: set[str] = set()
    for mu in ((0.0, 0.0, 0.0, 0.0), (0.0, 1.2, 2.0, -1.5), (0.0, 0.6, 0.0, 0.9)):
        sc = simulate_scores(mu, 10, 12, rng, rho=0.0)
        out = run_design(d, sc, ARMS)
        for i in range(sc.shape[0]):
            s = _live(d, sc, i)
            last = s.last_decisions()
            for j, key in enumerate(COMPS):
                x = last[key]
                assert {"better": 1, "worse": -1}.get(x.action, 0) == out.claims[i, j]
                assert (x.action == "futile") == out.futile[i, j]
                seen.add(x.action)
            assigned = s.assigned_seeds()
            assert [len(assigned[a]) for a in ARMS] == out.seeds[i].tolist()
    assert {"better", "worse", "futile", "unresolved"} <= seen, seen


def test_a_joint_rejection_says_its_family_and_its_df() -> None:
    sc = simulate_scores([0.0, 4.0, 0.0, 0.0], 1, 12, np.random.default_rng(1), rho=0.5)
    for variance, pool in (("pooled", 3), ("own", 1)):
        d = AdaptiveDesign(comparisons=COMPS, initial_seeds=(0, 1, 2), variance=variance)
        x = _live(d, sc, 0).last_decisions()[("a", "ref")]
        assert x.action == "better"
        assert "joint boundary of 3 open comparison(s)" in x.reason
        assert x.level == d.alpha
        # pooled: 3 comparisons' differences; own (the default): the comparison's own
        assert x.df == pool * (x.n_pairs - 1)
    assert AdaptiveDesign(comparisons=COMPS, initial_seeds=(0, 1, 2)).variance == "own"


def test_a_state_written_before_the_joint_rule_keeps_holm() -> None:
    d = AdaptiveDesign(comparisons=COMPS, initial_seeds=(0, 1, 2))
    doc = json.loads(AdaptiveState(d).to_json())
    for k in ("family", "test", "spending"):
        del doc["design"][k]
    old = AdaptiveState.from_json(json.dumps(doc))
    assert (old.design.family, old.design.spending, old.design.test) == \
        ("holm", "obrien-fleming", "paired")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("test", "welch", "unknown test"), ("family", "dunnett", "unknown family"),
    ("alpha", 0.5, r"\(0, 0.5\)"), ("alpha", 0.0, r"\(0, 0.5\)"),
])
def test_bad_rule_settings_name_the_sweep_key(key: str, value: object, message: str) -> None:
    base = {"comparisons": [list(c) for c in COMPS], "initial_seeds": [0, 1, 2]}
    with pytest.raises(UserError, match=message) as e:
        AdaptiveDesign.from_dict({**base, key: value}, key="analysis.adaptive")
    assert e.value.key == f"analysis.adaptive.{key}"
    assert "\n" not in str(e.value)
