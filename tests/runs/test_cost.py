"""What a run costs: attempts in run.json, phases and peaks from the metrics (issue 26)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ccpo_lab.placement import Needs, Placement
from ccpo_lab.runs.cost import (
    MEASURED_PREFIXES,
    devices_held,
    end_attempt,
    read_cost,
    start_attempt,
)
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import append_metrics

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)


def _iso(minutes: float) -> str:
    return (T0 + timedelta(minutes=minutes)).isoformat()


def _run(tmp_path: Path) -> RunDir:
    rd = RunDir(tmp_path / "study" / "grpo" / "seed-0")
    rd.path.mkdir(parents=True)
    rd.update_run(run_id="a" * 64, arm="grpo", seed=0)
    return rd


def test_devices_are_the_gpus_held_or_the_cpus_allocated() -> None:
    assert devices_held(Needs(nodes=2, gpus_per_node=8), None) == ("GPU", 16)
    assert devices_held(Needs(cpus=1), None) == ("CPU", 1)
    assert devices_held(Needs(cpus=1), Placement(cpus=4)) == ("CPU", 4)  # Slurm's allocation
    assert devices_held(Needs(cpus=4), Placement(cpus=2)) == ("CPU", 4)
    assert devices_held(Needs(), Placement()) == ("CPU", 1)


def test_attempts_add_up_and_a_killed_one_ends_at_its_heartbeat(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    # attempt 1: 8 GPUs for 30 min, then killed (no end recorded); its last heartbeat at 30
    rd.update_run(cost={"device": "GPU", "attempts": [
        {"started": _iso(0), "ended": None, "devices": 8, "nodes": 1}]})
    rd.write_state("running", step=10)
    state = json.loads(rd.state_json.read_text())
    state["updated"] = _iso(30)
    rd.state_json.write_text(json.dumps(state))
    start_attempt(rd, Needs(gpus_per_node=8), None)  # the requeued attempt closes it
    attempts = rd.read_run()["cost"]["attempts"]
    assert attempts[0]["ended"] == _iso(30) and "heartbeat" in attempts[0]["end"]
    assert attempts[1]["ended"] is None and attempts[1]["devices"] == 8
    # the second attempt: 60 min, then completed
    attempts[1]["started"] = _iso(40)
    rd.update_run(cost={"device": "GPU", "attempts": attempts})
    end_attempt(rd, "completed")
    attempts = rd.read_run()["cost"]["attempts"]
    attempts[1]["ended"] = _iso(100)
    rd.update_run(cost={"device": "GPU", "attempts": attempts})
    cost = read_cost(rd)
    assert cost.attempts == 2 and cost.device == "GPU" and cost.devices == 8
    assert cost.wall_s == pytest.approx(90 * 60)
    assert cost.device_hours == pytest.approx(8 * 1.5)  # 8 GPUs x (0.5 h + 1 h)
    assert not cost.open_attempt


def test_an_open_attempt_counts_to_now_while_it_runs(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    rd.update_run(cost={"device": "CPU", "attempts": [
        {"started": _iso(0), "ended": None, "devices": 2}]})
    state = {"state": "running", "updated": _iso(6)}
    now = (T0 + timedelta(minutes=12)).timestamp()
    assert read_cost(rd, metrics=False, state=state).device_hours == pytest.approx(0.2)
    assert read_cost(rd, metrics=False, state=state, now=now).device_hours == \
        pytest.approx(0.4)


def test_phases_peaks_and_throughput_come_from_the_metrics(tmp_path: Path) -> None:
    rd = _run(tmp_path)
    rd.update_run(cost={"device": "GPU", "attempts": [
        {"started": _iso(0), "ended": _iso(10), "devices": 4}]})
    append_metrics(rd.metrics, 0, {"val/success_rate": 0.25})  # verl: untimed validation
    for step in (1, 2):
        append_metrics(rd.metrics, step, {
            "timing_s/gen": 100.0, "timing_s/reward": 10.0, "timing_s/old_log_prob": 5.0,
            "timing_s/ref": 5.0, "timing_s/adv": 1.0, "timing_s/update_actor": 50.0,
            "timing_s/step": 171.0, "perf/max_memory_allocated_gb": 40.0 + step,
            "perf/throughput": 1000.0 * step})
    append_metrics(rd.metrics, 3, {"timing_s/testing": 30.0, "timing_s/save_checkpoint": 20.0,
                                   "perf/throughput": None, "perf/max_memory_allocated_gb": 39.0})
    cost = read_cost(rd)
    assert cost.phases == pytest.approx({"rollout": 220.0, "update": 122.0,
                                         "evaluation": 30.0, "checkpoint": 20.0,
                                         "startup": 600.0 - 392.0})
    assert cost.peak_memory_gb == 42.0 and cost.memory_kind == "GPU allocated"
    assert cost.throughput == pytest.approx(1500.0)  # the null value is skipped
    assert cost.throughput_unit == "tokens/s/GPU"
    assert cost.steps == 3
    assert cost.device_hours == pytest.approx(4 * 10 / 60)


def test_a_run_without_a_recorded_attempt_has_no_device_hours(tmp_path: Path) -> None:
    rd = _run(tmp_path)  # e.g. an imported run: its metrics may still hold timings
    append_metrics(rd.metrics, 1, {"timing_s/gen": 3.0, "perf/max_rss_gb": 0.5})
    cost = read_cost(rd)
    assert cost.attempts == 0 and cost.device_hours is None
    assert cost.phases == {"rollout": 3.0} and cost.memory_kind == "peak RSS"


def test_measured_prefixes_name_the_machine_dependent_values() -> None:
    assert all(k.startswith(MEASURED_PREFIXES) for k in
               ("timing_s/gen", "perf/max_rss_gb", "perf/env_steps_per_s"))
    assert not "val/success_rate".startswith(MEASURED_PREFIXES)
