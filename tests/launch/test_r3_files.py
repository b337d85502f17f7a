"""Reliability round 3 (issue 36), items 2, 7 and 8: paths in a sweep's files that leave
it, malformed run files, and terminal escapes in what ``status`` shows. In temporary
results folders only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.status import collect_status
from ccpo_lab.runs.layout import RunDir, SweepDir
from ccpo_lab.textout import safe
from tests.conftest import snapshot


def _sweep(workdir: Path, name: str) -> tuple[Path, list[RunDir]]:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.launch.manifest import write_manifest
    from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["arms=[grpo]", f"name={name}",
                                                        "launcher=inline"])
    sweep = sw.sweep_dir(workdir / "results")
    pairs = []
    for run in sw.runs:
        rd = resolve_run_dir(sweep, run)
        init_run_dir(rd, run)
        pairs.append((run, rd))
    write_manifest(sw, sweep, pairs)
    return sweep, [rd for _, rd in pairs]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args],
                          capture_output=True, text=True, timeout=300)


# ----------------------------------------------------------------------------- item 2
@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_a_manifest_naming_another_sweeps_runs_is_refused(workdir: Path, how: str,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    a, _ = _sweep(workdir, "a")
    b, b_runs = _sweep(workdir, "b")
    doc = json.loads((a / "sweep.json").read_text())
    target = b_runs[0].path
    doc["runs"][0]["dir"] = str(target) if how == "absolute" else f"../b/{target.name}"
    if how == "dotdot":
        doc["runs"][0]["dir"] = str(Path("..") / "b" / target.relative_to(b))
    (a / "sweep.json").write_text(json.dumps(doc))
    before = snapshot(b)
    rows = collect_status(a)
    assert all(b not in r.path.parents for r in rows)
    cancel_runs(a, grace_s=1.0)
    assert snapshot(b) == before  # no state.json, no owner.lock written there
    assert not (target / "owner.lock").exists()
    err = capsys.readouterr().err
    assert "sweep.json: runs[0].dir" in err and "outside the sweep directory" in err


# ----------------------------------------------------------------------------- item 7
@pytest.mark.parametrize(("key", "value"), [
    ("step", "abc"), ("step", float("inf")), ("step", 1e400), ("total_steps", [1]),
    ("step", True), ("error", {"x": 1})])
def test_one_malformed_state_file_is_named_and_left_out(workdir: Path, key: str,
                                                        value: object) -> None:
    sweep, rds = _sweep(workdir, "m")
    st = json.loads(rds[0].state_json.read_text())
    st[key] = value
    rds[0].state_json.write_text(json.dumps(st))  # Infinity: what Python's json writes
    for args in (["status", str(sweep)], ["status", str(sweep), "--json"],
                 ["cancel", str(sweep)]):
        proc = _cli(*args)
        assert "internal error" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
        assert "state.json" in proc.stdout + proc.stderr and key in proc.stdout + proc.stderr
    st_after = json.loads(rds[0].state_json.read_text())
    assert st_after.get(key) == value or value != value  # left alone (nan aside)


def test_a_manifest_with_arms_of_the_wrong_kind_is_a_usage_error(workdir: Path) -> None:
    sweep, _ = _sweep(workdir, "k")
    doc = json.loads((sweep / "sweep.json").read_text())
    doc["arms"] = 5
    (sweep / "sweep.json").write_text(json.dumps(doc))
    for args in (["status", str(sweep)], ["cancel", str(sweep)]):
        proc = _cli(*args)
        assert proc.returncode == 2 and "sweep.json" in proc.stderr and "arms" in proc.stderr
        assert "internal error" not in proc.stderr


# ----------------------------------------------------------------------------- item 8
ESCAPES = "\x1b]52;c;ZWNobyBoaQ==\x07 \x1b]2;pwned\x07 \x1b[2J \x1b[8mhidden\x1b[0m \r"


def test_status_never_prints_a_run_files_escapes(workdir: Path) -> None:
    sweep, rds = _sweep(workdir, "e")
    st = json.loads(rds[0].state_json.read_text())
    st.update(state="failed", error=f"boom {ESCAPES}", traceback=f"Traceback\n {ESCAPES}")
    rds[0].state_json.write_text(json.dumps(st))
    proc = _cli("status", str(sweep))
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "\\x1b]52;c;ZWNobyBoaQ==\\x07" in out  # shown, escaped


def test_safe_keeps_lines_and_tabs() -> None:
    assert safe("a\nb\tc\x1b[2J\x9b") == "a\nb\tc\\x1b[2J\\x9b"


def test_sweepdir_reads_only_inside(workdir: Path) -> None:
    sweep, rds = _sweep(workdir, "s")
    assert [rd.path for rd in SweepDir(sweep).run_dirs()] == [rd.path for rd in rds]
    assert main(["status", str(sweep)]) == 0
