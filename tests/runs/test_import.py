"""``ccpo-lab import``: verl JSONL and console logs into a sweep directory, then a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.importer import parse_log
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import read_metrics
from tests.conftest import snapshot
from tests.report.builders import init_sweep, sweep_file

JSONL = (
    '{"step":0,"data":{"val/success_rate":0.25,"val/length/mean":30.0}}\n'
    '{"step":1,"data":{"episode/success_rate":0.125,"note":"text"}}\n'
    '{"step":1,"data":{"actor/lr":1e-06}}\n'
    '{"step":5,"data":{"val/success_rate":0.5,"episode/success_rate":0.25,"x":null}}\n'
)
CONSOLE = (
    "Creating file logger at /tmp/x.jsonl\n"
    "(TaskRunner pid=1234) step:0 - val/success_rate:0.25 - "
    "val/pick_and_place_success_rate:np.float64(0.5)\n"
    "(TaskRunner pid=1234) Training Progress:  10%|#  | 1/10 [00:10<01:30]\n"
    "(TaskRunner pid=1234) step:1 - episode/success_rate:0.125 - episode/length/mean:30.5 - "
    "actor/pg_loss:-0.0625\n"
    "\x1b[36m(TaskRunner pid=1234)\x1b[0m step:5 - episode/success_rate:0.25 - "
    "val/success_rate:0.5 - val/x:nan - flag:True\n"
    "done\n"
)


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def test_jsonl_rows_merged_per_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _write(tmp_path, "run.jsonl", JSONL)
    sweep = tmp_path / "old"
    assert main(["import", str(sweep), str(src), "--arm", "grpo", "--seed", "0"]) == 0
    assert "grpo seed 0: imported 3 steps (0..5, jsonl log)" in capsys.readouterr().out
    rd = RunDir(sweep / "grpo" / "seed-0")
    assert read_metrics(rd.metrics) == [
        {"step": 0, "data": {"val/success_rate": 0.25, "val/length/mean": 30.0}},
        {"step": 1, "data": {"episode/success_rate": 0.125, "actor/lr": 1e-06}},
        {"step": 5, "data": {"val/success_rate": 0.5, "episode/success_rate": 0.25, "x": None}},
    ]
    run = rd.read_run()
    assert (run["arm"], run["seed"], run["backend"]) == ("grpo", 0, "imported")
    assert run["imported"]["format"] == "jsonl" and run["imported"]["source"] == str(src)
    assert rd.read_state()["state"] == "completed"


def test_console_log(tmp_path: Path) -> None:
    log = parse_log(_write(tmp_path, "console.log", CONSOLE))
    assert log.format == "console"
    assert log.rows == {
        0: {"val/success_rate": 0.25, "val/pick_and_place_success_rate": 0.5},
        1: {"episode/success_rate": 0.125, "episode/length/mean": 30.5,
            "actor/pg_loss": -0.0625},
        5: {"episode/success_rate": 0.25, "val/success_rate": 0.5, "val/x": None, "flag": 1.0},
    }


def test_same_file_twice_changes_nothing(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    src = _write(tmp_path, "run.jsonl", JSONL)
    args = ["import", str(tmp_path / "s"), str(src), "--arm", "grpo", "--seed", "0"]
    assert main(args) == 0
    before = snapshot(tmp_path / "s")
    assert main(args) == 0
    assert "already imported from this file" in capsys.readouterr().out
    assert snapshot(tmp_path / "s") == before


def test_other_file_needs_replace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "s"
    first = _write(tmp_path, "a.jsonl", JSONL)
    second = _write(tmp_path, "b.log", CONSOLE)
    assert main(["import", str(sweep), str(first), "--arm", "grpo", "--seed", "0"]) == 0
    before = snapshot(sweep)
    assert main(["import", str(sweep), str(second), "--arm", "grpo", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert "already holds an import of another file" in err and "--replace" in err
    assert snapshot(sweep) == before
    assert main(["import", str(sweep), str(second), "--arm", "grpo", "--seed", "0",
                 "--replace"]) == 0
    assert "replaced 3 steps" in capsys.readouterr().out
    rows = read_metrics(sweep / "grpo" / "seed-0" / "metrics.jsonl")
    assert rows[0]["data"]["val/pick_and_place_success_rate"] == 0.5
    assert sorted(p.name for p in (sweep / "grpo").iterdir()) == ["seed-0"]  # no leftovers


@pytest.mark.parametrize(("text", "message"), [
    ('{"step":0,"data":{"a":1}}\n{"step":1,"da', "line 2 is cut off (partial write?)"),
    ('{"step":0,"data":{"a":1}}\n{oops}\n{"step":1,"data":{}}\n', "line 2 is not JSON"),
    ('{"step":"0","data":{"a":1}}\n', 'line 1: expected {"step": N, "data": {...}}'),
    ("step:0 - val/success_rate:0.5 - episode/re", "line 1 (the last) has no line end"),
    ("x\nstep:0 - val/success_rate:zero\n", "line 2: malformed 'key:value' pair"),
    ("step:0 - val/success_rate:0.5 - broken\n", "malformed 'key:value' pair 'broken'"),
    ("", "log file is empty"),
    ("hello\nworld\n", "no metrics found"),
])
def test_bad_logs_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                message: str) -> None:
    src = _write(tmp_path, "bad.log", text)
    assert main(["import", str(tmp_path / "s"), str(src), "--arm", "a", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.log" in err
    assert not (tmp_path / "s").exists()


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _write(tmp_path, "run.jsonl", JSONL)
    assert main(["import", str(tmp_path / "s"), str(src), "--arm", "../x", "--seed", "0"]) == 2
    assert "--arm: invalid name" in capsys.readouterr().err
    assert main(["import", str(tmp_path / "s"), str(tmp_path / "nope"), "--arm", "a",
                 "--seed", "0"]) == 2
    assert "log file not found" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_never_over_a_launched_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, _ = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    before = snapshot(sweep_dir)
    src = _write(tmp_path, "run.jsonl", JSONL)
    assert main(["import", str(sweep_dir), str(src), "--arm", "grpo", "--seed", "0",
                 "--replace"]) == 2
    assert "holds a run launched by ccpo-lab" in capsys.readouterr().err
    assert snapshot(sweep_dir) == before


def _log(values: dict[int, float]) -> str:
    return "".join(json.dumps({"step": s, "data": {"val/success_rate": v}}) + "\n"
                   for s, v in values.items())


def test_report_on_an_import_only_sweep(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "old"
    runs = {("grpo", 0): (0.5, 0.625), ("grpo", 1): (0.75, 0.75),
            ("ccpo", 0): (0.875, 1.0), ("ccpo", 1): (0.75, 0.875)}
    for (arm, seed), (a, b) in runs.items():
        src = _write(tmp_path, f"{arm}{seed}.jsonl", _log({0: 0.125, 5: a, 10: b}))
        extra = ["--total-steps", "20"] if (arm, seed) == ("ccpo", 1) else []
        assert main(["import", str(sweep), str(src), "--arm", arm, "--seed", str(seed),
                     "--val-episodes", "16", *extra]) == 0
    capsys.readouterr()
    assert main(["report", str(sweep), "--format", "json", "--window-start", "5",
                 "--reference", "grpo", "--bootstrap-reps", "500"]) == 0
    cap = capsys.readouterr()
    data = json.loads(cap.out)
    assert data["reference"] == "grpo" and data["settings_from"]["window_start"] == "option"
    arms = {a["arm"]: a for a in data["arms"]}
    assert arms["grpo"]["mean"] == pytest.approx((0.5625 + 0.75) / 2)
    assert arms["ccpo"]["per_seed"]["1"]["interim"] is True  # last step 10 of 20
    assert arms["ccpo"]["per_seed"]["0"]["binomial_se"] == pytest.approx(
        (0.9375 * 0.0625 / 16) ** 0.5)
    assert data["comparisons"][0]["paired"] and data["comparisons"][0]["step1"] == "not verified"
    assert "imported runs carry no backbone or protocol" in data["baselines"]["note"]
    assert "final step unknown" in cap.err
    assert main(["report", str(sweep)]) == 0  # defaults: window 70 holds nothing
    out = capsys.readouterr().out
    assert "reference arm not set: using ccpo (the first arm alphabetically)" in out


@pytest.mark.parametrize(("args", "text", "message"), [
    (["--seed", "99999999999999999999"], JSONL, "--seed: out of range"),
    (["--seed", "2147483648"], JSONL, "--seed: out of range"),
    (["--seed", "0", "--total-steps", "99999999999999999999"], JSONL,
     "--total-steps: out of range"),
    (["--seed", "0"], '{"step":100000000000000000000000,"data":{"val/success_rate":0.5}}\n',
     "line 1: step 1e+23 out of range"),
    (["--seed", "0"], '{"step":2147483648,"data":{"val/success_rate":0.5}}\n',
     "line 1: step 2147483648 out of range"),
    (["--seed", "0"], "step:100000000000000000000000 - val/success_rate:0.5\n",
     "line 1: step 100000000000000000000000 out of range"),
    (["--seed", "0"], '{"step":1,"data":{"val/succ\xffess_rate":0.5}}\n', "line 1: invalid UTF-8"),
])
def test_out_of_range_is_refused_at_import(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           args: list[str], text: str, message: str) -> None:
    """Item 9: a seed or a step beyond what the rest of ccpo-lab accepts, accepted at import,
    later crashed the report (OverflowError) and made sync fail for good."""
    src = tmp_path / "bad.log"
    src.write_bytes(text.encode("utf-8", errors="surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    assert main(["import", str(tmp_path / "s"), str(src), "--arm", "a", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_streamed_import_equals_the_merge_of_every_row(tmp_path: Path) -> None:
    """The import streams the log (bounded memory); rows of one step are merged whether they
    are adjacent or not, and the result is what a whole-file merge gives."""
    lines = ['{"step":0,"data":{"val/success_rate":0.25}}',
             '{"step":0,"data":{"val/length/mean":9.0}}',  # adjacent: merged
             '{"step":1,"data":{"a":1.0,"b":2.0}}',
             '{"step":2,"data":{"a":3.0}}',
             '{"step":1,"data":{"b":5.0,"c":6.0}}',  # out of order: merged into step 1
             '{"step":3,"data":{"a":NaN}}']
    src = _write(tmp_path, "run.jsonl", "\n".join(lines) + "\n")
    assert main(["import", str(tmp_path / "s"), str(src), "--arm", "a", "--seed", "0"]) == 0
    assert read_metrics(tmp_path / "s" / "a" / "seed-0" / "metrics.jsonl") == [
        {"step": 0, "data": {"val/success_rate": 0.25, "val/length/mean": 9.0}},
        {"step": 1, "data": {"a": 1.0, "b": 5.0, "c": 6.0}},
        {"step": 2, "data": {"a": 3.0}},
        {"step": 3, "data": {"a": None}},
    ]
    assert parse_log(src).rows[1] == {"a": 1.0, "b": 5.0, "c": 6.0}
