"""``ccpo-lab import`` of a finished W&B run (issue 34): real offline runs made on the spot.

Each run is written by the real ``wandb`` (``WANDB_MODE=offline``) in a subprocess, with
verl's metric names and ``wandb.log(data, step=step)`` as verl's W&B logger calls it, and
read back by W&B's own reader; the import must equal the same rows imported from verl's
file-logger JSONL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import read_metrics

WRITER = """
import json, os, sys, wandb
rows = json.loads(sys.argv[1])
run = wandb.init(project="verl_agent_alfworld", name="gigpo-seed0", config={"x": 1})
for step, data in rows:
    wandb.log(data, step=step)
if sys.argv[2] == "finish":
    run.finish()
else:
    os._exit(3)
"""


def _rows(seed: int) -> list[tuple[int, dict[str, float]]]:
    """verl-named metrics of 6 training steps, held-out ones every other step."""
    rng = np.random.default_rng(seed)
    out = []
    for step in range(1, 7):
        data = {"critic/score/mean": float(rng.random()), "actor/pg_loss": float(rng.normal()),
                "episode/success_rate": float(rng.random())}
        if step % 2 == 0:
            data["val/success_rate"] = float(rng.integers(0, 9) / 8)
        out.append((step, data))
    return out


def offline_run(folder: Path, rows: list, finish: bool = True) -> Path:
    """An offline W&B run of ``rows`` under ``folder``; its ``offline-run-*`` directory."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(folder),
           "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    env.pop("WANDB_API_KEY", None)
    subprocess.run([sys.executable, "-c", WRITER, json.dumps(rows),
                    "finish" if finish else "kill"], env=env, check=finish, timeout=300,
                   stdin=subprocess.DEVNULL, capture_output=True)
    found = sorted((folder / "wandb").glob("offline-run-*"))
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    rows = _rows(7)
    return offline_run(tmp_path_factory.mktemp("wb"), rows), rows


def _import(sweep: Path, source: Path | str, arm: str = "gigpo-published") -> int:
    return main(["import", str(sweep), str(source), "--arm", arm, "--seed", "0"])


def test_a_wandb_run_imports_like_the_same_verl_log(verl_run: tuple[Path, list],
                                                    tmp_path: Path) -> None:
    run, rows = verl_run
    sweep = tmp_path / "results" / "published"
    assert _import(sweep, run) == 0
    log = tmp_path / "verl.jsonl"
    log.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in rows))
    assert _import(sweep, log, arm="from-jsonl") == 0
    wb = RunDir(sweep / "gigpo-published" / "seed-0")
    assert read_metrics(wb.metrics) == read_metrics(RunDir(sweep / "from-jsonl" / "seed-0")
                                                    .metrics)
    assert [r["step"] for r in read_metrics(wb.metrics)] == [s for s, _ in rows]
    record = wb.read_run()["imported"]
    assert record["format"] == "wandb" and record["source"].endswith(".wandb")
    assert record["rows"] == 6 and wb.read_state()["state"] == "completed"
    # the report reads it beside a study: the held-out mean of its window
    from ccpo_lab.report.analysis import build_report

    model = build_report(sweep, {"window_start": 4}).model
    held = [d["val/success_rate"] for s, d in rows if s >= 4 and "val/success_rate" in d]
    for arm in ("gigpo-published", "from-jsonl"):
        row = model.arm(arm)
        assert row.n_seeds == 1 and row.mean == pytest.approx(float(np.mean(held)))


def test_the_same_run_twice_changes_nothing_and_its_file_and_folder_work(
        verl_run: tuple[Path, list], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = verl_run
    sweep = tmp_path / "s"
    assert _import(sweep, run) == 0
    assert _import(sweep, next(run.glob("run-*.wandb"))) == 0  # the .wandb file itself
    assert _import(sweep, run.parent) == 0  # the wandb/ folder holding one run
    out = capsys.readouterr().out
    assert out.count("already imported from this file") == 2


def test_a_folder_that_is_no_wandb_run_exits_2(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello\n")
    sweep = tmp_path / "results" / "s"
    assert _import(sweep, tmp_path / "notes") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a W&B run directory" in err[0] and "notes" in err[0]
    assert not (tmp_path / "results").exists()


def test_a_run_without_verl_metrics_exits_2(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = offline_run(tmp_path / "wb", [(s, {"loss": 1.0 / s, "acc": 0.1 * s})
                                        for s in range(1, 4)])
    sweep = tmp_path / "results" / "s"
    assert _import(sweep, run) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no verl metrics" in err[0] and ".wandb" in err[0]
    assert not (tmp_path / "results").exists()


def test_an_unfinished_run_exits_2(tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = offline_run(tmp_path / "wb", _rows(1)[:2], finish=False)
    assert _import(tmp_path / "results" / "s", run) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not finished" in err[0]
    assert not (tmp_path / "results").exists()


def test_a_damaged_wandb_file_exits_2(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    run.mkdir(parents=True)
    (run / "run-abc.wandb").write_bytes(np.random.default_rng(0).bytes(500))
    assert _import(tmp_path / "results" / "s", run) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "W&B's reader could not read this run" in err[0]
    assert "run-abc.wandb" in err[0] and not (tmp_path / "results").exists()
