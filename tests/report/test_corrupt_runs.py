"""A finished study corrupted the ways a demanding user found (issue 15, items 1-5 and 8):
``report``, ``verify`` and ``status`` either use every line of every run file or name the
one they cannot use (file, line, why), and a directory whose ``run.json`` disagrees with
its place is left out and said, never counted.

The study is the hand-computed one of ``tests/report/conftest.py``: gigpo's seeds have
window means .75, .75 and .875 (seed 1 from .625, .75, .875 at steps 20, 25, 30), grpo's
.5, .625, .75; every gigpo row carries training metrics first, held-out ones last.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.status import collect_status
from ccpo_lab.report.analysis import build_report
from ccpo_lab.runs.verify import verify_sweep
from tests.report.builders import (
    demo_like_study,
    episodes,
    init_sweep,
    log_evals,
    sweep_file,
    write_step1,
)


def _arm(data: dict, name: str) -> dict:
    return next(a for a in data["arms"] if a["arm"] == name)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _row_line(path: Path, step: int) -> int:
    """0-based index of the line holding ``step``."""
    return next(i for i, ln in enumerate(_lines(path)) if json.loads(ln)["step"] == step)


def _notes(data: dict) -> list[dict]:
    return [n for n in data["notes"] if n["kind"] == "run"]


def _only_note(data: dict, needle: str) -> dict:
    found = [n for n in _notes(data) if needle in n["text"]]
    assert len(found) == 1, (needle, [n["text"] for n in _notes(data)])
    return found[0]


def _edit_line(path: Path, index: int, new: bytes) -> None:
    lines = _lines(path)
    lines[index] = new
    path.write_bytes(b"".join(lines))


def _left_out(data: dict, arm: str, seed: int) -> None:
    """gigpo seed ``seed`` is not counted: 2 seeds, and its row says why."""
    a = _arm(data, arm)
    assert a["n_seeds"] == 2 and a["per_seed"][str(seed)]["error"]


def test_a_line_cut_in_the_middle_is_named(tmp_path: Path) -> None:
    """Item 1, as reported: ``L[30] = L[30][:40]`` on ``grpo/seed-0/metrics.jsonl`` of a
    demo-like study, newline kept. The cut row keeps only training metrics in its first 40
    characters, so a reader that decodes only the lines carrying a held-out key never sees
    it, and the evaluation at step 30 vanishes from the window."""
    study = demo_like_study(tmp_path, tmp_path / "results")
    metrics = study / "grpo" / "seed-0" / "metrics.jsonl"
    lines = _lines(metrics)
    assert json.loads(lines[30])["step"] == 30 and b'"val/' in lines[30]
    _edit_line(metrics, 30, lines[30][:40] + b"\n")
    assert b'"val/' not in _lines(metrics)[30]
    data = build_report(study).data
    note = _only_note(data, "grpo seed 0")
    assert note["file"] == str(metrics) and note["line"] == 31
    assert "line 31" in note["text"] and "not JSON" in note["text"]
    _left_out(data, "grpo", 0)
    rows = {(r.arm, r.seed): r for r in collect_status(study, scheduler=False)}
    assert "line 31" in rows[("grpo", 0)].note


@pytest.mark.parametrize(("value", "why"), [
    (b"Infinity", "not a finite number"),  # item 2
    (b"-Infinity", "not a finite number"),
    (b"NaN", "not a finite number"),  # item 3
    (b'"0.75"', "not a number"),  # item 8: a string ...
    (b'{"mean": 0.75}', "not a number"),  # ... or a dict
    (b"null", "no value"),
    (b"1e999", "not a finite number"),
])
def test_a_bad_value_is_named(study: Path, value: bytes, why: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    """Items 2, 3 and 8: the held-out metric of one row is not a finite number."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    i = _row_line(metrics, 25)
    line = _lines(metrics)[i]
    _edit_line(metrics, i, line.replace(b'"val/success_rate": 0.75', b'"val/success_rate": '
                                        + value))
    assert _lines(metrics)[i] != line
    data = build_report(study).data
    note = _only_note(data, "gigpo seed 1")
    assert note["file"] == str(metrics) and note["line"] == i + 1
    assert "val/success_rate" in note["text"] and why in note["text"]
    _left_out(data, "gigpo", 1)
    assert _arm(data, "gigpo")["n_evals"] == 6  # nothing of seed 1 counted
    # the command: exit 0, the note printed, no internal error
    assert main(["report", str(study), "--format", "md"]) == 0
    cap = capsys.readouterr()
    assert "internal error" not in cap.err and f"line {i + 1}" in cap.out


