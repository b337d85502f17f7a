"""Reliability round 3 (issue 36), items 6 and 10: ``report --out`` replaced at any
instant leaves the old report or the new one, never deletes a file ccpo-lab did not
write, and leaves another host's (or a live writer's) temporary folder alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.report import directory as D


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(timeout=300)
    return p.pid


def _report(study: Path, out: Path) -> int:
    return main(["report", str(study), "--out", str(out), "--no-sync"])


def test_a_crash_in_the_swap_loses_no_user_file(study: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    assert _report(study, out) == 0
    (out / "my-notes.txt").write_text("mine\n")
    real_rename = os.rename
    calls = {"n": 0}

    def dying_rename(a: object, b: object) -> None:  # killed right after the exchange
        calls["n"] += 1
        raise KeyboardInterrupt

    def fill(tmp: Path) -> list[Path]:
        (tmp / "report.md").write_text("the new report\n")
        return [tmp / "report.md"]

    monkeypatch.setattr(D.os, "rename", dying_rename)
    with pytest.raises(KeyboardInterrupt):  # after the exchange, moving the user's file
        D.write_report_dir(out, fill)
    monkeypatch.setattr(D.os, "rename", real_rename)
    assert calls["n"] == 1
    assert (out / "report.md").is_file()  # the old report or the new one: never absent
    notes = [p for p in tmp_path.rglob("my-notes.txt")]
    assert len(notes) == 1 and notes[0].read_text() == "mine\n"
    # the writer "dies": its temporary sibling now names a dead process of this host
    for p in tmp_path.glob(".report.partial-*"):
        host, _pid, tail = p.name[len(".report.partial-"):].rsplit("-", 2)
        p.rename(p.with_name(f".report.partial-{host}-{_dead_pid()}-{tail}"))
    capsys.readouterr()
    assert _report(study, out) == 0
    notes = [p for p in tmp_path.rglob("my-notes.txt")]
    assert len(notes) == 1 and notes[0].read_text() == "mine\n"  # kept, wherever it is


def test_the_users_files_are_carried_into_the_new_report(study: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert _report(study, out) == 0
    (out / "my-notes.txt").write_text("mine\n")
    (out / "drafts").mkdir()
    (out / "drafts" / "a.tex").write_text("x")
    assert _report(study, out) == 0
    assert (out / "my-notes.txt").read_text() == "mine\n" and (out / "drafts" / "a.tex").is_file()
    assert not list(tmp_path.glob(".report.*"))  # nothing left behind


def test_an_out_that_is_not_a_report_is_refused(study: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    (other / "sweep-b" / "grpo").mkdir(parents=True)
    (other / "sweep-b" / "grpo" / "metrics.jsonl").write_text("{}\n")
    assert _report(study, other) == 2
    assert "not a report directory" in capsys.readouterr().err
    assert (other / "sweep-b" / "grpo" / "metrics.jsonl").read_text() == "{}\n"


def test_another_hosts_or_a_live_writers_partial_is_left_alone(study: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "report"
    foreign = tmp_path / f".report.partial-otherhost-{_dead_pid()}-abcdef"
    live = tmp_path / f".report.partial-{D.socket.gethostname().replace('-', '_')}-" \
                      f"{os.getpid()}-abcdef"
    for p in (foreign, live):
        p.mkdir()
        (p / D.WRITER).write_text("{}")
        (p / "report.md").write_text("being written")
    assert _report(study, out) == 0
    assert (foreign / "report.md").is_file() and (live / "report.md").is_file()
    dead = tmp_path / f".report.partial-{D.socket.gethostname().replace('-', '_')}-" \
                      f"{_dead_pid()}-abcdef"
    dead.mkdir()
    (dead / D.WRITER).write_text("{}")
    (dead / "report.md").write_text("left by a killed writer")
    assert _report(study, out) == 0
    assert not dead.exists()  # ccpo-lab's own leftovers are tidied


def test_the_exchange_is_atomic_here(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "y").write_text("b")
    if not D._exchange(a, b):
        pytest.skip("this file system has no renameat2(RENAME_EXCHANGE)")
    assert (a / "y").is_file() and (b / "x").is_file()
