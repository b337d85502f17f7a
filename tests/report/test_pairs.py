"""A report whose comparison family is explicit pairs (issue 30: each arm and its
-as-run twin, paired by seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.errors import UserError
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.tables import to_markdown
from tests.report.builders import init_sweep, log_evals, sweep_file

ARMS = ("ccpo-return-hard", "ccpo-return-hard-as-run", "ccpo-global-successor",
        "ccpo-global-successor-as-run")
PAIRS = [["ccpo-return-hard-as-run", "ccpo-return-hard"],
         ["ccpo-global-successor-as-run", "ccpo-global-successor"]]


def study(tmp_path: Path) -> Path:
    path = sweep_file(tmp_path, arms=ARMS, seeds=(0, 1, 2, 3),
                      analysis={"pairs": PAIRS, "reference": "ccpo-return-hard"})
    _, sweep_dir, rds = init_sweep(path, tmp_path / "results")
    for (arm, seed), rd in rds.items():
        base = 0.3 + 0.05 * seed  # a seed effect both twins share
        shift = {"ccpo-return-hard-as-run": 0.2, "ccpo-global-successor-as-run": 0.0}
        v = base + shift.get(arm, 0.0) + (0.01 if seed % 2 else -0.01) * ("as-run" in arm)
        log_evals(rd, {0: 0.1, 20: v, 25: v, 30: v}, train_steps=range(1, 31))
    return sweep_dir


def test_each_arm_is_compared_with_its_twin_paired_by_seed(tmp_path: Path) -> None:
    report = build_report(study(tmp_path))
    rows = {c.arm: c for c in report.model.comparisons}
    assert set(rows) == {"ccpo-return-hard-as-run", "ccpo-global-successor-as-run"}
    hard = rows["ccpo-return-hard-as-run"]
    assert hard.reference == "ccpo-return-hard" and hard.paired and hard.n_pairs == 4
    assert hard.diff == pytest.approx(0.2, abs=1e-9) and hard.verdict == "better"
    glob = rows["ccpo-global-successor-as-run"]
    assert glob.reference == "ccpo-global-successor" and abs(glob.diff) < 1e-9
    text = to_markdown(report.model)
    assert "each arm against its pair (analysis.pairs)" in text
    assert "ccpo-return-hard-as-run vs ccpo-return-hard" in text
    assert "adjusted over the 2 listed pairs" in text
    # the arms table says which arms computed as run (issue 30)
    sem = {a.arm: a.semantics for a in report.model.arms}
    assert sem == {a: ("as-run" if a.endswith("-as-run") else "described") for a in ARMS}
    assert "semantics: ccpo-return-hard-as-run, ccpo-global-successor-as-run computed as " \
           "run" in text


def test_reference_option_replaces_the_pairs(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir = study(tmp_path)
    assert main(["report", str(sweep_dir), "--reference", "ccpo-return-hard",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    refs = {c["reference"] for c in doc["comparisons"]}
    assert refs == {"ccpo-return-hard"} and len(doc["comparisons"]) == 3


@pytest.mark.parametrize(("pairs", "why"), [
    ([["ccpo-return-hard", "ccpo-return-hard"]], "two different arms"),
    ([["ccpo-return-hard", "gigpo"]], "not in the sweep"),
    ([["ccpo-return-hard-as-run", "ccpo-return-hard"]] * 2, "listed twice"),
])
def test_bad_pairs_are_refused_naming_the_key(tmp_path: Path, pairs: list[list[str]],
                                              why: str) -> None:
    from ccpo_lab.config.sweep import load_sweep

    path = sweep_file(tmp_path, arms=ARMS, analysis={"pairs": pairs})
    with pytest.raises(UserError, match=why) as err:
        load_sweep(path)
    assert "analysis.pairs[" in str(err.value) and str(path) in str(err.value)


def test_each_pair_carries_its_seed_correlation(tmp_path: Path) -> None:
    """The twins share a seed effect (0.05 per seed): the report shows the correlation
    across seeds with its interval, and that pairing removes it (issue 31)."""
    report = build_report(study(tmp_path))
    hard = {c.arm: c for c in report.model.comparisons}["ccpo-return-hard-as-run"]
    assert hard.seed_correlation is not None and hard.seed_correlation > 0.9
    low, high = hard.ci_seed_correlation
    assert low is not None and high is not None and low < hard.seed_correlation < high
    assert "pairing removes it" in hard.seed_correlation_note
    assert "over 4 seeds" in hard.seed_correlation_note
