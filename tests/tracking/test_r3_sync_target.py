"""Reliability round 3 (issue 36), item 11: ``sync`` on a folder that is not a sweep is a
usage error and writes nothing there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main


def test_sync_refuses_a_folder_that_is_not_a_sweep(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "x.txt").write_text("mine")
    assert main(["sync", str(folder)]) == 2
    assert "not a sweep directory" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["x.txt"]


@pytest.mark.slow
def test_sync_warnings_show_metric_keys_escaped(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Item 8: a metric key taken from ``metrics.jsonl`` reaches ``sync``'s warnings
    escaped."""
    from tests.report.builders import init_sweep, log_evals, sweep_file

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 5: 0.5}, train_steps=range(1, 6))
        with rd.metrics.open("a", encoding="utf-8") as f:  # a null: not sent, warned
            f.write('{"step": 6, "data": {"val/\\u001b]2;pwned\\u0007": null}}\n')
    assert main(["sync", str(sweep_dir)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "\\x1b]2;pwned\\x07" in err  # named, escaped
