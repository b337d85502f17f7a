"""A sweep over two environments end to end on the CPU backend, through the CLI: sweep
(both environments, the real engines), status, verify, report (each environment and the
cross-environment section), evaluate and a relaunch that skips what is done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main

TINY_SOKOBAN = ["environments=[alfworld,sokoban]", "launcher=inline",
                "env.sokoban.n_train_rooms=8", "env.sokoban.n_eval_rooms=4",
                "+env.sokoban.protocol.max_steps=8"]


@pytest.mark.slow
def test_two_environments_end_to_end(workdir: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    smoke, results = str(workdir / "sweeps" / "smoke.yaml"), workdir / "results"
    assert main(["sweep", smoke, *TINY_SOKOBAN, "--results", str(results), "--wait"]) == 0
    folder = results / "smoke"
    assert json.loads((folder / "environments.json").read_text())["environments"] == [
        "alfworld", "sokoban"]
    for env in ("alfworld", "sokoban"):
        states = [json.loads(p.read_text())["state"]
                  for p in (folder / env).glob("*/seed-*/state.json")]
        assert states == ["completed"] * 4, (env, states)
    run = json.loads((folder / "sokoban" / "grpo" / "seed-0" / "run.json").read_text())
    assert run["environment"] == "sokoban"
    capsys.readouterr()

    assert main(["status", str(folder), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert sorted({r["environment"] for r in records}) == ["alfworld", "sokoban"]
    assert main(["verify", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.count("step-1 identity verified for all 2 seeds") == 2

    report = workdir / "report"
    assert main(["report", str(folder), "--out", str(report), "--no-sync"]) == 0
    across = json.loads((report / "across.json").read_text())
    assert across["environments"] == ["alfworld", "sokoban"]
    assert [r["arm"] for r in across["rows"]] == ["ccpo-global-successor"]
    assert across["rows"][0]["verdict"] in ("holds", "differs", "unresolved")
    assert (report / "sokoban" / "report.md").is_file()

    assert main(["evaluate", str(folder), "--checkpoint", "final", "--split", "both",
                 "--episodes", "2", "--launcher", "inline", "--wait"]) == 0
    capsys.readouterr()
    # a relaunch skips every completed run of both environments
    assert main(["sweep", smoke, *TINY_SOKOBAN, "--results", str(results)]) == 0
    assert capsys.readouterr().out.count("4 runs (4 skipped (completed))") == 2
