"""metrics.jsonl is verl's own file-logger format: rows written by verl 0.9.1's FileLogger
and by :func:`append_metrics` read back the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.runs.metrics import append_metrics, read_metrics


@pytest.mark.slow
def test_verl_file_logger_and_ours_write_the_same_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from verl.utils.tracking import FileLogger

    theirs, ours = tmp_path / "verl.jsonl", tmp_path / "ours.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(theirs))
    rows = [(0, {"val/success_rate": 0.25, "val/pick_and_place_success_rate": 0.5}),
            (1, {"episode/success_rate": np.float32(0.125), "episode/length/mean": 7.0,
                 "adv/lambda_mean": np.float64(0.0)})]
    logger = FileLogger("p", "e")
    for step, data in rows:
        logger.log(data, step)
        append_metrics(ours, step, data)
    logger.finish()
    got_theirs, got_ours = read_metrics(theirs), read_metrics(ours)
    assert [r["step"] for r in got_theirs] == [0, 1]
    assert got_theirs == got_ours
    assert got_ours[1]["data"]["episode/success_rate"] == 0.125