def test_invalid_utf8_in_a_key_is_named(study: Path) -> None:
    """Item 3: one byte of a held-out key is not UTF-8; decoding with replacement would
    rename the key and silently drop the evaluation."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    i = _row_line(metrics, 30)
    _edit_line(metrics, i, _lines(metrics)[i].replace(b'"val/success_rate"',
                                                      b'"val/succ\xffess_rate"'))
    data = build_report(study).data
    note = _only_note(data, "gigpo seed 1")
    assert note["line"] == i + 1 and "UTF-8" in note["text"]
    _left_out(data, "gigpo", 1)


def test_a_value_beyond_float_range_and_a_huge_step_are_named(study: Path) -> None:
    """Item 9's later crash: a step or a value that does not fit (OverflowError)."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    i = _row_line(metrics, 25)
    _edit_line(metrics, i, _lines(metrics)[i].replace(b'"step": 25}',
                                                      b'"step": 100000000000000000000000}'))
    data = build_report(study).data
    note = _only_note(data, "gigpo seed 1")
    assert note["line"] == i + 1 and "step" in note["text"]
    _left_out(data, "gigpo", 1)


def test_a_cut_last_line_is_named_not_counted(study: Path) -> None:
    """A last line without its newline (a write cut off) is not used, and said."""
    metrics = study / "gigpo" / "seed-1" / "metrics.jsonl"
    lines = _lines(metrics)
    metrics.write_bytes(b"".join(lines[:-1]) + lines[-1][:60])
    data = build_report(study).data
    note = _only_note(data, "gigpo seed 1")
    assert note["line"] == len(lines) and "cut off" in note["text"]
    seed1 = _arm(data, "gigpo")["per_seed"]["1"]
    assert seed1["error"] is None and seed1["n_evals"] == 2  # steps 20 and 25 only


def _other_sweep_run(tmp_path: Path) -> Path:
    """grpo seed 0 of another sweep (``smoke``): a finished run with its own numbers."""
    (tmp_path / "elsewhere").mkdir()
    p = sweep_file(tmp_path / "elsewhere", name="smoke", arms=("grpo",), seeds=(0,))
    _, _, rds = init_sweep(p, tmp_path / "elsewhere" / "results")
    rd = rds[("grpo", 0)]
    log_evals(rd, {0: 0.0, 20: 0.0, 25: 0.0, 30: 0.0})
    write_step1(rd, episodes())
    return rd.path


