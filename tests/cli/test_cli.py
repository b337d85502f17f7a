"""CLI behaviour: start-up imports, arms commands, dry-run plan."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from tests.conftest import snapshot

HEAVY = ["torch", "ray", "mlflow", "wandb", "verl", "alfworld", "submitit", "textworld", "hydra",
         "omegaconf", "pandas", "scipy", "matplotlib"]


def test_cli_import_is_light() -> None:
    code = ("import sys, json, ccpo_lab.cli.main; "
            "print(json.dumps(sorted(m for m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(json.loads(out))
    assert not [m for m in HEAVY if m in loaded]


def test_help_does_not_import_heavy(tmp_path: Path) -> None:
    code = ("import sys, ccpo_lab.cli.main as m\n"
            "try:\n    m.main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"bad = [x for x in {HEAVY!r} if x in sys.modules]\n"
            "print('BAD', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "BAD []" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "ccpo-lab 0.1.0"


def test_arms_list_show_diff(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arms = str(repo / "arms")
    assert main(["arms", "list", "--arms-dir", arms]) == 0
    out = capsys.readouterr().out
    for name in ("grpo", "gigpo", "ccpo-global-successor", "ccpo-return-hard"):
        assert name in out
    assert main(["arms", "show", "ccpo-return-hard", "--arms-dir", arms]) == 0
    shown = capsys.readouterr()
    assert "gate: hard" in shown.out and "rho: 0.0" in shown.out
    assert "lambda is always 0" in shown.err
    assert main(["arms", "diff", "ccpo-return-hard", "ccpo-return-hard-fbjw", "--arms-dir",
                 arms]) == 0
    out = capsys.readouterr().out
    assert "estimator.backoff_task" in out and "estimator.jweight_c" in out
    assert "estimator.gate" not in out


def test_dry_run_plans_and_writes_nothing(workdir: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(workdir)
    code = main(["sweep", str(workdir / "sweeps" / "demo.yaml"), "seeds=[0,1]", "--dry-run",
                 "--results", str(workdir / "results")])
    out = capsys.readouterr().out
    assert code == 0
    assert "5 arms x 2 seeds = 10 runs" in out
    assert out.count(" new ") + out.count(" new│") >= 1
    assert "ccpo-return-hard-fbjw seed 1" in out
    assert snapshot(workdir) == before
    assert not (workdir / "results").exists()
