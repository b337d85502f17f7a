"""The benchmarks still run: each is executed once on a tiny input and its figures parsed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_local_backend_benchmark_prints_its_ratio_and_policy_share(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_local_backend.py", "--sweep", "sweeps/smoke.yaml",
         "--arm", "grpo", "--steps", "2", "--raw-steps", "60", "--stock-steps", "30",
         "--games-cache", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=True).stdout
    raw = float(re.search(r"= (\d+) steps/s", out).group(1))
    train = float(re.search(r"= (\d+) env steps/s", out).group(1))
    ratio = float(re.search(r"training / raw env steps per second: ([0-9.]+)", out).group(1))
    share = int(re.search(r"policy share of the training step time: (\d+)%", out).group(1))
    assert raw > 0 and train > 0 and 0 < share <= 100
    assert ratio == pytest.approx(train / raw, abs=0.02)
    assert re.search(r"the speed-ups make raw play [0-9.]+x faster", out)


@pytest.mark.slow
def test_big_log_benchmark_measures_each_command(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_big_log.py", "--mb", "0.4", "--sync-mb", "0.05"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = re.findall(r"^\s+this (.+?)\s+([0-9.]+) s\s+(\d+) MB  rc (\d+)$", out, re.M)
    assert [r[0] for r in rows] == ["import 0 MB log", "status", "report --format json",
                                    "import 0 MB log", "sync of it"]
    assert all(r[3] == "0" and int(r[2]) > 0 for r in rows)
    sent = re.search(r"([0-9,]+) values, ([0-9,]+) values/s, (\d+) progress lines", out)
    assert sent is not None and int(sent.group(1).replace(",", "")) > 0


@pytest.mark.slow
def test_long_line_benchmark_measures_each_command() -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_long_lines.py", "--mb", "5", "--rows", "30"],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = re.findall(r"^\s+this (.+?)\s+([0-9.]+) s\s+(\d+) MB  rc (\d+)$", out, re.M)
    assert [r[0] for r in rows] == [
        "import (clean log)", "status", "report --format json", "sync",
        "status + 5 MB NUL tail", "report --format json + 5 MB NUL tail",
        "sync + 5 MB NUL tail", "import JSONL, one 5 MB line",
        "import console, one 5 MB line"]
    assert all(r[3] == "0" and int(r[2]) > 0 for r in rows)


def test_architecture_benchmark_reports_cycles_imports_and_times() -> None:
    import json as _json
    out = subprocess.run([sys.executable, "benchmarks/bench_architecture.py", "--json"],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         check=True).stdout
    doc = _json.loads(out)
    assert doc["modules"] > 100 and doc["function_level_imports_of_ccpo_lab"] > 0
    assert isinstance(doc["package_cycles_all_imports"], list)
    assert doc["help_s"] > 0 and doc["readme"]["lines"] > 0