def test_a_run_copied_from_another_sweep_is_refused(study: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Item 4: another sweep's grpo seed 0 copied in as gigpo/seed-5."""
    dest = study / "gigpo" / "seed-5"
    shutil.copytree(_other_sweep_run(tmp_path), dest)
    data = build_report(study).data
    gigpo = _arm(data, "gigpo")
    assert gigpo["n_seeds"] == 3 and 5 not in gigpo["seeds"]
    assert gigpo["mean"] == pytest.approx((0.75 + 0.75 + 0.875) / 3)
    note = _only_note(data, "gigpo/seed-5")
    assert note["file"] == str(dest / "run.json")
    assert "arm grpo" in note["text"] and "seed 0" in note["text"] and "smoke" in note["text"]
    checks = verify_sweep(study)
    assert not all(c.ok for c in checks)
    assert main(["verify", str(study)]) == 1
    cap = capsys.readouterr()
    assert "gigpo/seed-5" in cap.out and "arm grpo" in cap.out
    assert "NOT verified" in cap.err
    rows = {(r.arm, r.path.name): r for r in collect_status(study, scheduler=False)}
    assert rows[("gigpo", "seed-5")].seed == 5 and "arm grpo" in rows[("gigpo", "seed-5")].note


def test_a_deleted_run_json_is_named(study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 5: ``run.json`` deleted: the run neither vanishes silently nor shows seed -1."""
    rd = study / "gigpo" / "seed-1"
    (rd / "run.json").unlink()
    data = build_report(study).data
    note = _only_note(data, "gigpo/seed-1")
    assert note["file"] == str(rd / "run.json") and "no run.json" in note["text"]
    assert _arm(data, "gigpo")["n_seeds"] == 2
    rows = {r.path.name: r for r in collect_status(study, scheduler=False)
            if r.path.parent.name == "gigpo"}
    assert rows["seed-1"].seed == 1 and "run.json" in rows["seed-1"].note
    assert main(["verify", str(study)]) == 1
    cap = capsys.readouterr()
    assert "gigpo/seed-1" in cap.out and "no run.json" in cap.out


def test_a_run_json_that_disagrees_with_the_manifest_is_refused(study: Path) -> None:
    """Same sweep name, arm and seed, but not the run the manifest lists there."""
    rd = study / "grpo" / "seed-2"
    run = json.loads((rd / "run.json").read_text())
    run["run_id"] = "0" * 64
    (rd / "run.json").write_text(json.dumps(run))
    data = build_report(study).data
    note = _only_note(data, "grpo/seed-2")
    assert "run id" in note["text"]
    assert _arm(data, "grpo")["n_seeds"] == 2


def test_an_unreadable_state_or_config_is_named(study: Path) -> None:
    """The run's other files: what cannot be read is said, not silently taken as absent."""
    (study / "grpo" / "seed-1" / "state.json").write_text('{"state": "compl')
    (study / "gigpo" / "seed-0" / "config.yaml").write_text("protocol: [unclosed\n")
    data = build_report(study).data
    note = _only_note(data, "grpo seed 1: state.json unreadable")
    assert note["file"] == str(study / "grpo" / "seed-1" / "state.json")
    note = _only_note(data, "gigpo seed 0: config.yaml unreadable")
    assert note["file"] == str(study / "gigpo" / "seed-0" / "config.yaml")


@pytest.mark.parametrize("chunk", [1 << 24, 97])
@pytest.mark.parametrize("variant", ["clean", "crlf", "blank", "non-ascii", "partial",
                                     "repeated"])
def test_the_quick_read_and_the_line_by_line_read_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: str, chunk: int) -> None:
    """The report's quick path (byte counts, selected lines, a chunk at a time) gives what
    reading every line gives, and falls back to it for anything unusual."""
    from ccpo_lab.report import collect
    from ccpo_lab.report.collect import _slow, read_run_series

    monkeypatch.setattr(collect, "CHUNK", chunk)

    rows = [json.dumps({"step": s, "data": {"episode/x": s / 10, **(
        {"val/success_rate": s / 100, "val/é_success_rate": 0.5} if s % 5 == 0 else {})}},
        sort_keys=True) for s in range(0, 31)]
    if variant == "repeated":
        rows.insert(12, rows[10])
    text = {"crlf": "\r\n".join(rows) + "\r\n", "blank": "\n\n".join(rows) + "\n",
            "partial": "\n".join(rows) + '\n{"step": 31, "da'}.get(variant, "\n".join(rows)
                                                                   + "\n")
    if variant == "non-ascii":
        text = text.replace("episode/x", "episode/ß")
    p = tmp_path / "metrics.jsonl"
    p.write_bytes(text.encode())
    names = ["val/success_rate", "val/é_success_rate"]
    got = read_run_series(p, names)
    values, last, _, _ = _slow(p, names)
    assert got.last_step == last == 30
    assert got.series["val/success_rate"][0].tolist() == [0, 5, 10, 15, 20, 25, 30]
    assert got.series["val/success_rate"][1].tolist() == [s / 100 for s in range(0, 31, 5)]
    assert len(got.series["val/é_success_rate"][0]) == 7
    assert (got.partial is not None) == (variant == "partial")
    if got.partial is not None:
        assert got.partial.line == 32
    assert got.repeated == (("step 10 (lines 11, 13)",) if variant == "repeated" else ())


def test_a_cut_line_run_into_the_next_one_is_named(tmp_path: Path) -> None:
    """A write cut off and the next row appended after it (what an appending logger does
    after a crash): one line, starting with '{' and ending with '}', that is not JSON. The
    held-out row it swallowed must not vanish silently."""
    study = demo_like_study(tmp_path, tmp_path / "results")
    metrics = study / "grpo" / "seed-0" / "metrics.jsonl"
    lines = _lines(metrics)
    assert b'"val/' in lines[30] and json.loads(lines[31])["step"] == 31
    lines[31] = (json.dumps({"step": 31, "data": {"episode/length/mean": 20.0}},
                            sort_keys=True) + "\n").encode()  # a training row
    lines[30] = lines[30][:40]  # no line end: row 31 runs into it
    metrics.write_bytes(b"".join(lines))
    data = build_report(study).data
    note = _only_note(data, "grpo seed 0")
    assert note["line"] == 31 and "not JSON" in note["text"]
    _left_out(data, "grpo", 0)
