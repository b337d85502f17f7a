"""The report of a sweep over several environments: each environment's report, then the
cross-environment section in every format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.runs.family import write_family
from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir
from tests.report.builders import log_evals, sweep_file

SEEDS = (0, 1, 2, 3, 4, 5)
# the true difference to grpo per environment: gigpo better on both (holds), ccpo better
# on ALFWorld and worse on Sokoban (differs), ccpo-return-hard-fbjw a wash (unresolved)
EFFECTS = {"alfworld": {"grpo": 0.0, "gigpo": 0.2, "ccpo-return-hard": 0.15,
                        "ccpo-return-hard-fbjw": 0.0},
           "sokoban": {"grpo": 0.0, "gigpo": 0.2, "ccpo-return-hard": -0.15,
                       "ccpo-return-hard-fbjw": 0.01}}


def _family(tmp: Path, seeds: dict[str, tuple[int, ...]] | None = None) -> Path:
    path = sweep_file(tmp, name="envs", arms=list(EFFECTS["alfworld"]), seeds=SEEDS,
                      extra="environments: [alfworld, sokoban]\n")
    sw = load_sweep(path)
    results = tmp / "results"
    write_family(sw.family_dir(results), sw.name, sw.environments)
    rng = np.random.default_rng(32)
    for part in sw.per_environment():
        env, pairs = part.environment, []
        for run in part.runs:
            if seeds is not None and run.seed not in seeds[env]:
                continue
            rd = resolve_run_dir(part.sweep_dir(results), run)
            init_run_dir(rd, run)
            pairs.append((run, rd))
            base = 0.4 + 0.03 * run.seed + EFFECTS[env][run.arm]
            log_evals(rd, {s: float(np.clip(base + rng.normal(0, 0.01), 0, 1))
                           for s in range(0, 31, 5)})
        write_manifest(part, part.sweep_dir(results), pairs)
    return sw.family_dir(results)


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads((out / "across.json").read_text())
    assert doc["environments"] == ["alfworld", "sokoban"]
    return {r["arm"]: r for r in doc["rows"]}


def test_every_environment_then_the_section(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = _family(tmp_path)
    out = tmp_path / "report"
    assert main(["report", str(folder), "--out", str(out), "--no-sync"]) == 0
    for env in ("alfworld", "sokoban"):
        assert (out / env / "report.md").is_file() and (out / env / "report.json").is_file()
        assert (out / env / "report.md").read_text().startswith(f"# Report: envs/{env}\n")
    for name in ("across.md", "across.csv", "across.json", "across.tex", "across.png",
                 "across.pdf"):
        assert (out / name).stat().st_size > 0, name
    rows = _rows(out)
    assert rows["gigpo"]["verdict"] == "holds" and rows["gigpo"]["directions"] == "agree"
    assert rows["ccpo-return-hard"]["verdict"] == "differs"
    assert rows["ccpo-return-hard"]["directions"] == "disagree"
    assert rows["ccpo-return-hard-fbjw"]["verdict"] == "unresolved"
    it = rows["ccpo-return-hard"]["interaction"]
    assert it["test"] == "paired t" and rows["ccpo-return-hard"]["paired"]
    assert it["ci"][0] <= 0.30 <= it["ci"][1]  # true interaction 0.15 - (-0.15)
    md = (out / "across.md").read_text()
    assert "## Across environments" in md and "| gigpo vs grpo |" in md
    assert "\\begin{tabularx}" in (out / "across.tex").read_text()
    csv_lines = (out / "across.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 3 * 2


def test_printed_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _family(tmp_path)
    assert main(["report", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "# Environment alfworld" in text and "# Environment sokoban" in text
    assert text.index("# Environment sokoban") < text.index("## Across environments")
    assert main(["report", str(folder), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["environments"]) == {"alfworld", "sokoban"}
    assert len(doc["across"]["rows"]) == 3
    assert main(["report", str(folder), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("arm,reference,environment,")


def test_seeds_not_shared_use_the_independent_form(tmp_path: Path) -> None:
    folder = _family(tmp_path, seeds={"alfworld": SEEDS, "sokoban": (0, 1, 2, 3)})
    out = tmp_path / "report"
    assert main(["report", str(folder), "--out", str(out), "--no-sync"]) == 0
    row = _rows(out)["ccpo-return-hard"]
    assert not row["paired"] and row["interaction"]["test"] == "Welch t"
    assert row["verdict"] == "differs"
