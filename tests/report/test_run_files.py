"""The run-file gateway (issue 27, items 6 and 10): what ``report``, ``status``, ``verify``
and ``import`` read of a run stays inside the sweep directory, is a regular file, and is
read a chunk at a time; a file they do not read, and a line too long to hold, is named.

The study is the hand-computed one of ``tests/report/conftest.py`` (gigpo's seeds have
window means .75, .75 and .875).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.status import collect_status
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.output import render

MAX_LINE = 4 << 20
"""The line bound of ``ccpo_lab.runs.files`` (imported inside the tests that need the
module, so that the others run, and fail, on the code before it)."""

SECRET = "root:$y$j9T$SECRET-HASH-not-to-be-quoted:20228:0:99999:7:::"


def _secret(tmp_path: Path) -> Path:
    """A file outside the sweep whose first line must never be quoted (like /etc/shadow)."""
    p = tmp_path / "outside" / "shadow"
    p.parent.mkdir()
    p.write_text(SECRET + "\ndaemon:*:20228:0:99999:7:::\n")
    return p


def _arm(data: dict, name: str) -> dict:
    return next(a for a in data["arms"] if a["arm"] == name)


def _run_notes(data: dict, needle: str) -> list[str]:
    return [n["text"] for n in data["notes"] if needle in n["text"]]


def test_a_metrics_file_linked_out_of_the_sweep_is_named_not_read(
        study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 6 as reported: ``metrics.jsonl -> /etc/shadow``. The report left the run out
    but quoted the file's first line in its note (report.md, the MLflow description), and
    ``status`` quoted it too. The gateway does not open it: the note names the link."""
    secret = _secret(tmp_path)
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    metrics.unlink()
    metrics.symlink_to(secret)
    rep = build_report(study)
    data = rep.data
    (note,) = _run_notes(data, "gigpo seed 1")
    assert f"is a link to {secret}, outside the sweep directory" in note and "not read" in note
    gigpo = _arm(data, "gigpo")
    assert gigpo["n_seeds"] == 2 and gigpo["per_seed"]["1"]["error"]
    for fmt in ("md", "json", "csv", "latex"):
        assert "SECRET" not in render(rep.model, fmt)
    rows = {(r.arm, r.seed): r for r in collect_status(study, scheduler=False)}
    assert "is a link to" in rows[("gigpo", 1)].note and "SECRET" not in rows[("gigpo", 1)].note
    assert main(["status", str(study)]) == 0
    assert main(["report", str(study), "--format", "md"]) == 0
    cap = capsys.readouterr()
    assert "SECRET" not in cap.out + cap.err and "is a link to" in cap.out


