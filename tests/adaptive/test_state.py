"""Look records and the state: deterministic JSON that round-trips."""

from __future__ import annotations

import json
import math

import pytest

from ccpo_lab.adaptive import STATE_VERSION, AdaptiveDesign, AdaptiveState, Decision, Look
from ccpo_lab.errors import UserError

DESIGN = AdaptiveDesign(comparisons=(("a", "ref"), ("b", "ref")), initial_seeds=(0, 1, 2))


def decision(**kw: object) -> Decision:
    fields: dict[str, object] = dict(
        arm="a", baseline="ref", action="continue", reason="why", test="paired", n_x=3,
        n_y=3, n_pairs=3, information=3.0, diff=0.1, t=1.5, df=2.0, p_value=0.27,
        level=0.025, alpha_spent=1e-6, nominal=2e-7, boundary_t=1500.0, seeds_needed=20,
        final=False)
    fields.update(kw)
    return Decision(**fields)  # type: ignore[arg-type]


def state() -> AdaptiveState:
    look1 = Look(1, {"a": (0, 1, 2), "ref": (0, 1, 2), "b": (0, 2)},
                 (decision(), decision(arm="b", diff=None, t=None, p_value=None,
                                       nominal=None, boundary_t=None, alpha_spent=None,
                                       seeds_needed=None)),
                 {"a": (3, 4, 5), "ref": (3, 4, 5), "b": (3, 4, 5)})
    look2 = Look(2, {"a": (0, 1, 2, 3, 4, 5), "ref": (0, 1, 2, 3, 4, 5), "b": (0, 2, 3, 4, 5)},
                 (decision(action="better", n_pairs=6), decision(arm="b", action="futile")),
                 {})
    return AdaptiveState(DESIGN, (look1, look2))


def test_json_round_trip_is_exact_and_deterministic() -> None:
    s = state()
    text = s.to_json()
    assert text == s.to_json()
    back = AdaptiveState.from_json(text)
    assert back == s
    assert back.to_json() == text
    doc = json.loads(text)
    assert doc["version"] == STATE_VERSION
    assert list(doc) == sorted(doc)
    assert doc["looks"][0]["decisions"][1]["diff"] is None


def test_nan_and_inf_are_written_as_null() -> None:
    d = decision(diff=float("nan"), boundary_t=float("inf"))
    assert d.to_dict()["diff"] is None and d.to_dict()["boundary_t"] is None
    s = AdaptiveState(DESIGN, (Look(1, {"a": (0,)}, (d,), {}),))
    assert "NaN" not in s.to_json() and "Infinity" not in s.to_json()


def test_state_queries() -> None:
    s = state()
    assert s.finished and not AdaptiveState(DESIGN).finished
    assert s.assigned_seeds() == {"a": (0, 1, 2, 3, 4, 5), "ref": (0, 1, 2, 3, 4, 5),
                                  "b": (0, 1, 2, 3, 4, 5)}
    last = s.last_decisions()
    assert last[("a", "ref")].action == "better" and last[("b", "ref")].action == "futile"
    assert all(d.closed for d in last.values())
    assert not decision().closed and not math.isnan(decision().level)


def test_from_json_rejects_bad_documents() -> None:
    good = json.loads(state().to_json())
    with pytest.raises(ValueError, match="not JSON"):
        AdaptiveState.from_json("{")
    with pytest.raises(ValueError, match="version 99"):
        AdaptiveState.from_json(json.dumps({**good, "version": 99}))
    bad = json.loads(state().to_json())
    bad["looks"][0]["decisions"][0]["action"] = "maybe"
    with pytest.raises(ValueError, match="unknown action 'maybe'"):
        AdaptiveState.from_json(json.dumps(bad))
    bad = json.loads(state().to_json())
    bad["looks"][1]["index"] = 3
    with pytest.raises(ValueError, match="out of order"):
        AdaptiveState.from_json(json.dumps(bad))
    bad = json.loads(state().to_json())
    del bad["looks"][0]["seeds"]
    with pytest.raises(ValueError, match="malformed look"):
        AdaptiveState.from_json(json.dumps(bad))
    bad = json.loads(state().to_json())
    bad["design"]["alpha"] = 2
    with pytest.raises(UserError, match="design.alpha"):
        AdaptiveState.from_json(json.dumps(bad))


def test_verdict_words_for_the_report() -> None:
    assert decision(action="better").verdict == "better"
    assert decision(action="futile").verdict == "unresolved"
    assert decision(action="futile", seeds_needed=20).verdict_text() == (
        "unresolved (futile: about 20 seeds needed)")
    assert decision(action="unresolved", seeds_needed=None).verdict_text() == (
        "unresolved (more than 1000 seeds needed)")
    assert decision(action="unresolved", seeds_needed=None, p_value=None).verdict_text() == (
        "unresolved (no test possible)")
    assert decision(action="worse").verdict_text() == "worse"
    assert decision().verdict_text() == "continuing (look in progress)"
