"""``ccpo-lab report``: formats, stdout discipline, --out, options, errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main

KEYS = {"metric": str, "window_start": int, "reference": str, "arms": list, "comparisons": list}
ARM_KEYS = {"arm": str, "n_seeds": int, "mean": float, "sd": float, "ci_t": list,
            "ci_bootstrap": list, "per_seed": dict, "per_task": dict}
SEED_KEYS = {"mean": float, "sd": float, "n_evals": int, "best": float, "interim": bool}
CMP_KEYS = {"arm": str, "reference": str, "paired": bool, "diff": float, "ci": list,
            "p": float, "p_holm": float, "prob_improvement": float, "verdict": str}


def test_json_alone_on_stdout(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(study), "--format", "json"]) == 0
    cap = capsys.readouterr()
    data = json.loads(cap.out)  # nothing else on stdout
    for key, tp in KEYS.items():
        assert isinstance(data[key], tp)
    grpo = data["arms"][0]
    for key, tp in ARM_KEYS.items():
        assert isinstance(grpo[key], tp), key
    assert "iqm" in grpo and set(grpo["per_seed"]) == {"0", "1", "2"}
    for key, tp in SEED_KEYS.items():
        assert isinstance(grpo["per_seed"]["1"][key], tp), key
    gigpo = data["comparisons"][0]
    for key, tp in CMP_KEYS.items():
        assert isinstance(gigpo[key], tp), key
    assert "seeds_needed" in gigpo and gigpo["verdict"] in ("better", "worse", "unresolved")
    assert "note: published baselines left out: the local CPU backend" in cap.err


def test_markdown_marks_interim_and_unverified(study: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(study)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| ccpo-return-hard*†"))
    assert "| 87.5 |" in row and "| 1 |" in row and "unresolved (about" in row
    assert "sd assumed" in row
    assert "* interim (not at the final step): ccpo-return-hard seed 1 at step 15 of 30; " \
           "ccpo-return-hard seed 2 has logged nothing yet (of 30 steps)" in out
    assert "† step-1 identity not verified: ccpo-return-hard vs grpo: no step-1 fingerprint " \
           "(seed 0)" in out
    assert "| grpo (reference) | 62.5 |" in out
    gigpo = next(line for line in out.splitlines() if line.startswith("| gigpo |"))
    assert "+16.7 [" in gigpo and "†" not in gigpo
    # per task type (grpo: Pick 0, Pick2 100, Turns 10) and per seed
    assert "| grpo | 0.0 ± 0.0 | 25.0 ± 0.0 | 50.0 ± 0.0 | 75.0 ± 0.0 | 100.0 ± 0.0 | " \
           "100.0 ± 0.0 | 62.5 ± 12.5 | 10.00 ± 0.00 | 62.5 [62.5, 62.5] |" in out
    assert "| 79.2 ± 7.2 | 20.00 ± 0.00 (train) |" in out
    assert "| grpo | 1 | seed-1 | 62.5 | 12.5 | 3 | 75.0 (30) | +10.6 | 9.9 | final |" in out


def test_csv_and_latex(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(study), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split("\n", 1)[0]: b.split("\n", 1)[1] for b in out.split("# ")[1:]}
    assert set(blocks) == {"main", "per_task", "per_seed"}
    main_rows = list(csv.DictReader(io.StringIO(blocks["main"])))
    assert [r["arm"] for r in main_rows] == ["grpo", "gigpo", "ccpo-return-hard"]
    assert float(main_rows[0]["mean"]) == 0.625 and main_rows[1]["verdict"] == "unresolved"
    seeds = list(csv.DictReader(io.StringIO(blocks["per_seed"].strip())))
    assert len(seeds) == 9
    assert main(["report", str(study), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert tex.count(r"\begin{tabular}") == 4 and r"ccpo-return-hard*$^\dagger$" in tex
    assert r"val/success\_rate" in tex and "±" not in tex


def test_out_writes_everything(study: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    assert main(["report", str(study), "--out", str(out), "--no-sync", "--format", "json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["reference"] == "grpo"
    names = {p.name for p in out.iterdir()}
    assert names == {"report.md", "report.tex", "report.json", "main.csv", "per_task.csv",
                     "per_seed.csv", "learning_curves.png", "per_task.png"}
    for png in ("learning_curves.png", "per_task.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "report.json").read_text()) == json.loads(cap.out)
    assert not (study / "mlflow.db").exists()


def test_options(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(study), "--format", "json", "--window-start", "30",
                 "--reference", "gigpo", "--bootstrap-reps", "200", "--confidence", "0.9",
                 "--metric", "val/success_rate"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["window_start"] == 30 and data["reference"] == "gigpo"
    assert data["bootstrap_reps"] == 200 and data["confidence"] == 0.9
    assert data["arms"][0]["n_evals"] == 3


@pytest.mark.parametrize(("args", "message"), [
    (["--reference", "ppo"], "reference arm has no runs in this sweep directory (got 'ppo')"),
    (["--format", "html"], "unknown report format (got 'html'); valid: md, csv, latex, json"),
    (["--metric", "val/x"], "metric not logged by any run of this sweep (got 'val/x')"),
])
def test_user_errors(study: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                     message: str) -> None:
    assert main(["report", str(study), *args]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and message in cap.err and len(cap.err.strip().splitlines()) == 1
