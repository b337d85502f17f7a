"""The report's numbers on the hand-computed study (tests/report/conftest.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from ccpo_lab.errors import UserError
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.output import to_json
from ccpo_lab.report.tables import to_markdown
from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir
from tests.report.builders import init_sweep, log_evals, sweep_file

T975_DF2 = 4.302652729911275  # t quantile 0.975 at 2 degrees of freedom
Z975 = 1.959963984540054  # normal quantile 0.975
EMAX3 = 3 / (2 * math.sqrt(math.pi))  # expected maximum of 3 standard normal draws


def _arm(data: dict, name: str) -> dict:
    return next(a for a in data["arms"] if a["arm"] == name)


def _cmp(data: dict, name: str) -> dict:
    return next(c for c in data["comparisons"] if c["arm"] == name)


def test_per_seed_summaries(study: Path) -> None:
    data = build_report(study).data
    assert (data["metric"], data["window_start"], data["reference"]) == \
        ("val/success_rate", 20, "grpo")
    s0, s1 = _arm(data, "grpo")["per_seed"]["0"], _arm(data, "grpo")["per_seed"]["1"]
    assert (s0["mean"], s0["sd"], s0["n_evals"], s0["best"], s0["best_step"]) == \
        (0.5, 0.0, 3, 0.5, 20)
    assert s0["binomial_se"] == pytest.approx(math.sqrt(0.25 / 24))
    assert s0["best_bias"] == 0.0 and s0["best_bias_sd"] == pytest.approx(EMAX3)
    assert (s1["mean"], s1["sd"], s1["best"], s1["best_step"]) == (0.625, 0.125, 0.75, 30)
    assert s1["best_bias"] == pytest.approx(EMAX3 * 0.125)
    assert s0["interim"] is False and s0["last_step"] == 30 and s0["total_steps"] == 30
    assert s0["per_task"]["Pick"] == 0.0 and s0["per_task"]["Pick2"] == 1.0
    assert s0["per_task"]["Turns"] == 10.0 and s0["fingerprint"]


def test_arm_summaries(study: Path) -> None:
    data = build_report(study).data
    grpo, gigpo, ccpo = (_arm(data, a) for a in ("grpo", "gigpo", "ccpo-return-hard"))
    half = T975_DF2 * 0.125 / math.sqrt(3)
    assert (grpo["mean"], grpo["sd"], grpo["n_seeds"], grpo["n_evals"]) == (0.625, 0.125, 3, 9)
    assert grpo["ci_t"] == pytest.approx([0.625 - half, 0.625 + half])
    # 3 seeds: a percentile bootstrap cannot be a 95% interval (it needs 18 seeds, the IQM's
    # stratified one 8), so none is given; the IQM itself is
    assert grpo["ci_bootstrap"] == [None, None] and grpo["ci_iqm"] == [None, None]
    assert data["bootstrap_min_seeds"] == 18 and data["iqm_bootstrap_min_seeds"] == 8
    assert grpo["iqm"] == pytest.approx(0.625)
    assert gigpo["mean"] == pytest.approx(19 / 24)
    assert gigpo["sd"] == pytest.approx(np.std([0.75, 0.75, 0.875], ddof=1))
    assert gigpo["per_task"]["Cool"]["mean"] == 0.75 and gigpo["turns_from_training"]
    assert gigpo["per_task"]["Turns"]["mean"] == 20.0 and not grpo["turns_from_training"]
    # one seed: reported, with no spread and no interval; two seeds interim
    assert (ccpo["n_seeds"], ccpo["mean"], ccpo["sd"]) == (1, 0.875, None)
    assert ccpo["ci_t"] == [None, None] and ccpo["ci_bootstrap"] == [None, None]
    assert ccpo["iqm"] is None and ccpo["interim"] and ccpo["interim_seeds"] == [1, 2]
    assert ccpo["per_seed"]["1"]["last_step"] == 15 and ccpo["per_seed"]["1"]["mean"] is None
    assert ccpo["per_seed"]["2"]["last_step"] is None
    assert ccpo["within_run_sd"] == 0.125


def _colas_seeds(eps: float, s1: float, s2: float, alpha: float = 0.05) -> int:
    for n in range(2, 1001):
        nu = (s1**2 + s2**2) ** 2 * (n - 1) / (s1**4 + s2**4)
        t_eps = eps / math.sqrt((s1**2 + s2**2) / n)
        if sps.t.cdf(sps.t.ppf(1 - alpha / 2, nu) - t_eps, nu) < 0.2:
            return n
    raise AssertionError("not found")


def _paired_seeds(eps: float, sd_d: float, alpha: float) -> int:
    for n in range(2, 1001):
        t_eps = eps / (sd_d / math.sqrt(n))
        if sps.t.cdf(sps.t.ppf(1 - alpha / 2, n - 1) - t_eps, n - 1) < 0.2:
            return n
    raise AssertionError("not found")


def test_comparisons(study: Path) -> None:
    data = build_report(study).data
    g = _cmp(data, "gigpo")
    # paired differences .25 .125 .125: mean 1/6, se sd/sqrt(3), t = 4, df = 2
    se = np.std([0.25, 0.125, 0.125], ddof=1) / math.sqrt(3)
    assert g["paired"] and g["n_pairs"] == 3 and g["diff"] == pytest.approx(1 / 6)
    assert g["p"] == pytest.approx(1 - 4 / math.sqrt(18))  # two-sided t(2) tail at t = 4
    assert g["ci"] == pytest.approx([1 / 6 - T975_DF2 * se, 1 / 6 + T975_DF2 * se])
    assert g["p_holm"] == pytest.approx(g["p"])  # the other comparison is untestable
    assert g["prob_improvement"] == pytest.approx(8 / 9)
    assert g["verdict"] == "unresolved"
    # power from the same (paired) test: the sd of the differences, at alpha / 2 comparisons
    assert g["power_alpha"] == 0.025
    assert g["seeds_needed"] == _paired_seeds(1 / 6, np.std([0.25, 0.125, 0.125], ddof=1),
                                              0.025) > 3
    assert g["verdict_text"] == f"unresolved (about {g['seeds_needed']} seeds needed)"
    assert g["ci_prob_improvement"] == [None, None]  # 3 seeds: no valid bootstrap interval
    assert g["step1_verified"] and g["step1"] == "verified"
    assert g["min_detectable_diff"] > 0
    c = _cmp(data, "ccpo-return-hard")  # one seed: Welch, untestable, always unresolved
    assert not c["paired"] and c["diff"] == 0.25 and c["p"] is None and c["ci"] == [None, None]
    assert c["verdict"] == "unresolved" and c["power_sd_assumed"]
    assert c["seeds_needed"] == _colas_seeds(0.25, 0.125, 0.125, alpha=0.025)
    assert c["step1"] == "not verified" and not c["step1_verified"]
    assert "no step-1 fingerprint (seed 0" in c["step1_detail"]


def test_better_when_resolved(tmp_path: Path) -> None:
    p = sweep_file(tmp_path, seeds=(0, 1, 2, 3))
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    base = {0: 0.5, 1: 0.5625, 2: 0.625, 3: 0.5}
    for (arm, seed), rd in rds.items():
        v = base[seed] + (0.25 + 0.015625 * (seed % 2) if arm == "gigpo" else 0.0)
        log_evals(rd, {20: v, 25: v, 30: v})
    data = build_report(sweep_dir).data
    c = data["comparisons"][0]
    assert c["verdict"] == "better" and c["verdict_text"] == "better" and c["p_holm"] < 0.05
    assert c["diff"] == pytest.approx(0.2578125)


def test_welch_without_common_seeds(tmp_path: Path) -> None:
    p = sweep_file(tmp_path, arms=("grpo", "gigpo"), seeds=(0, 1, 2))
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for (arm, seed), rd in rds.items():
        if arm == "grpo":
            log_evals(rd, {20: 0.5 + 0.125 * seed})
    sw2, _, rds2 = init_sweep(p, tmp_path / "results", ["seeds=[5,6]", "arms=[gigpo]"],
                              manifest=False)
    for (_, seed), rd in rds2.items():
        log_evals(rd, {20: 0.25 * (seed - 2)})
    data = build_report(sweep_dir).data
    c = data["comparisons"][0]
    assert c["test"] == "welch" and not c["paired"] and c["n_pairs"] == 0
    assert c["diff"] == pytest.approx(0.875 - 0.625)
    assert c["step1"] == "not verified" and "no seed in common" in c["step1_detail"]
    assert _arm(data, "gigpo")["seeds"] == [0, 1, 2, 5, 6]  # seeds 0-2 listed, never hidden


def test_newest_directory_is_used(study: Path, tmp_path: Path) -> None:
    p = sweep_file(tmp_path, arms=("grpo", "gigpo", "ccpo-return-hard"),
                   protocol={"max_steps": 13})
    from ccpo_lab.config.sweep import load_sweep

    run = next(r for r in load_sweep(p).runs if (r.arm, r.seed) == ("grpo", 0))
    rd = resolve_run_dir(study, run, new_run=True)
    init_run_dir(rd, run)
    log_evals(rd, {20: 1.0, 25: 1.0, 30: 1.0})
    rep = build_report(study)
    entry = _arm(rep.data, "grpo")["per_seed"]["0"]
    assert entry["dir"] == "seed-0.2" and entry["mean"] == 1.0
    assert any("seed-0, seed-0.2" in n["text"] and "using the newest, seed-0.2" in n["text"]
               and (n["kind"], n["arm"], n["seed"]) == ("run", "grpo", 0)
               for n in rep.data["notes"])


def test_options_override_the_manifest(study: Path) -> None:
    data = build_report(study, {"window_start": 25, "reference": "gigpo",
                                "bootstrap_reps": 500, "confidence": 0.9}).data
    assert (data["window_start"], data["reference"], data["confidence"]) == (25, "gigpo", 0.9)
    assert data["settings_from"]["window_start"] == "option"
    assert _arm(data, "grpo")["per_seed"]["1"]["mean"] == pytest.approx((0.625 + 0.75) / 2)
    assert {c["arm"] for c in data["comparisons"]} == {"grpo", "ccpo-return-hard"}


def test_reproducible_and_json_clean(study: Path) -> None:
    a = to_json(build_report(study).model)
    assert a == to_json(build_report(study).model)
    assert "NaN" not in a and "Infinity" not in a


@pytest.mark.parametrize(("options", "match"), [
    ({"reference": "nope"}, "reference arm has no runs"),
    ({"metric": "val/nope"}, "metric not logged by any run"),
    ({"confidence": 1.5}, "strictly between 0 and 1"),
    ({"bootstrap_reps": 10}, "integer from 100 to 1,000,000"),
    ({"window_start": -1}, "integer >= 0"),
])
def test_bad_settings(study: Path, options: dict, match: str) -> None:
    with pytest.raises(UserError, match=match):
        build_report(study, options)


def test_metric_error_lists_logged_metrics(study: Path) -> None:
    with pytest.raises(UserError) as e:
        build_report(study, {"metric": "val/succes_rate"})
    assert "val/success_rate" in str(e.value) and "val/length/mean" in str(e.value)


def test_no_runs(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no runs found"):
        build_report(tmp_path)
    with pytest.raises(UserError, match="not found"):
        build_report(tmp_path / "missing")


def test_unreadable_run_and_empty_window_are_said(study: Path) -> None:
    metrics = study / "gigpo" / "seed-2" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text(lines[0][:25] + "\n" + "".join(lines[1:]))  # a cut held-out row
    data = build_report(study).data
    assert _arm(data, "gigpo")["n_seeds"] == 2
    assert _arm(data, "gigpo")["per_seed"]["2"]["error"]
    (note,) = [n for n in data["notes"]
               if n["text"].startswith("gigpo seed 2: unreadable metrics, left out:")]
    assert "line 1" in note["text"] and note["line"] == 1 and note["file"] == str(metrics)
    assert (note["kind"], note["arm"], note["seed"]) == ("run", "gigpo", 2)
    data = build_report(study, {"window_start": 100}).data
    assert "no run has an evaluation at step >= 100 (the latest is at step 30)" in \
        " ".join(n["text"] for n in data["notes"])


def test_rise_over_the_first_evaluation(study: Path) -> None:
    rep = build_report(study)
    data = rep.data
    grpo, ccpo = _arm(data, "grpo"), _arm(data, "ccpo-return-hard")
    assert grpo["per_seed"]["1"]["start"] == 0.25 and grpo["per_seed"]["1"]["start_step"] == 0
    # start 0.25 (24 episodes) against window means .5, .625, .75 of 3 evaluations each
    var = sum(0.25 * 0.75 / 24 + w * (1 - w) / 72 for w in (0.5, 0.625, 0.75))
    r = grpo["rise"]
    assert (r["start"], r["window"], r["rise"]) == pytest.approx((0.25, 0.625, 0.375))
    assert r["se"] == pytest.approx(math.sqrt(var) / 3)
    assert r["z"] == pytest.approx(0.375 / (math.sqrt(var) / 3))
    assert (r["n_seeds"], r["n_rose"], r["start_steps"]) == (3, 3, [0])
    # seed 1 has a start but no window yet, seed 2 nothing: one seed counts
    assert (ccpo["rise"]["n_seeds"], ccpo["rise"]["rise"]) == (1, pytest.approx(0.625))
    md = to_markdown(rep.model)
    assert f"| grpo | 25.0 (step 0) | 62.5 | +37.5 ± {100 * Z975 * math.sqrt(var) / 3:.1f} | " in md
    assert "| 3/3 |" in md


def test_the_confidence_level_sets_every_interval(study: Path) -> None:
    # no hard-coded 1.96: at 90% the rise is +- 1.64 se and the t intervals use t(0.95, 2)
    rep = build_report(study, {"confidence": 0.9})
    md = to_markdown(rep.model)
    assert "rise ± 1.64 se" in md and "1.96" not in md and "| 90% CI (t) |" in md
    grpo = _arm(rep.data, "grpo")
    half = sps.t.ppf(0.95, 2) * 0.125 / math.sqrt(3)
    assert grpo["ci_t"] == pytest.approx([0.625 - half, 0.625 + half])
    assert rep.data["bootstrap_min_seeds"] == 11