def test_run_files_linked_out_are_named_a_link_inside_is_followed(
        study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``run.json``, ``state.json`` and ``config.yaml`` go through the same gateway; a
    link that stays inside the sweep directory (a run directory's file kept elsewhere in
    it) is read as the file it leads to."""
    secret = _secret(tmp_path)
    for arm, seed, name in (("grpo", 1, "run.json"), ("grpo", 2, "state.json"),
                            ("gigpo", 0, "config.yaml")):
        p = study / arm / f"seed-{seed}" / name
        p.unlink()
        p.symlink_to(secret)
    kept = study / "_kept" / "gigpo-2.jsonl"  # inside the sweep: followed
    kept.parent.mkdir()
    (study / "gigpo" / "seed-2" / "metrics.jsonl").rename(kept)
    (study / "gigpo" / "seed-2" / "metrics.jsonl").symlink_to(Path("../../_kept/gigpo-2.jsonl"))
    data = build_report(study).data
    text = "\n".join(n["text"] for n in data["notes"])
    assert "SECRET" not in text
    assert "grpo/seed-1: left out: run.json is a link to" in text
    assert "grpo seed 2: state.json is a link to" in text
    assert "gigpo seed 0: config.yaml is a link to" in text
    assert _arm(data, "grpo")["n_seeds"] == 2  # seed 1 cannot be identified
    assert _arm(data, "gigpo")["per_seed"]["2"]["mean"] == pytest.approx(0.875)
    rows = {(r.arm, r.path.name): r for r in collect_status(study, scheduler=False)}
    assert rows[("grpo", "seed-1")].state == "left out"
    assert "run.json is a link to" in rows[("grpo", "seed-1")].note
    assert main(["verify", str(study)]) == 1
    cap = capsys.readouterr()
    assert "SECRET" not in cap.out + cap.err and "grpo/seed-1" in cap.out


def test_verify_reads_no_rollouts_outside_the_sweep(study: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``verify`` shows the first diverging observation and action of two rollout files:
    one linked to another sweep's (or any file) outside is named, not read or shown."""
    other = tmp_path / "other" / "step-000001.jsonl"
    other.parent.mkdir()
    other.write_text(json.dumps({"task_id": "t00", "rollout": 0, "turns": [
        {"obs": SECRET, "action": "look"}]}) + "\n")
    rollouts = study / "gigpo" / "seed-0" / "rollouts" / "step-000001.jsonl"
    rollouts.unlink()
    rollouts.symlink_to(other)
    run = json.loads((study / "gigpo" / "seed-0" / "run.json").read_text())
    run["step1"]["fingerprint"] = "0" * 64  # differs from grpo's: verify locates it
    (study / "gigpo" / "seed-0" / "run.json").write_text(json.dumps(run))
    assert main(["verify", str(study)]) == 1
    cap = capsys.readouterr()
    assert "SECRET" not in cap.out + cap.err
    assert "step-1 rollouts cannot be read" in cap.out and "is a link to" in cap.out


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_metrics_file_that_is_not_a_regular_file_is_named(study: Path, kind: str) -> None:
    """A FIFO where ``metrics.jsonl`` should be: a reader that opened it would wait for a
    writer for ever (run as its own process, with a time limit)."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    metrics.unlink()
    if kind == "fifo":
        os.mkfifo(metrics)
    else:
        metrics.mkdir()
    proc = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "report", str(study),
                           "--format", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (note,) = _run_notes(data, "gigpo seed 1")
    assert f"is a {'FIFO' if kind == 'fifo' else 'directory'}, expected a regular file" in note


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 20])
def test_the_line_reader_holds_no_line_longer_than_its_bound(chunk: int) -> None:
    """Lines come whole up to the bound; a longer one (ended or not) only as its size and
    first bytes, whatever the chunk size."""
    from ccpo_lab.runs import files
    from ccpo_lab.runs.files import Cut, read_lines

    assert files.MAX_LINE == MAX_LINE
    data = (b"a\nbb\r\n" + b"x" * 50 + b"\n" + b"\0" * 200 + b"\nend\n" + b"\0" * 30)
    got = list(read_lines(io.BytesIO(data), max_line=40, chunk=chunk))
    assert got[:2] == [b"a", b"bb\r"] and got[4] == b"end"
    long_x, nul, tail = got[2], got[3], got[5]
    assert isinstance(long_x, Cut) and (long_x.size, long_x.long, long_x.ended) == (50, True, True)
    assert long_x.head == b"x" * 50 and not long_x.nul
    assert isinstance(nul, Cut) and (nul.size, nul.nul, nul.ended) == (200, True, True)
    assert isinstance(tail, Cut) and (tail.size, tail.long, tail.ended) == (30, False, False)
    assert list(read_lines(io.BytesIO(b"\0" * 100), max_line=40, chunk=chunk)) == [
        Cut(b"\0" * 60, 100, False, True, True, 40)]


def _nul_tail(path: Path, size: int = MAX_LINE + (1 << 20)) -> None:
    """What a power loss can leave: the file extended with NUL bytes, no line end."""
    with path.open("ab") as f:
        f.write(b"\0" * size)


def test_a_nul_tail_longer_than_the_bound_is_named_and_the_rows_before_it_used(
        study: Path) -> None:
    """Item 10: a 5 MiB run of NUL bytes after the last row (as after a power loss): the
    readers read it a chunk at a time, say what it is, and use every row before it."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    n_lines = len(metrics.read_bytes().splitlines())
    _nul_tail(metrics)
    data = build_report(study).data
    (note,) = _run_notes(data, "gigpo seed 1")
    assert f"line {n_lines + 1} (the last)" in note and "NUL bytes" in note
    assert "longer than 4 MiB: not read" in note
    seed1 = _arm(data, "gigpo")["per_seed"]["1"]
    assert seed1["error"] is None and seed1["mean"] == pytest.approx(0.75)
    rows = {(r.arm, r.seed): r for r in collect_status(study, scheduler=False)}
    assert "NUL bytes" in rows[("gigpo", 1)].note and rows[("gigpo", 1)].last_val == 0.875


def test_a_long_line_in_the_middle_is_named_and_left_out(study: Path) -> None:
    """A complete line longer than the bound is a line that is not a row: the run is left
    out with its line named, and nothing of it quoted beyond a short excerpt."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    lines = metrics.read_bytes().splitlines(keepends=True)
    lines.insert(2, b'{"step": 7, "data": {"junk": "' + b"\x1b[31m" * (MAX_LINE // 5) + b'"}}\n')
    metrics.write_bytes(b"".join(lines))
    data = build_report(study).data
    (note,) = _run_notes(data, "gigpo seed 1")
    assert "line 3: a line of" in note and "longer than 4 MiB: not read" in note
    assert "\x1b" not in note and len(note) < 400
    assert _arm(data, "gigpo")["n_seeds"] == 2


def test_import_names_a_line_longer_than_the_bound(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Item 10 for ``import``: a log with one 5 MiB line (a console log's junk, or the NUL
    bytes a power loss leaves in a JSONL log) is imported without it, the line named; it
    was held whole (828 MB for 200 MB), and in a console log skipped without a word."""
    console = tmp_path / "console.log"
    console.write_bytes(b"starting\n" + b"#" * (MAX_LINE + 10) + b"\n"
                        + b"step:0 - val/success_rate:0.25\nstep:1 - val/success_rate:0.5\n")
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_bytes(b'{"step": 0, "data": {"val/success_rate": 0.25}}\n'
                      + b"\0" * (MAX_LINE + 10) + b"\n"
                      + b'{"step": 1, "data": {"val/success_rate": 0.5}}\n')
    for arm, log, what in (("grpo", console, "starting '####"), ("gigpo", jsonl, "of NUL bytes")):
        assert main(["import", str(tmp_path / "res" / "old"), str(log), "--arm", arm,
                     "--seed", "0"]) == 0
        err = capsys.readouterr().err
        assert "1 line(s) too long to be a metrics row, not read (the first: line 2: a line " \
               "of 4,194,314 bytes " in err and what in err and "longer than 4 MiB" in err
        rows = (tmp_path / "res" / "old" / arm / "seed-0" / "metrics.jsonl").read_text()
        assert [json.loads(x)["step"] for x in rows.splitlines()] == [0, 1]


def test_a_resume_truncates_a_nul_tail_streaming(tmp_path: Path) -> None:
    """A run resumed after a power loss drops the rows after its checkpoint and the NUL
    tail, reading the file a chunk at a time; a file with nothing to drop is not
    rewritten."""
    from ccpo_lab.runs.metrics import append_metrics, read_metrics, truncate_metrics

    p = tmp_path / "metrics.jsonl"
    for step in range(6):
        append_metrics(p, step, {"val/success_rate": step / 10})
    inode = p.stat().st_ino
    assert truncate_metrics(p, 10) == 0 and p.stat().st_ino == inode  # nothing to drop
    _nul_tail(p)
    assert truncate_metrics(p, 3) == 2
    assert [r["step"] for r in read_metrics(p)] == [0, 1, 2, 3]
    assert p.stat().st_size < 1000


def test_a_manifest_linked_out_of_the_sweep_is_refused(study: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """``sweep.json`` supplies the report's settings: one linked to another sweep's (or
    any file) outside is named, not read."""
    elsewhere = tmp_path / "other-sweep.json"
    shutil.copy(study / "sweep.json", elsewhere)
    (study / "sweep.json").unlink()
    (study / "sweep.json").symlink_to(elsewhere)
    assert main(["report", str(study), "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert "sweep manifest is a link to" in err and str(elsewhere) in err
