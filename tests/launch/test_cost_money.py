"""``status``, ``report`` and the tracking summary turn the device-hours into money at the
price the runs were launched with (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.costline import cost_line, money_text, recorded_price, sweep_usage
from ccpo_lab.launch.status import collect_status
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.cost import sweep_cost_values
from ccpo_lab.runs.layout import SweepDir


@pytest.mark.slow
def test_status_shows_the_money_at_the_launch_price(workdir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    results = workdir / "results"
    smoke = str(workdir / "sweeps" / "smoke.yaml")
    assert main(["sweep", smoke, "launcher=inline", "--results", str(results),
                 "seeds=[0]", "launcher.price_per_device_hour=3", "launcher.currency=EUR"]) == 0
    rows = collect_status(results / "smoke", scheduler=False)
    assert recorded_price(rows) == (3.0, "EUR")
    u = sweep_usage(rows)
    assert u is not None and u.used > 0
    line = cost_line(rows)
    assert line is not None and f"at 3 EUR per device-hour: {u.used * 3:.3g} EUR used" in line
    capsys.readouterr()
    assert main(["status", str(results / "smoke")]) == 0
    assert "EUR used" in capsys.readouterr().out
    # the report's cost section and the tracking summary carry it too
    cost = build_report(results / "smoke").model.cost
    assert cost is not None and cost.currency == "EUR" and cost.price_per_device_hour == 3
    assert cost.money == pytest.approx(cost.total * 3)
    assert sweep_cost_values(results / "smoke")["cost/money_EUR"] == pytest.approx(
        cost.total * 3, rel=1e-6)
    assert main(["report", str(results / "smoke")]) == 0
    assert f"money: {money_text(cost.money)} EUR" in capsys.readouterr().out
    # runs launched without a price: no money
    assert main(["sweep", smoke, "launcher=inline", "--results", str(workdir / "other"),
                 "seeds=[0]", "arms=[grpo]"]) == 0
    other = collect_status(SweepDir(workdir / "other" / "smoke").path, scheduler=False)
    assert recorded_price(other) is None and "EUR" not in str(cost_line(other))
