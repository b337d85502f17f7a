"""Issue 27, items 7 and 8: a full disk, a read-only disk, a symlink loop and an option out
of range are each one line naming the path or option and what to do (exit 2 where the
input is at fault, 1 where the machine is), and a report directory is complete or absent.

The faults are real where the sandbox allows mounts (a tmpfs shrunk to what it holds, a
read-only bind mount: :mod:`tests.fsfaults`); each command runs as its own process.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from tests.fsfaults import on_full_disk, on_read_only
from tests.report.builders import episodes, init_sweep, log_evals, sweep_file, write_step1

MANIFEST = ".ccpo-lab-report.json"


def _study(tmp_path: Path) -> tuple[Path, Path]:
    """A small finished study (two arms, two seeds) and its sweep file."""
    p = sweep_file(tmp_path, arms=("grpo", "gigpo"), seeds=(0, 1),
                   analysis={"reference": "grpo"})
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    for (arm, seed), rd in rds.items():
        base = 0.5 if arm == "grpo" else 0.625
        log_evals(rd, {0: 0.25, 20: base, 25: base + 0.125 * seed, 30: base})
        write_step1(rd, episodes())
        rd.write_state("completed", step=30, total_steps=30)
    return sweep_dir, p


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "internal error" not in lines[0] and "Traceback" not in err
    return lines[0]


def _tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_report_out_on_a_full_disk_writes_nothing_and_says_so(tmp_path: Path) -> None:
    """Item 7 as reported: a full disk during ``report --out`` was ``internal error:
    OSError: [Errno 28]`` with eight figures left and no report.md, which ``sync --report``
    then logged as the report. Now nothing is left and the one line says what to do."""
    sweep_dir, _ = _study(tmp_path)
    back = tmp_path / "after"
    ran = on_full_disk(sweep_dir, ["report", "@", "--out", "@/report", "--no-sync"], 200,
                       back)
    assert ran.rc == 1, ran.err
    line = _one_line(ran.err)
    why = "No space left on device" if ran.how == "tmpfs" else "File too large"
    assert ".report.partial" not in line and "writing the report" in line and why in line
    assert "--out" in line and "nothing was written there" in line and "free" in line
    assert not (back / "report").exists()
    assert not [p.name for p in back.iterdir() if p.name.startswith(".report")]


def test_a_failed_rewrite_keeps_the_report_that_was_there(tmp_path: Path) -> None:
    """A report directory already there is replaced only by a complete new one."""
    sweep_dir, _ = _study(tmp_path)
    assert main(["report", str(sweep_dir), "--out", str(sweep_dir / "report"),
                 "--no-sync"]) == 0
    before = _tree(sweep_dir / "report")
    assert MANIFEST in before and "report.md" in before and "curves.pdf" in before
    back = tmp_path / "after"
    ran = on_full_disk(sweep_dir, ["report", "@", "--out", "@/report", "--no-sync",
                                   "--window-start", "25"], 200, back)
    assert ran.rc == 1, ran.err
    assert "the report already there is kept" in _one_line(ran.err)
    assert _tree(back / "report") == before


def test_a_report_directory_is_replaced_whole_and_keeps_other_files(tmp_path: Path) -> None:
    """A rewrite replaces the report's files (a figure it no longer writes goes), keeps
    what someone else put there (a compiled report.pdf), and lists what it wrote."""
    from ccpo_lab.report.directory import check_report_dir

    sweep_dir, _ = _study(tmp_path)
    out = tmp_path / "rep"
    assert main(["report", str(sweep_dir), "--out", str(out), "--no-sync"]) == 0
    (out / "report.pdf").write_bytes(b"%PDF compiled by the user")
    old_md = (out / "report.md").read_text()
    assert main(["report", str(sweep_dir), "--out", str(out), "--no-sync",
                 "--window-start", "25"]) == 0
    assert (out / "report.pdf").read_bytes() == b"%PDF compiled by the user"
    assert (out / "report.md").read_text() != old_md
    listed = {p.name for p in check_report_dir(out)}
    assert "report.md" in listed and "report.pdf" not in listed
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".rep.")]


def test_report_out_refuses_the_sweep_directory(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A report directory is replaced whole: never the sweep directory or one above it."""
    sweep_dir, _ = _study(tmp_path)
    for out in (sweep_dir, sweep_dir.parent):
        assert main(["report", str(sweep_dir), "--out", str(out), "--no-sync"]) == 2
        assert "--out" in _one_line(capsys.readouterr().err)
    assert (sweep_dir / "sweep.json").is_file()


