"""Published baselines: shown only for the same backbone and protocol, else one line why."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.report.analysis import Report, build_report
from ccpo_lab.report.baselines import backbone_of
from ccpo_lab.report.tables import to_markdown
from tests.report.builders import init_sweep, log_evals, sweep_file

REFERENCE = {"total_steps": 150, "val_batch_size": 128}


def _verl_report(tmp_path: Path, protocol: dict, overrides: tuple[str, ...] = ()) -> Report:
    p = sweep_file(tmp_path, backend="verl", seeds=(0,), protocol=protocol)
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results", overrides)
    for rd in rds.values():
        log_evals(rd, {70: 0.75, 75: 0.875})
    return build_report(sweep_dir, {"window_start": 70})


def test_shown_for_7b_reference_protocol(tmp_path: Path) -> None:
    rep = _verl_report(tmp_path, REFERENCE)
    b = rep.data["baselines"]
    assert b["shown"] and b["note"] is None and b["backbone"] == "Qwen2.5-7B-Instruct"
    gigpo = next(r for r in b["rows"] if r["method"] == "GiGPO")
    assert gigpo["per_task"]["All"] == pytest.approx(0.908)
    assert gigpo["per_task"]["Pick2"] == pytest.approx(0.792)
    md = to_markdown(rep.model)
    assert "| GiGPO (published, Qwen2.5-7B-Instruct) | 97.7 | 82.7 | 98.8 | 83.7 | 89.3 | " \
           "79.2 | 90.8 |" in md
    assert "published baselines left out" not in md


def test_left_out_for_another_protocol(tmp_path: Path) -> None:
    b = _verl_report(tmp_path, {**REFERENCE, "max_steps": 40, "val_temperature": 0.7})
    b = b.data["baselines"]
    assert not b["shown"] and b["rows"] == []
    assert "protocol differs from the published one" in b["note"]
    assert "max_steps 40 vs 50" in b["note"] and "val_temperature 0.7 vs 0.4" in b["note"]


def test_left_out_for_another_backbone(tmp_path: Path) -> None:
    rep = _verl_report(tmp_path, REFERENCE, ("backend.verl.model_path=Qwen/Qwen2.5-3B",))
    assert not rep.data["baselines"]["shown"]
    assert "backbone Qwen/Qwen2.5-3B has no published numbers" in rep.data["baselines"]["note"]
    assert rep.data["baselines"]["note"] in to_markdown(rep.model)


@pytest.mark.parametrize(("path", "expected"), [
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"),
    ("/models/qwen2.5-1.5b-instruct", "Qwen2.5-1.5B-Instruct"),
    ("meta-llama/Llama-3-8B", None),
    (None, None),
])
def test_backbone_of(path: str | None, expected: str | None) -> None:
    assert backbone_of(path) == expected
