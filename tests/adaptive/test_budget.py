"""An adaptive design never starts a look its budget cannot pay for (issue 33)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.adaptive.launch import launch_adaptive
from ccpo_lab.adaptive.store import read_record
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch import registry
from ccpo_lab.launch.costplan import sweep_estimate
from ccpo_lab.runs.layout import SweepDir
from ccpo_lab.textout import fmt_hours
from tests.adaptive.studies import ARMS, complete, queued, register
from tests.report.builders import sweep_file

HOUR_PER_RUN = "seconds_per_step: 120"  # 30 steps x 120 s on 1 CPU: 1 CPU-hour a run


@pytest.fixture(autouse=True)
def queue_launcher() -> Iterator[None]:
    register()
    yield
    registry.unregister("queue")


def _sweep(tmp: Path, hours: float) -> Path:
    design = {"max_seeds": 6, "seeds_per_look": 3, "futility": False}
    return sweep_file(tmp, name="adapt", arms=ARMS, seeds=(0, 1, 2),
                      analysis={"reference": "grpo", "adaptive": design},
                      extra=f"launcher:\n  kind: queue\n  {HOUR_PER_RUN}\n"
                            f"budget:\n  device_hours: {hours}\n")


def _complete_costing_an_hour(sweep_dir: Path, arm: str, seed: int) -> None:
    """Finish a run as :func:`complete` does, with one recorded attempt of an hour on 1 CPU."""
    complete(sweep_dir, arm, seed)
    rd = SweepDir(sweep_dir).run_dir(arm, seed)
    t0 = time.time() - 7200
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))  # noqa: E731
    rd.update_run(cost={"device": "CPU", "attempts": [
        {"started": iso(t0), "ended": iso(t0 + 3600), "devices": 1, "device": "CPU"}]})


def _launch(path: Path, results: Path) -> tuple[int, str]:
    from rich.console import Console

    console = Console(record=True, width=400, file=io.StringIO())
    code = launch_adaptive(load_sweep(path), results, console=console)
    return code, console.export_text()


def test_a_look_the_budget_cannot_pay_for_is_not_launched(tmp_path: Path) -> None:
    results, sweep_dir = tmp_path / "results", tmp_path / "results" / "adapt"
    first = {(a, s) for a in ARMS for s in (0, 1, 2)}
    # look 1: 9 runs at the stated rate (an hour each) fit in 40 CPU-hours
    assert _launch(_sweep(tmp_path, 40), results)[0] == 0
    assert queued(sweep_dir) == first
    for arm, seed in first:
        _complete_costing_an_hour(sweep_dir, arm, seed)
    # now measured: what the 9 runs took per step, times 30 steps, per run to come
    est = sweep_estimate(load_sweep(_sweep(tmp_path, 40)), results)
    assert est.rate is not None and est.spent == pytest.approx(9.0)
    per = est.rate.device_hours * 30
    budget = 9 + 3 * per  # pays for 3 of look 2's 6 runs
    # look 1 decides gigpo (better) and adds 3 seeds to grpo and ccpo-return-hard: 6 more
    # runs would bring the study to 9 + 6 per: not launched
    code, out = _launch(_sweep(tmp_path, budget), results)
    assert code == 0 and queued(sweep_dir) == first
    record = read_record(SweepDir(sweep_dir))
    assert record is not None and len(record.state.looks) == 1  # the decision is kept
    assert (f"look 2's 6 run(s) would bring the study to about {fmt_hours(9 + 6 * per)} "
            f"CPU-hours, over budget.device_hours = {budget:g} CPU-hours "
            f"({fmt_hours(3 * per)} left)") in out
    assert "left open by the budget: ccpo-return-hard vs grpo;" in out
    assert f"6 more run(s)) would cost about {fmt_hours(6 * per)} CPU-hours" in out
    # a larger budget: the same command launches the look
    assert _launch(_sweep(tmp_path, 9 + 6.5 * per), results)[0] == 0
    assert queued(sweep_dir) == first | {(a, s) for a in ("grpo", "ccpo-return-hard")
                                         for s in (3, 4, 5)}


def test_a_first_look_over_budget_launches_nothing(tmp_path: Path) -> None:
    results = tmp_path / "results"
    code, out = _launch(_sweep(tmp_path, 5), results)
    assert code == 0 and not queued(results / "adapt")
    assert "look 1's 9 run(s) would bring the study to about 9 CPU-hours" in out
    assert "left open by the budget: gigpo vs grpo, ccpo-return-hard vs grpo" in out
