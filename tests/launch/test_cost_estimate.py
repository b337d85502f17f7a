"""Cost before launch: the estimate ``--dry-run`` prints, its sources (measured runs, a
stated rate), the price, and the budget a launch respects (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.budget import Limit, fits
from ccpo_lab.launch.costplan import check_budget, sweep_estimate
from ccpo_lab.launch.estimate import work_key
from ccpo_lab.runs.cost import read_cost
from ccpo_lab.runs.layout import SweepDir
from tests.conftest import snapshot

LIMIT = Limit(10.0, "budget.device_hours", "10 GPU-hours")


# ------------------------------------------------------------------ the pure verdict
def test_fits_counts_what_was_spent_and_what_the_budget_affords() -> None:
    f = fits(LIMIT, 4, 2.0, spent=1.0)
    assert f.ok and f.need == 9.0 and f.left == 9.0 and f.affordable == 4 and not f.risky
    f = fits(LIMIT, 6, 2.0, spent=1.0)
    assert not f.ok and f.need == 13.0 and f.affordable == 4
    # fits at the mean rate, not at the slowest measured one
    f = fits(LIMIT, 4, 2.0, spent=1.0, per_run_high=2.5)
    assert f.ok and f.risky
    assert fits(LIMIT, 0, 2.0, spent=12.0).affordable == 0


# ------------------------------------------------------------------ bad input: one line, 2
@pytest.mark.parametrize("overrides, key", [
    (["budget.device_hours=0"], "budget.device_hours"),
    (["budget.device_hours=-3"], "budget.device_hours"),
    (["launcher.price_per_device_hour=2.5"], "launcher.currency"),
    (["launcher.price_per_device_hour=2.5", "launcher.currency=dollars"], "launcher.currency"),
    (["budget.money=10", "budget.currency=USD"], "launcher.price_per_device_hour"),
    (["budget.money=10", "launcher.price_per_device_hour=1", "launcher.currency=USD"],
     "budget.currency"),
    (["budget.money=10", "budget.currency=EUR", "launcher.price_per_device_hour=1",
      "launcher.currency=USD"], "budget.currency"),
    (["launcher.seconds_per_step=0"], "launcher.seconds_per_step"),
])
def test_bad_budget_or_price_is_one_line_naming_the_key(
        workdir: Path, capsys: pytest.CaptureFixture[str], overrides: list[str],
        key: str) -> None:
    with pytest.raises(UserError) as e:
        load_sweep(workdir / "sweeps" / "smoke.yaml", overrides)
    assert e.value.key == key
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "--dry-run",
                 "--results", str(workdir / "results"), *overrides]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err, err


# ------------------------------------------------------------------ a stated rate
def test_a_stated_rate_gives_steps_x_seconds_x_devices(workdir: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    ["launcher.seconds_per_step=36", "launcher.price_per_device_hour=0.5",
                     "launcher.currency=EUR"])
    est = sweep_estimate(sw, workdir / "results")
    assert est.rate is not None and est.rate.samples == 0 and est.unit == "CPU-hours"
    # 4 runs x 4 steps x 36 s x 1 CPU = 0.16 CPU-hours
    assert est.total == pytest.approx(4 * 4 * 36 / 3600)
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "--dry-run", "--results",
                 str(workdir / "results"), "launcher.seconds_per_step=36",
                 "launcher.price_per_device_hour=0.5", "launcher.currency=EUR"]) == 0
    out = capsys.readouterr().out
    assert "launcher.seconds_per_step = 36" in out
    assert "study" in out and "0.16" in out and "0.08 EUR" in out


def test_no_estimate_and_a_budget_is_refused(workdir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    results = workdir / "results"
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "--results", str(results),
                 "budget.device_hours=5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "budget.device_hours" in err and "cannot be checked" in err
    assert not results.exists()


# ------------------------------------------------------------------ measured runs
@pytest.mark.slow
def test_finished_runs_give_the_estimate_and_a_budget_below_it_is_refused(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = workdir / "results"
    smoke = str(workdir / "sweeps" / "smoke.yaml")
    assert main(["sweep", smoke, "launcher=inline", "--results", str(results)]) == 0
    runs = SweepDir(results / "smoke").run_dirs()
    assert len(runs) == 4
    costs = [read_cost(rd) for rd in runs]
    per_step = [c.device_hours / c.steps for c in costs]  # type: ignore[operator]

    # two more seeds: measured from the four completed runs (other seeds, same work)
    sw = load_sweep(smoke, ["seeds=[0,1,2,3]"])
    est = sweep_estimate(sw, results)
    assert est.rate is not None and est.rate.samples == 4
    assert est.rate.device_hours == pytest.approx(sum(per_step) / 4)
    assert est.rate.low == pytest.approx(min(per_step))
    spent = sum(c.device_hours for c in costs)  # type: ignore[misc]
    assert est.spent == pytest.approx(spent)
    assert est.total == pytest.approx(spent + 4 * 4 * est.rate.device_hours)
    capsys.readouterr()
    assert main(["sweep", smoke, "--dry-run", "--results", str(results),
                 "seeds=[0,1,2,3]"]) == 0
    out = capsys.readouterr().out
    assert "4 completed runs in" in out and "same model and layout" in out

    # a budget below the estimate: one line, exit 2, nothing written
    before = snapshot(results)
    low = f"budget.device_hours={est.total * 0.5:.9f}"
    assert main(["sweep", smoke, "--results", str(results), "seeds=[0,1,2,3]", low]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "budget.device_hours" in err and "exceeds" in err
    assert snapshot(results) == before
    assert main(["sweep", smoke, "--dry-run", "--results", str(results), "seeds=[0,1,2,3]",
                 low]) == 2
    assert "EXCEEDED" in capsys.readouterr().out
    # one above it passes the check (the launch itself is not needed here)
    check_budget(load_sweep(smoke, ["seeds=[0,1,2,3]",
                                    f"budget.device_hours={est.total * 2:.9f}"]), results)
    # another layout (more threads per run) is not measured by these runs
    other = load_sweep(smoke, ["backend.local.num_threads=2"])
    assert work_key(other.runs[0].identity) != work_key(sw.runs[0].identity)
    assert sweep_estimate(other, results).rate is None
