"""Issue 27, items 4 and 5: a run directory is checked against its place by ``status`` as
by ``report`` (a ``seed-1`` copied in from another sweep is left out and named by both),
and a value the report treats as a proportion must be one.

The study is the hand-computed one of ``tests/report/conftest.py``: grpo's seeds have
window means .5, .625 and .75, gigpo's .75, .75 and .875 (seed 2: .875 at steps 20, 25, 30).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.status import collect_status
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.output import render
from tests.report.builders import episodes, init_sweep, log_evals, sweep_file, write_step1


def _arm(data: dict, name: str) -> dict:
    return next(a for a in data["arms"] if a["arm"] == name)


def _notes(data: dict, needle: str) -> list[str]:
    return [n["text"] for n in data["notes"] if needle in n["text"]]


def _foreign_run(tmp_path: Path, name: str, seed: int, protocol: dict | None = None) -> Path:
    """grpo seed ``seed`` of another sweep ``name``: finished, with its own numbers."""
    where = tmp_path / f"elsewhere-{name}"
    where.mkdir()
    p = sweep_file(where, name=name, arms=("grpo",), seeds=(seed,), protocol=protocol)
    _, _, rds = init_sweep(p, where / "results")
    rd = rds[("grpo", seed)]
    log_evals(rd, {0: 0.0, 20: 0.0, 25: 0.0, 30: 0.0})
    write_step1(rd, episodes())
    rd.write_state("completed", step=30, total_steps=30)
    return rd.path


@pytest.mark.parametrize(("other", "protocol", "why"), [
    ("smoke", None, "sweep smoke (here study)"),  # another sweep's seed-1
    ("study", {"val_batch_size": 48}, "is not the run the sweep's manifest lists here"),
])
def test_status_leaves_out_a_run_copied_from_another_sweep_as_report_does(
        study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], other: str,
        protocol: dict | None, why: str) -> None:
    """Item 4 as reported: another sweep's ``grpo/seed-1``, completed 20/20 there, copied
    over this sweep's: ``report`` left it out, ``status`` showed an ordinary ``completed``
    run. Same arm and seed: only the sweep's name, or the run id its manifest lists for
    the directory, tells them apart."""
    dest = study / "grpo" / "seed-1"
    shutil.rmtree(dest)
    shutil.copytree(_foreign_run(tmp_path, other, 1, protocol), dest)
    data = build_report(study).data
    (note,) = _notes(data, "grpo/seed-1")
    assert "left out" in note and why in note
    assert _arm(data, "grpo")["n_seeds"] == 2

    rows = {(r.arm, r.path.name): r for r in collect_status(study, scheduler=False)}
    row = rows[("grpo", "seed-1")]
    assert row.state == "left out" and row.seed == 1 and not row.live
    assert why in row.note and row.last_val is None and row.step == 0
    assert rows[("grpo", "seed-0")].state != "left out"
    assert main(["status", str(study)]) == 0
    out = capsys.readouterr().out
    assert "left out" in out and why in out and "1 left out" in out
    assert main(["status", str(study), "--json"]) == 0
    shown = {Path(r["path"]).name: r for r in json.loads(capsys.readouterr().out)
             if Path(r["path"]).parent.name == "grpo"}
    assert shown["seed-1"]["state"] == "left out"


def _set_values(metrics: Path, old: str, new: str) -> None:
    text = metrics.read_text()
    assert old in text
    metrics.write_text(text.replace(old, new))


@pytest.mark.parametrize(("seed", "old", "new", "why"), [
    (2, '"val/success_rate": 0.875', '"val/success_rate": 1.7',
     "val/success_rate: 1.7 is not a proportion in [0, 1]"),
    (1, '"val/success_rate": 0.25', '"val/success_rate": -0.4',
     "val/success_rate: -0.4 is not a proportion in [0, 1]"),
    (0, '"val/pick_and_place_success_rate": 0.75', '"val/pick_and_place_success_rate": 2',
     "val/pick_and_place_success_rate: 2 is not a proportion in [0, 1]"),
])
def test_a_success_rate_outside_0_1_leaves_the_run_out_named(
        study: Path, capsys: pytest.CaptureFixture[str], seed: int, old: str, new: str,
        why: str) -> None:
    """Item 5 as reported: held-out success rates of 1.7 and -0.4 gave a best of 170.0, a
    binomial se and a verdict, with no note. A rate the report treats as a proportion
    (shown in percent, with a binomial se) must be one: the run is left out and named."""
    metrics = study / "gigpo" / f"seed-{seed}" / "metrics.jsonl"
    _set_values(metrics, old, new)
    rep = build_report(study)
    data = rep.data
    (note,) = _notes(data, f"gigpo seed {seed}")
    assert why in note and str(metrics) in note and "left out" in note
    gigpo = _arm(data, "gigpo")
    assert gigpo["n_seeds"] == 2 and gigpo["per_seed"][str(seed)]["error"]
    assert all(0 <= s["best"] <= 1 for s in gigpo["per_seed"].values() if s["best"] is not None)
    assert "170.0" not in render(rep.model, "md")
    if "val/success_rate" in new:  # status shows the held-out rate: not 1.7 or -0.4
        rows = {(r.arm, r.seed): r for r in collect_status(study, scheduler=False)}
        assert why in rows[("gigpo", seed)].note
        assert rows[("gigpo", seed)].last_val is None or 0 <= rows[("gigpo", seed)].last_val <= 1


def test_an_episode_count_that_is_not_a_positive_integer_is_named(study: Path) -> None:
    """``val/n_episodes`` gives the binomial se its n: 0 or 2.5 episodes are not counts."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    row = json.loads(lines[-1])
    row["data"]["val/n_episodes"] = 2.5
    lines[-1] = json.dumps(row)
    metrics.write_text("\n".join(lines) + "\n")
    data = build_report(study).data
    (note,) = _notes(data, "gigpo seed 1")
    assert "val/n_episodes: 2.5 is not a number of episodes (a positive integer)" in note


def test_rates_of_exactly_0_and_1_are_proportions(study: Path) -> None:
    """The bounds are in range: grpo's per-task rates are 0 and 1 at every evaluation."""
    data = build_report(study).data
    grpo = _arm(data, "grpo")
    assert grpo["n_seeds"] == 3
    assert grpo["per_task"]["Pick"]["mean"] == 0.0 and grpo["per_task"]["Pick2"]["mean"] == 1.0