def test_sync_refuses_an_incomplete_report_directory(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Item 7: the directory a full disk left (figures, no report.md, no list of files),
    or a complete one whose file was cut since, is refused before anything is synced."""
    sweep_dir, _ = _study(tmp_path)
    out = tmp_path / "rep"
    assert main(["report", str(sweep_dir), "--out", str(out), "--no-sync"]) == 0
    partial = tmp_path / "partial"
    partial.mkdir()
    for name in ("curves.png", "curves.pdf", "difference.png", "difference.pdf"):
        shutil.copy(out / name, partial / name)
    assert main(["sync", str(sweep_dir), "--report", str(partial)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(partial) in line and "not a complete report directory" in line
    assert f"ccpo-lab report SWEEP_DIR --out {partial}" in line
    with (out / "report.md").open("r+b") as f:
        f.truncate(10)
    assert main(["sync", str(sweep_dir), "--report", str(out)]) == 2
    assert "report.md has 10 bytes" in _one_line(capsys.readouterr().err)
    assert not (sweep_dir / "mlflow.db").exists()


@pytest.fixture
def read_only(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The study's results directory (to be mounted read-only), the sweep and its file."""
    sweep_dir, sweep = _study(tmp_path)
    return sweep_dir.parent, sweep_dir, sweep


def test_report_out_on_a_read_only_disk(read_only: tuple[Path, Path, Path]) -> None:
    """Item 8: was ``internal error: OSError: [Errno 30]`` (exit 1)."""
    results, sweep_dir, _ = read_only
    ran = on_read_only(results, ["report", str(sweep_dir), "--out", str(sweep_dir / "rep"),
                                 "--no-sync"])
    assert ran.rc == 2
    line = _one_line(ran.err)
    assert str(sweep_dir / "rep") in line and "--out" in line
    assert "Read-only file system" in line and "writable" in line


def test_import_into_a_read_only_disk(read_only: tuple[Path, Path, Path],
                                      tmp_path: Path) -> None:
    """Item 8: was ``internal error`` naming a temporary directory."""
    results, sweep_dir, _ = read_only
    log = tmp_path / "run.jsonl"
    log.write_text('{"step": 0, "data": {"val/success_rate": 0.5}}\n')
    ran = on_read_only(results, ["import", str(sweep_dir), str(log), "--arm", "old",
                                 "--seed", "0"])
    assert ran.rc == 2
    line = _one_line(ran.err)
    assert line.startswith(f"error: {sweep_dir}:") and "Read-only file system" in line
    assert "nothing was imported" in line and ".ccpo-import" not in line


def test_a_relaunch_that_changes_nothing_writes_nothing(
        read_only: tuple[Path, Path, Path]) -> None:
    """Item 8: a relaunch of a finished sweep rewrote ``sweep.json`` (through a
    ``.sweep.json.*.tmp``) and failed on a read-only disk; it needs to write nothing."""
    results, sweep_dir, sweep = read_only
    before = _tree(results)
    assert main(["sweep", str(sweep), "--results", str(results)]) == 0  # writable: no-op too
    assert _tree(results) == before
    ran = on_read_only(results, ["sweep", str(sweep), "--results", str(results)])
    assert ran.rc == 0, ran.err
    assert "nothing to submit" in ran.out and ran.err.strip() == ""


def test_sync_on_a_read_only_disk_says_what_to_do(read_only: tuple[Path, Path, Path]) -> None:
    """Item 8: sync advised "run `ccpo-lab sync` again later", which cannot help."""
    results, sweep_dir, _ = read_only
    ran = on_read_only(results, ["sync", str(sweep_dir)])
    assert ran.rc == 2
    line = _one_line(ran.err)
    assert "again later" not in line and "Read-only file system" in line
    assert "--uri" in line and str(sweep_dir) in line


def test_a_symlink_loop_in_results_is_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Item 8: ``--results`` a link to itself was ``internal error: OSError: [Errno 40]``."""
    _, sweep = _study(tmp_path)
    loop = tmp_path / "loop"
    os.symlink("loop", loop)
    for results in (loop, loop / "deeper"):
        assert main(["sweep", str(sweep), "--results", str(results)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert "--results" in line and "symbolic link" in line and str(results) in line


@pytest.mark.parametrize("value", ["-1", "-12345678901234567890"])
def test_a_bootstrap_seed_out_of_range_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """Item 8: ``report --bootstrap-seed -1`` was ``internal error: ValueError``."""
    sweep_dir, _ = _study(tmp_path)
    assert main(["report", str(sweep_dir), "--bootstrap-seed", value]) == 2
    err = capsys.readouterr().err
    assert "--bootstrap-seed" in err and "internal error" not in err


def test_the_closing_note_lists_the_manifest_not_as_a_report_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The list of files is the directory's, not one of the report's formats."""
    sweep_dir, _ = _study(tmp_path)
    assert main(["report", str(sweep_dir), "--out", str(tmp_path / "r"), "--no-sync"]) == 0
    out = capsys.readouterr().out
    assert MANIFEST not in out.splitlines()[0]
    doc = json.loads((tmp_path / "r" / MANIFEST).read_text())
    assert doc["complete"] is True and doc["files"]["report.md"] > 0
