"""``ccpo-lab card``: a Hugging Face model card generated from the study (issue 34)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ccpo_lab.cli.main import main
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.numbers import is_rate
from ccpo_lab.report.tables import fmt, fmt_ci

ARM = "ccpo-return-hard"
NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _card(study: Path, arm: str = ARM, *extra: str) -> str:
    assert main(["card", str(study), "--arm", arm, *extra]) == 0
    return (study / f"card-{arm}" / "README.md").read_text(encoding="utf-8")


def _section(text: str, title: str) -> str:
    body = text.split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def test_front_matter_parses_with_the_required_keys(study: Path) -> None:
    text = _card(study)
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["license"] == "unknown"
    assert {"reinforcement-learning", "ccpo-lab", "ccpo"} <= set(meta["tags"])
    # the local backend's small CPU policy has no Hub base model: none is named, and why
    assert "base_model" not in meta
    assert "small CPU policy" in text and "no Hugging Face base model" in text
    huggingface_hub = pytest.importorskip("huggingface_hub")
    card = huggingface_hub.ModelCard(text)
    assert card.data.license == "unknown" and "ccpo-lab" in card.data.tags


@pytest.mark.parametrize("arm", [ARM, "gigpo"])
def test_result_numbers_are_the_report_s(study: Path, arm: str) -> None:
    model = build_report(study).model
    row, pct = model.arm(arm), is_rate(model.metric)
    section = _section(_card(study, arm), "Result")
    allowed = {fmt(row.mean, pct), str(row.n_seeds), str(row.n_evals),
               str(model.window_start), f"{100 * model.confidence:g}"}
    if row.sd is not None:
        allowed.add(fmt(row.sd, pct))
    allowed |= {x for v in row.ci_t if v is not None for x in [fmt(v, pct)]}
    for k in row.seeds:
        e = row.per_seed[k]
        allowed |= {str(k)}
        if e.best is not None:
            allowed |= {fmt(e.best, pct), str(e.best_step), str(e.n_evals),
                        fmt(e.best_bias, pct, signed=True)}
    found = NUMBER.findall(section.replace("val/success_rate", ""))
    assert found and set(found) <= allowed, set(found) - allowed
    assert f"**val/success_rate: {fmt(row.mean, pct)}%**" in section
    if row.sd is not None:
        assert f"sd {fmt(row.sd, pct)}%" in section and fmt_ci(row.ci_t, pct) in section
    best = max((e for e in row.per_seed.values() if e.best is not None),
               key=lambda e: e.best or 0.0)
    assert f"best {fmt(best.best, pct)} at step {best.best_step}" in section
    assert fmt(best.best_bias, pct, signed=True) in section


def test_best_evaluation_warning_and_the_study_s_limits(study: Path) -> None:
    text = _card(study)
    assert "Do not read the best single evaluation as the result" in _section(text, "Result")
    limits = _section(text, "What this study does and does not show")
    # the report's seeds-needed figures, its one-seed arm and its published-baselines note
    assert "gigpo vs grpo" in limits and "about 5 seeds per arm" in limits
    assert "One seed: ccpo-return-hard" in limits
    assert "published baselines left out: the local CPU backend" in limits
    assert "- grpo: `described`" in limits
    # the report's own tables, side by side
    assert "| grpo (ref.) | 62.5 | [31.4, 93.6] | 12.5 | 3 | 62.5 | 10.00 |" in text
    assert "| gigpo | +16.7 | [-1.3, 34.6] | 0.057 | 0.057 | 0.89 | 0.87 | 5 | unresolved |" \
        in text
    setup = _section(text, "Training setup")
    assert "| protocol.total_steps | 30 |" in setup and "| backend | local |" in setup


def test_an_interim_study_says_interim_with_its_step(study: Path) -> None:
    text = _card(study)
    status = _section(text, "Status")
    assert "**Interim: this arm's runs have reached step 30 (seed 0), step 15 (seed 1), " \
           "step 0 (seed 2) of 30.**" in status
    assert "ccpo-return-hard seed 1: pending, step 15 of 30" in status
    assert "# ccpo-return-hard (study, interim)" in text


def test_a_finished_study_says_final(study: Path, tmp_path: Path) -> None:
    from ccpo_lab.runs.layout import RunDir
    from tests.report.builders import log_evals

    log_evals(RunDir(study / ARM / "seed-1"), {20: 0.5, 25: 0.5, 30: 0.5})
    log_evals(RunDir(study / ARM / "seed-2"), {0: 0.25, 20: 0.5, 25: 0.75, 30: 0.5})
    for state in study.glob("*/seed-*/state.json"):
        state.write_text(json.dumps({"state": "completed", "step": 30, "total_steps": 30}),
                         encoding="utf-8")
    out = tmp_path / "card"
    assert main(["card", str(study), "--arm", "gigpo", "--out", str(out)]) == 0
    text = (out / "README.md").read_text(encoding="utf-8")
    assert "**Final.**" in _section(text, "Status") and "interim" not in text.lower()


def test_unknown_arm_exits_2_with_one_line(study: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["card", str(study), "--arm", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown arm" in err[0]
    assert "grpo, gigpo, ccpo-return-hard" in err[0]
    assert not list(study.glob("card-*"))


def test_an_arm_with_no_finished_evaluation_exits_2(study: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    for seed in range(3):
        (study / ARM / f"seed-{seed}" / "metrics.jsonl").unlink(missing_ok=True)
    assert main(["card", str(study), "--arm", ARM]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished evaluation" in err[0]
    assert not (study / f"card-{ARM}").exists()
