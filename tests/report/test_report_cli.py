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
    lines = out.splitlines()
    arm = next(line for line in lines if line.startswith("| ccpo-return-hard* |"))
    assert arm == "| ccpo-return-hard* | 87.5 | — | — | 1 | — | — |"
    cmp = next(line for line in lines if line.startswith("| ccpo-return-hard*† |"))
    assert "| +25.0 | — | — | — | 1.00 | — |" in cmp and "‡ | unresolved |" in cmp
    assert "‡ sd assumed" in out
    assert "* interim (not at the final step): ccpo-return-hard seed 1 at step 15 of 30; " \
           "ccpo-return-hard seed 2 has logged nothing yet (of 30 steps)" in out
    assert "† step-1 identity not verified: ccpo-return-hard: no step-1 fingerprint " \
           "(seed 0)" in out
    assert "| grpo (ref.) | 62.5 | [31.4, 93.6] | 12.5 | 3 | 62.5 | 10.00 |" in out
    # one comparison row: the test's interval, p, Holm p, P(X>Y), seed corr. (3 seeds: no
    # interval), seeds needed, verdict
    gigpo = next(line for line in lines if line.startswith("| gigpo | +16.7"))
    assert gigpo.startswith("| gigpo | +16.7 | [-1.3, 34.6] | 0.057 | 0.057 | 0.89 | 0.87 | "
                            "5 | unresolved |")
    assert "†" not in gigpo
    # no 95% bootstrap interval at 3 seeds; where it would come from is said
    assert "CI (bootstrap)" not in out and "covers less than 92.5% (about 75% at 3 seeds)" in out
    # per task type (grpo: Pick 0, Pick2 100) and per seed
    assert "| grpo | 0.0 ± 0.0 | 25.0 ± 0.0 | 50.0 ± 0.0 | 75.0 ± 0.0 | 100.0 ± 0.0 | " \
           "100.0 ± 0.0 | 62.5 ± 12.5 |" in out
    assert "| 20.00 (train) |" in out
    assert "| grpo | 1 | 62.5 | 12.5 | 3 | 75.0 (30) | +10.6 | 9.9 | final |" not in out
    assert "|  | 1 | 62.5 | 12.5 | 3 | 75.0 (30) | +10.6 | 9.9 | final |" in out


def test_csv_and_latex(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(study), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    blocks = {b.split("\n", 1)[0]: b.split("\n", 1)[1] for b in out.split("# ")[1:]}
    assert set(blocks) == {"arms", "comparisons", "per_task", "per_seed"}
    arms = list(csv.DictReader(io.StringIO(blocks["arms"])))
    assert [r["arm"] for r in arms] == ["grpo", "gigpo", "ccpo-return-hard"]
    assert float(arms[0]["mean"]) == 0.625 and arms[0]["reference"] == "True"
    assert float(arms[0]["rise_rise"]) == pytest.approx(0.375)
    cmps = list(csv.DictReader(io.StringIO(blocks["comparisons"])))
    assert [c["arm"] for c in cmps] == ["gigpo", "ccpo-return-hard"]
    assert cmps[0]["verdict"] == "unresolved" and cmps[0]["test"] == "paired"
    assert float(cmps[0]["p_holm"]) == pytest.approx(float(cmps[0]["p"]))
    assert cmps[0]["ci_prob_improvement_low"] == ""  # null: not a valid 95% interval
    seeds = list(csv.DictReader(io.StringIO(blocks["per_seed"].strip())))
    assert len(seeds) == 9 and seeds[0]["dir"] == "seed-0"
    assert main(["report", str(study), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert tex.count(r"\begin{tabularx}") == 5 and r"ccpo-return-hard*$^{\dagger}$" in tex
    assert r"val/success\_rate" in tex and tex.isascii()
    assert r"$p_{\mathrm{Holm}}$" in tex and r"\toprule" in tex


def test_out_writes_everything(study: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rep"
    assert main(["report", str(study), "--out", str(out), "--no-sync", "--format", "json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["reference"] == "grpo"
    names = {p.name for p in out.iterdir()}
    figures = {"curves", "difference", "aggregates", "improvement", "profile", "per_task"}
    assert names == {"report.md", "report.tex", "tables.tex", "report.json", "arms.csv",
                     "comparisons.csv", "per_task.csv", "per_seed.csv",
                     ".ccpo-lab-report.json",  # the list of files, written last
                     *(f"{f}.{ext}" for f in figures for ext in ("png", "pdf"))}
    for f in figures:
        assert (out / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{f}.pdf").read_bytes()[:5] == b"%PDF-"
        assert f"`{f}.png / {f}.pdf`:" in (out / "report.md").read_text()
        assert f"  {f}.png / {f}.pdf: " in cap.err  # the closing note, on stderr here
    assert json.loads((out / "report.json").read_text()) == json.loads(cap.out)
    assert not (study / "mlflow.db").exists()


def test_out_alone_prints_the_closing_note_not_the_report(
        study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `make demo` then cats report.md: the report is printed once
    assert main(["report", str(study), "--out", str(tmp_path / "rep"), "--no-sync"]) == 0
    cap = capsys.readouterr()
    assert "# Report:" not in cap.out and f"wrote 20 files to {tmp_path / 'rep'}" in cap.out
    assert "  curves.png / curves.pdf: held-out curves per arm" in cap.out


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


def test_out_for_one_arm_and_a_metric_that_is_not_a_rate(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    from tests.report.builders import init_sweep, log_evals, sweep_file

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, arms=("grpo",)), tmp_path / "results")
    for (_, seed), rd in rds.items():
        log_evals(rd, {0: 0.25, 20: 0.5 + 0.1 * seed, 30: 0.625},
                  turns={0: 12.0, 20: 10.0 + seed, 30: 9.5})
    out = tmp_path / "rep"
    assert main(["report", str(sweep_dir), "--out", str(out), "--no-sync",
                 "--metric", "val/length/mean"]) == 0
    md = (out / "report.md").read_text()
    assert "| grpo (ref.) | 10.25 |" in md and "(%)" not in md.split("\n## ")[1]
    assert {p.suffix for p in out.iterdir()} == {".md", ".tex", ".json", ".csv", ".png",
                                                 ".pdf"}
    capsys.readouterr()
