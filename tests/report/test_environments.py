"""The report of a folder of environments built by hand (any environment names, any
number of them): each environment's own tables, the cross-environment section with an
interaction that is and is not resolved, directions that agree and disagree, an arm
absent from one environment, every format and the figure."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.runs.family import FAMILY, environment_dirs
from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir
from tests.report.builders import log_evals, sweep_file

SEEDS = (0, 1, 2, 3, 4, 5)


def _folder(tmp: Path, effects: Mapping[str, Mapping[str, float]],
            seeds: Mapping[str, tuple[int, ...]]) -> Path:
    """``effects[env][arm]``: the arm's true difference to grpo on ``env``; each
    environment an ordinary sweep directory of the folder."""
    folder = tmp / "results" / "study"
    rng = np.random.default_rng(32)
    for env, arms in effects.items():
        (tmp / env).mkdir()
        sw = load_sweep(sweep_file(tmp / env, name="study", arms=list(arms),
                                   seeds=seeds[env]))
        pairs = []
        for run in sw.runs:
            rd = resolve_run_dir(folder / env, run)
            init_run_dir(rd, run)
            pairs.append((run, rd))
            base = 0.4 + 0.03 * run.seed + arms[run.arm]
            log_evals(rd, {s: float(np.clip(base + rng.normal(0, 0.01), 0, 1))
                           for s in range(0, 31, 5)})
        write_manifest(sw, folder / env, pairs)
    atomic_write_json(folder / FAMILY, {"sweep": "study", "environments": list(effects)})
    return folder


def _report(folder: Path, out: Path) -> dict[str, dict[str, Any]]:
    assert main(["report", str(folder), "--out", str(out), "--no-sync"]) == 0
    for name in ("across.md", "across.csv", "across.json", "across.tex", "across.png",
                 "across.pdf"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "across.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "across.json").read_text())
    return {r["arm"]: r for r in doc["rows"]}


def _compiles(out: Path, one_column: bool) -> None:
    """across.tex in an article (one or two columns) compiles without an overfull box
    (when pdflatex is installed)."""
    if shutil.which("pdflatex") is None:
        return
    cls = r"\documentclass{article}" if one_column else r"\documentclass[twocolumn]{article}"
    (out / "doc.tex").write_text("\n".join([cls, r"\usepackage{booktabs,tabularx}",
                                            r"\begin{document}", r"\input{across.tex}",
                                            "text", r"\end{document}"]))
    subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
                   cwd=out, capture_output=True, timeout=120, check=True)
    log = (out / "doc.log").read_text(errors="replace")
    assert "Overfull" not in log, log


def _arm_means(out: Path, env: str) -> dict[str, float]:
    doc = json.loads((out / env / "report.json").read_text())
    return {a["arm"]: a["mean"] for a in doc["arms"]}


def test_three_environments_paired(tmp_path: Path) -> None:
    effects = {e: {"grpo": 0.0, "gigpo": 0.2, "ccpo-return-hard": s * 0.15}
               for e, s in (("north", 1), ("south", -1), ("east", 1))}
    folder = _folder(tmp_path, effects, dict.fromkeys(effects, SEEDS))
    assert [e for e, _ in environment_dirs(folder)] == ["north", "south", "east"]
    out = tmp_path / "out"
    rows = _report(folder, out)
    for env, arms in effects.items():  # each environment's own tables, from its runs only
        means = _arm_means(out, env)
        assert set(means) == set(arms)
        for arm, eff in arms.items():
            assert abs(means[arm] - (0.475 + eff)) < 0.02, (env, arm)
        assert (out / env / "report.md").is_file() and (out / env / "tables.tex").is_file()
    gigpo, ccpo = rows["gigpo"], rows["ccpo-return-hard"]
    assert gigpo["verdict"] == "holds" and gigpo["directions"] == "agree"
    assert gigpo["interaction"]["test"] == "Hotelling T2" and gigpo["p_holm"] > 0.05
    assert ccpo["verdict"] == "differs" and ccpo["directions"] == "disagree"
    assert ccpo["interaction"]["test"] == "Hotelling T2" and ccpo["p_holm"] < 0.001
    assert ccpo["interaction"]["ci"] is None and len(ccpo["interaction"]["df"]) == 2
    md = (out / "across.md").read_text()
    assert "| comparison | north | south | east | directions | interaction | across |" in md
    tex = (out / "across.tex").read_text()
    assert "north & south & east" in tex and tex.count(r"\\") == 3
    _compiles(out, one_column=True)
    _compiles(out, one_column=False)
    table = list(csv.DictReader(io.StringIO((out / "across.csv").read_text())))
    assert len(table) == 2 * 3
    assert {r["environment"] for r in table} == {"north", "south", "east"}
    assert {r["across"] for r in table if r["arm"] == "ccpo-return-hard"} == {"differs"}


def test_two_environments_independent_and_absent(tmp_path: Path) -> None:
    effects = {"alfworld": {"grpo": 0.0, "gigpo": 0.25, "ccpo-return-hard": 0.1},
               "sokoban": {"grpo": 0.0, "gigpo": 0.05}}
    folder = _folder(tmp_path, effects, {"alfworld": SEEDS, "sokoban": (0, 1, 2, 3)})
    out = tmp_path / "out"
    rows = _report(folder, out)
    gigpo = rows["gigpo"]
    # better on both, by a different amount: the directions agree, the interaction is
    # resolved (independent seeds: Welch's t on the difference of differences, ~0.20)
    assert [c["verdict"] for c in gigpo["cells"]] == ["better", "better"]
    assert gigpo["directions"] == "agree" and gigpo["verdict"] == "differs"
    it = gigpo["interaction"]
    assert it["test"] == "Welch t" and not gigpo["paired"]
    assert it["ci"][0] <= 0.20 <= it["ci"][1] and it["ci"][0] > 0
    ccpo = rows["ccpo-return-hard"]  # not run on sokoban
    assert [c["verdict"] for c in ccpo["cells"]] == ["better", "absent"]
    assert ccpo["interaction"] is None and ccpo["verdict"] == "unresolved"
    assert ccpo["directions"] == "-"
    md = (out / "across.md").read_text()
    assert "absent" in md and "not testable" in md
    assert set(_arm_means(out, "sokoban")) == {"grpo", "gigpo"}


def test_interaction_unresolved_with_few_seeds(tmp_path: Path) -> None:
    """A small interaction with two shared seeds: not shown, so unresolved, and its
    interval still covers the true difference of differences."""
    effects = {"alfworld": {"grpo": 0.0, "gigpo": 0.03},
               "sokoban": {"grpo": 0.0, "gigpo": 0.0}}
    folder = _folder(tmp_path, effects, dict.fromkeys(effects, (0, 1)))
    out = tmp_path / "out"
    row = _report(folder, out)["gigpo"]
    assert row["paired"] and row["interaction"]["test"] == "paired t"
    assert row["p_holm"] > 0.05 and row["verdict"] == "unresolved"
    lo, hi = row["interaction"]["ci"]
    assert lo <= 0.03 <= hi
