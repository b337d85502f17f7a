"""decide_look: every decision path, the seed schedule, and agreement with the simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from ccpo_lab.adaptive import AdaptiveDesign, AdaptiveState, advance, decide_look, pending_seeds
from ccpo_lab.adaptive.simulate import run_design, simulate_scores
from ccpo_lab.stats import holm
from ccpo_lab.stats.sequential import alpha_spent, calibrated_levels, t_boundary
from tests.adaptive.helpers import Scores, extend, paired, reference

COMPS = (("a", "ref"), ("b", "ref"))


def design(**kw: object) -> AdaptiveDesign:
    """A Holm design (issue 17's rule, still ``family: holm``): the tests of this file
    check Holm's levels and recycling; the joint default is in test_joint_decide.py."""
    fields: dict[str, object] = {"comparisons": COMPS, "initial_seeds": (0, 1, 2),
                                 "family": "holm", "spending": "obrien-fleming"}
    fields.update(kw)
    return AdaptiveDesign(**fields)  # type: ignore[arg-type]


def study(a_mean: float, b_mean: float, sd: float, seeds: range) -> Scores:
    """Scores of ref, a, b on ``seeds``: paired differences with exactly these statistics
    per block of three seeds (so every look sees the same mean and sd)."""
    ref = reference(seeds)
    out: Scores = {"ref": ref, "a": {}, "b": {}}
    s = list(seeds)
    for lo in range(0, len(s), 3):
        block = s[lo:lo + 3]
        out["a"].update(paired(ref, block, a_mean, sd))
        out["b"].update(paired(ref, block, b_mean, sd))
    return out


def test_first_look_continues_and_adds_the_next_labels() -> None:
    d = design()
    look = decide_look(AdaptiveState(d), study(0.05, -0.02, 0.03, range(3)))
    assert look.index == 1
    assert [x.action for x in look.decisions] == ["continue", "continue"]
    assert look.add == {"a": (3, 4, 5), "ref": (3, 4, 5), "b": (3, 4, 5)}
    assert look.seeds == {"a": (0, 1, 2), "ref": (0, 1, 2), "b": (0, 1, 2)}
    x = look.decisions[0]
    assert (x.test, x.n_pairs, x.information, x.final) == ("paired", 3, 3.0, False)
    assert x.level == 0.025  # alpha / 2: nothing rejected yet
    nominal = calibrated_levels(((3, 3),), 12, [0.025])[0, 0]
    assert x.nominal == nominal == alpha_spent([0.25], 0.025)[0]
    assert x.boundary_t == pytest.approx(t_boundary(nominal, 2))
    assert x.alpha_spent == pytest.approx(nominal)
    assert x.p_value is not None and x.p_value > nominal
    assert x.diff == pytest.approx(0.05) and x.df == 2
    assert "paired t = " in x.reason and "|t| boundary" in x.reason


def test_better_and_worse_at_a_later_look() -> None:
    d = design()
    scores = study(0.3, -0.3, 0.02, range(12))
    s = advance(AdaptiveState(d), scores)
    s = advance(s, scores)
    look = s.looks[-1]
    assert [x.action for x in look.decisions] == ["better", "worse"]
    assert look.finished and s.finished and look.add == {}
    assert all("rejected at level alpha/" in x.reason for x in look.decisions)
    with pytest.raises(ValueError, match="finished"):
        decide_look(s, scores)


def test_holm_recycles_alpha_within_and_across_looks() -> None:
    # one look of 6 seeds (max 6): the group-sequential Holm is Holm's own procedure
    d = design(initial_seeds=tuple(range(6)), max_seeds=6)
    ref = reference(range(6))
    t_a, t_b = 4.5, 2.9  # df 5: p_a ~ 0.006 <= 0.025; 0.025 < p_b ~ 0.034 <= 0.05
    scores = {"ref": ref, "a": paired(ref, list(range(6)), t_a * 0.1 / np.sqrt(6), 0.1),
              "b": paired(ref, list(range(6)), t_b * 0.1 / np.sqrt(6), 0.1)}
    look = decide_look(AdaptiveState(d), scores)
    p = [x.p_value for x in look.decisions]
    assert p[0] <= 0.025 < p[1] <= 0.05
    assert [x.action for x in look.decisions] == ["better", "better"]
    assert [x.level for x in look.decisions] == [0.025, 0.05]
    assert np.array_equal(holm(np.array(p)) <= 0.05, [True, True])
    assert all(x.final and x.nominal == x.level for x in look.decisions)

    # across looks: a is rejected at look 2, so b is tested at alpha/1 at look 3
    d = design()
    scores = study(0.3, 0.01, 0.05, range(12))
    s = advance(advance(AdaptiveState(d), scores), scores)
    assert [x.action for x in s.looks[1].decisions] == ["better", "continue"]
    assert s.looks[1].add == {"ref": (6, 7, 8), "b": (6, 7, 8)}
    s = advance(s, scores)
    (b,) = s.looks[2].decisions
    assert b.arm == "b" and b.level == 0.05
    assert b.nominal == calibrated_levels(((3, 3), (6, 6), (9, 9)), 12, [0.05])[0, 2]


def test_futile_stops_the_arm_not_the_reference() -> None:
    d = design()
    scores = study(1e-4, 0.04, 0.05, range(12))  # a: no difference; b: a moderate one
    s = advance(AdaptiveState(d), scores)
    assert [x.action for x in s.looks[0].decisions] == ["continue", "continue"]  # n = 3
    s = advance(s, scores)
    a, b = s.looks[1].decisions
    assert (a.action, b.action) == ("futile", "continue")
    assert "one-sided 0.95 bound" in a.reason and "power" in a.reason
    assert "seeds per arm" in a.reason  # how many it would need
    assert s.looks[1].add == {"ref": (6, 7, 8), "b": (6, 7, 8)}  # a gets no more seeds
    s = advance(s, scores)
    assert [x.arm for x in s.looks[2].decisions] == ["b"]  # a is never decided again
    assert s.last_decisions()[("a", "ref")].action == "futile"
    assert s.assigned_seeds()["a"] == tuple(range(6))
    # futility off: the same data continue
    s2 = advance(advance(AdaptiveState(design(futility=False)), scores), scores)
    assert [x.action for x in s2.looks[1].decisions] == ["continue", "continue"]


def test_unresolved_at_the_last_look_quotes_the_seeds_needed() -> None:
    d = design(max_seeds=6, futility=False)
    scores = study(0.01, 0.02, 0.05, range(6))
    s = advance(advance(AdaptiveState(d), scores), scores)
    look = s.looks[1]
    assert look.finished
    for x in look.decisions:
        assert x.action == "unresolved" and x.final
        assert x.seeds_needed is not None and x.seeds_needed > 6
        assert f"would need about {x.seeds_needed} seeds per arm (max 6)" in x.reason
        assert "at the last look (6 seeds per arm)" in x.reason


def test_not_ready_names_the_missing_runs() -> None:
    d = design()
    scores = study(0.1, 0.1, 0.05, range(3))
    del scores["b"][2]
    assert pending_seeds(AdaptiveState(d), scores) == {"b": (2,)}
    with pytest.raises(ValueError, match=r"look 1 is not ready: .*b: \[2\]"):
        decide_look(AdaptiveState(d), scores)


def test_failed_runs_are_left_out_and_untestable_comparisons_continue() -> None:
    d = design(initial_seeds=(0, 1, 2, 3))
    scores = study(0.1, 0.0, 0.05, range(4))
    scores["a"][3] = float("nan")  # finished without a value
    scores["b"] = {k: v + 0.01 for k, v in scores["ref"].items()}  # no spread at all
    look = decide_look(AdaptiveState(d), scores)
    a, b = look.decisions
    assert a.n_pairs == 3 and a.n_x == 3 and look.seeds["a"] == (0, 1, 2)
    assert b.action == "continue" and b.p_value is None and b.nominal is None
    assert "no test possible" in b.reason
    assert look.add["b"] == (4, 5, 6)


def test_welch_when_arms_share_too_few_seeds_and_kept_after() -> None:
    d = AdaptiveDesign(comparisons=(("a", "ref"),), initial_seeds=(0, 1, 2, 3))
    scores: Scores = {"ref": {0: np.nan, 1: np.nan, 2: 0.40, 3: 0.42},
                      "a": {0: 0.50, 1: 0.53, 2: np.nan, 3: np.nan}}
    s = advance(AdaptiveState(d), scores)
    (x,) = s.looks[0].decisions
    assert (x.test, x.n_x, x.n_y, x.n_pairs, x.information) == ("welch", 2, 2, 0, 2.0)
    scores = extend(extend(scores, "ref", {4: 0.41, 5: 0.43, 6: 0.40}), "a",
                    {4: 0.52, 5: 0.50, 6: 0.55})
    s = advance(s, scores)
    (x,) = s.looks[1].decisions
    assert x.test == "welch" and (x.n_x, x.n_y) == (5, 5)  # 3 common seeds, still Welch


def test_seed_labels_follow_the_largest_and_stop_at_the_max() -> None:
    d = AdaptiveDesign(comparisons=(("a", "ref"),), initial_seeds=(0, 5, 9), seeds_per_look=4,
                       max_seeds=12, futility=False)
    ref = reference(range(40))
    scores = {"ref": ref, "a": {k: v + 0.001 * np.sin(k) for k, v in ref.items()}}
    s = AdaptiveState(d)
    adds = []
    while not s.finished:
        s = advance(s, scores)
        adds.append(s.looks[-1].add.get("a", ()))
    assert adds == [(10, 11, 12, 13), (14, 15, 16, 17), (18,), ()]
    assigned = s.assigned_seeds()["a"]
    assert len(assigned) == 12 == len(set(assigned))
    assert [x.information for x in s.last_decisions().values()] == [12.0]


def test_decisions_are_deterministic_and_resume_from_json() -> None:
    d = design()
    scores = study(0.05, 0.2, 0.08, range(12))
    s1 = advance(AdaptiveState(d), scores)
    restored = AdaptiveState.from_json(s1.to_json())
    assert restored == s1
    assert advance(restored, scores).to_json() == advance(s1, scores).to_json()


def test_decide_look_matches_the_vectorised_simulation() -> None:
    """The simulation runs the same rule: study by study, the same claims, stops and seeds."""
    rng = np.random.default_rng(11)
    arms = ["ref", "a", "b"]
    d = AdaptiveDesign(comparisons=(("a", "ref"), ("b", "ref")), initial_seeds=(0, 1, 2))
    assert d.family == "joint"  # the default rule
    means = [(0.0, 0.0, 0.0), (0.0, 0.9, 0.0), (0.0, 1.6, -1.6), (0.0, 0.5, 0.7)]
    checked = {"better": 0, "worse": 0, "futile": 0, "unresolved": 0, "untested": 0}
    studies = [simulate_scores(mu, 12, 12, rng) for mu in means]
    # coarse success rates (2 episodes): equal differences on every seed happen, and both
    # must call them untestable (the report's zero-spread rule), not infinitely significant
    studies.append(rng.binomial(2, 0.5, (30, 3, 12)) / 2 + rng.normal(0, 0.1, (30, 1, 12)))
    # the joint family pools the spread of every comparison: only a family without any
    # spread (every arm the reference plus a constant) is untestable
    shift = np.array([0.0, 0.25, -0.125])[None, :, None]
    studies.append(np.round(rng.normal(0.5, 0.1, (5, 1, 12)), 3) + shift)
    for sc in studies:
        out = run_design(d, sc, arms)
        for i in range(sc.shape[0]):
            scores = {a: {k: float(sc[i, j, k]) for k in range(12)} for j, a in enumerate(arms)}
            s = AdaptiveState(d)
            while not s.finished:
                s = advance(s, scores)
            last = s.last_decisions()
            closed_at = {key: max(lk.index for lk in s.looks for x in lk.decisions
                                  if x.key == key) for key in d.comparisons}
            checked["untested"] += sum(x.p_value is None for lk in s.looks
                                       for x in lk.decisions)
            for j, key in enumerate(d.comparisons):
                x = last[key]
                claim = {"better": 1, "worse": -1}.get(x.action, 0)
                assert claim == out.claims[i, j]
                assert (x.action == "futile") == out.futile[i, j]
                assert closed_at[key] == out.closed_at[i, j]
                checked[x.action] += 1
            assigned = s.assigned_seeds()
            assert [len(assigned[a]) for a in arms] == out.seeds[i].tolist()
    assert all(n > 0 for n in checked.values()), checked


def test_paired_p_values_are_the_reports() -> None:
    """The p-value a decision quotes is compare_arms' paired t-test (the report's test)."""
    d = design(max_seeds=6)
    scores = study(0.02, 0.01, 0.05, range(6))
    look = decide_look(AdaptiveState(d), scores)
    x = look.decisions[0]
    t = 0.02 / (0.05 / np.sqrt(3))
    assert x.t == pytest.approx(t)
    assert x.p_value == pytest.approx(2 * special.stdtr(2, -t))
