"""``sync`` and the run files (issue 27, items 3, 5, 6, 10 and 14), against a real sqlite
store: a run whose files cannot be used is named (file and why) and left out while the
others are synced, and the exit code says so; nothing outside the sweep directory is
read; a value that is not a proportion is not sent; a full disk is one line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.metrics import append_metrics
from tests.fsfaults import on_full_disk
from tests.report.builders import episodes, init_sweep, log_evals, sweep_file, write_step1

pytestmark = pytest.mark.slow

SECRET = "root:$y$j9T$SECRET-HASH-not-to-be-quoted:20228:0:99999:7:::"


def _study(tmp_path: Path) -> tuple[Path, dict]:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0, 1)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5, 10: 0.75}, train_steps=range(1, 11))
        write_step1(rd, episodes())
        rd.write_state("completed", step=10, total_steps=10)
    return sweep_dir, rds


def _children(sweep_dir: Path) -> dict[tuple[str, str], object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep_dir}/mlflow.db")
    exp = client.get_experiment_by_name("study")
    return {(r.data.tags["ccpo_lab.arm"], r.data.tags["ccpo_lab.seed"]): r
            for r in client.search_runs([exp.experiment_id], "tags.`ccpo_lab.kind` = 'run'")}


def _store_holds(sweep_dir: Path, needle: str) -> bool:
    """Whether any text of the store (tags, params, metrics' keys) holds ``needle``."""
    with sqlite3.connect(sweep_dir / "mlflow.db") as con:
        for table, col in (("tags", "value"), ("params", "value"), ("metrics", "key"),
                           ("runs", "name")):
            if con.execute(f"SELECT COUNT(*) FROM {table} WHERE {col} LIKE ?",  # noqa: S608
                           (f"%{needle}%",)).fetchone()[0]:
                return True
    return False


def test_runs_whose_files_cannot_be_used_are_named_and_the_others_synced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 3 as reported: one malformed ``config.yaml`` aborted the whole sync (``sync
    failed: ParserError ... run ccpo-lab sync again later``, exit 1), no file named, no
    run synced. Item 6 for sync: a ``metrics.jsonl`` linked to a file outside the sweep
    was read and its first line quoted. Item 5: a success rate of 1.7 was sent."""
    sweep_dir, rds = _study(tmp_path)
    config = rds[("grpo", 1)].config_yaml
    good = config.read_text()
    config.write_text(good.replace("protocol:", "protocol: [unclosed\nx:", 1))
    secret = tmp_path / "shadow"
    secret.write_text(SECRET + "\n")
    linked = rds[("gigpo", 0)].metrics
    kept = linked.read_bytes()
    linked.unlink()
    linked.symlink_to(secret)
    rds[("gigpo", 1)].state_json.write_text('{"state": "compl')
    rate = rds[("grpo", 0)].metrics
    rate.write_text(rate.read_text().replace('"val/success_rate": 0.75', '"val/success_rate": 1.7'))

    assert main(["sync", str(sweep_dir)]) == 1
    cap = capsys.readouterr()
    assert "SECRET" not in cap.out + cap.err and "Traceback" not in cap.err
    assert "1 runs created" in cap.out
    err = cap.err
    assert "grpo seed 1: config.yaml unreadable (malformed YAML at line " in err
    assert "gigpo seed 0: metrics.jsonl is a link to" in err and str(secret) in err
    assert "gigpo seed 1: state.json unreadable (JSONDecodeError" in err
    assert "not synced (mend it, then sync again)" in err
    assert "grpo seed 0: 1 value(s) not sent" in err and "1.7 is not a proportion" in err
    assert err.strip().splitlines()[-1] == ("sync: 3 run directories not synced, or not whole "
                                            "(named above): mend them and run `ccpo-lab sync` "
                                            "again")
    children = _children(sweep_dir)
    assert set(children) == {("grpo", "0")}
    assert not _store_holds(sweep_dir, "SECRET")

    config.write_text(good)  # mended: the next sync creates what was left out
    linked.unlink()
    linked.write_bytes(kept)
    rds[("gigpo", 1)].state_json.write_text(json.dumps({"state": "completed", "step": 10}))
    assert main(["sync", str(sweep_dir)]) == 0
    assert "3 runs created" in capsys.readouterr().out
    children = _children(sweep_dir)
    assert len(children) == 4
    assert children[("grpo", "1")].data.params["protocol.total_steps"] == "30"


def test_a_nul_tail_is_not_sent_and_the_rows_before_it_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 10 for sync: 5 MiB of NUL bytes after the last row (a power loss) are read a
    chunk at a time; the rows before them are sent."""
    sweep_dir, rds = _study(tmp_path)
    with rds[("grpo", 0)].metrics.open("ab") as f:
        f.write(b"\0" * (5 << 20))
    assert main(["sync", str(sweep_dir)]) == 0
    assert "4 runs created" in capsys.readouterr().out
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep_dir}/mlflow.db")
    grpo = _children(sweep_dir)[("grpo", "0")]
    assert len(client.get_metric_history(grpo.info.run_id, "val/success_rate")) == 3


def test_a_full_disk_is_one_line(tmp_path: Path) -> None:
    """Item 14 as reported: a disk-full sync printed MLflow's 44-line SQLAlchemy traceback
    before its own line. The store fills up on the rows a second sync sends."""
    sweep_dir, rds = _study(tmp_path)
    assert main(["sync", str(sweep_dir)]) == 0
    for rd in rds.values():
        for step in range(11, 120):
            append_metrics(rd.metrics, step, {f"episode/m{i}": 0.5 for i in range(40)})
    ran = on_full_disk(sweep_dir, ["sync", "@"], 16, tmp_path / "after")
    assert ran.rc == 1
    lines = [ln for ln in ran.err.splitlines() if ln.strip()]
    assert len(lines) == 1, ran.err
    assert "Traceback" not in ran.err and "again later" not in lines[0]
    assert "disk is full" in lines[0] or "File too large" in lines[0]
    assert "nothing was lost" in lines[0] and "free" in lines[0]
