"""The estimator registry: one entry per estimator validates AND builds it (issue 13.3).

A toy estimator registered from this test (a parameter dataclass + an Estimator subclass +
one ``register_estimator`` call) validates, runs, and appears in the arms listing and
validation, like a shipped one.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ccpo_lab.cli.main import main
from ccpo_lab.config.arms import load_arm
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.estimators import (
    ESTIMATOR_PARAMS,
    EstimatorParams,
    ParamError,
    StepBatch,
    available_estimators,
    get_estimator,
    param,
    register_estimator,
    resolve_params,
)
from ccpo_lab.estimators.base import Estimator, EstimatorOutput
from ccpo_lab.estimators.grouping import episode_scores
from ccpo_lab.estimators.spec import entry, estimator_names, unregister_estimator

from .conftest import rows


@dataclasses.dataclass(frozen=True)
class ToyParams(EstimatorParams):
    """Toy: the episode score times a scale (no normalisation)."""

    scale: float = param(2.0, low=0.0, high=10.0)
    """Multiplier of the episode score."""
    kind: str = param("plain", choices=("plain", "negated"))
    """plain = +score, negated = -score."""

    def lint(self) -> list[str]:
        return ["scale 0 zeroes everything"] if self.scale == 0 else []


class Toy(Estimator):
    config: ToyParams

    def compute(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        sign = -1.0 if cfg.kind == "negated" else 1.0
        adv = sign * cfg.scale * episode_scores(batch.reward.to(torch.float64), batch)
        return EstimatorOutput(advantages=adv.to(batch.reward.dtype), diagnostics={},
                               episode_term=adv.to(batch.reward.dtype),
                               step_term=torch.zeros_like(batch.reward))


@pytest.fixture
def toy() -> Iterator[str]:
    register_estimator("toy", ToyParams, Toy)
    try:
        yield "toy"
    finally:
        unregister_estimator("toy")


def batch() -> StepBatch:
    return StepBatch(**rows(("T", "A", ["s", "t"], [0.0, 1.0]), ("T", "B", ["s"], [3.0])))


def test_every_registered_estimator_loads_and_runs() -> None:
    for name in estimator_names():
        cls = entry(name).load()
        assert issubclass(cls, Estimator)
        est = get_estimator(name)
        assert est.name == name and type(est) is cls
        assert est.params == resolve_params(name, {})
        out = est(batch())
        assert out.advantages.shape == (3,)


def test_toy_validates_and_runs(toy: str) -> None:
    assert toy in available_estimators() and toy in ESTIMATOR_PARAMS
    est = get_estimator(toy, scale=3.0)
    assert est.params == {"gamma": 0.95, "mode": "mean_std_norm", "epsilon": 1e-6,
                          "invalid_penalty": 0.1, "semantics": "described", "scale": 3.0,
                          "kind": "plain"}
    assert est(batch()).advantages.tolist() == [3.0, 3.0, 9.0]
    assert get_estimator(toy, kind="negated")(batch()).advantages.tolist() == [-2.0, -2.0, -6.0]
    with pytest.raises(ParamError) as err:
        get_estimator(toy, scale=11)
    assert err.value.key == "estimator.scale" and "float in [0.0, 10.0]" in str(err.value)
    with pytest.raises(ParamError) as err:
        get_estimator(toy, gate="hard")
    assert "scale" in str(err.value) and "kind" in str(err.value)
    doc = {p.name: p.doc for p in ESTIMATOR_PARAMS[toy]}
    assert doc["scale"] == "Multiplier of the episode score."
    assert doc["gamma"].startswith("Discount")  # inherited fields keep their docs


def test_toy_in_arms_listing_and_validation(toy: str, workdir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    arms = workdir / "arms"
    (arms / "toy-arm.yaml").write_text(
        "description: A toy arm. For tests.\nestimator: {name: toy, scale: 0}\n")
    arm = load_arm("toy-arm", arms)
    assert arm.estimator.params["scale"] == 0.0
    assert arm.warnings == ["scale 0 zeroes everything"]
    assert main(["arms", "list", "--arms-dir", str(arms)]) == 0
    assert "toy-arm" in capsys.readouterr().out
    assert main(["arms", "show", "toy-arm", "--docs", "--arms-dir", str(arms)]) == 0
    shown = capsys.readouterr()
    assert "scale: 0.0" in shown.out and "Multiplier of the episode score." in shown.out
    assert "scale 0 zeroes everything" in shown.err
    (arms / "bad-toy.yaml").write_text("estimator: {name: toy, scale: -1}\n")
    with pytest.raises(ParamError) as err:
        load_arm("bad-toy", arms)
    assert str(err.value).startswith(f"{arms / 'bad-toy.yaml'}: estimator.scale: out of range")
    (workdir / "sweeps" / "t.yaml").write_text("name: t\narms: [grpo, toy-arm]\nseeds: [0]\n")
    runs = load_sweep(workdir / "sweeps" / "t.yaml").runs
    toy_run = runs[1]
    est = get_estimator(toy_run.estimator.name, **toy_run.estimator.params)  # runs, too
    assert est(batch()).advantages.tolist() == [0.0, 0.0, 0.0]


def test_unregistered_estimator_fails_validation_not_training(workdir: Path) -> None:
    (workdir / "arms" / "ghost.yaml").write_text("estimator: {name: toy}\n")
    with pytest.raises(ParamError, match="unknown estimator"):
        load_arm("ghost", workdir / "arms")


def test_registration_refuses_bad_entries() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_estimator("grpo", ToyParams, Toy)
    with pytest.raises(ValueError, match="no module"):
        register_estimator("ghost", ToyParams, "ccpo_lab.estimators.no_such_module:Ghost")
    assert "ghost" not in estimator_names()

    @dataclasses.dataclass(frozen=True)
    class Bad(EstimatorParams):
        items: list = param(None)  # type: ignore[type-arg]

    with pytest.raises(TypeError, match="parameter kind"):
        register_estimator("bad", Bad, Toy)
    assert "bad" not in estimator_names()


def test_validation_stays_torch_free() -> None:
    code = ("import sys; from ccpo_lab.config.arms import load_arm; "
            "from ccpo_lab.estimators.spec import ESTIMATOR_PARAMS; "
            "[load_arm(n) for n in ('grpo', 'gigpo', 'ccpo-return-hard-fbjw')]; "
            "[p.doc for n in ESTIMATOR_PARAMS for p in ESTIMATOR_PARAMS[n]]; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parents[2])


def test_readme_parameter_table_lists_every_parameter() -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "docs" / "estimators.md").read_text()
    table = readme.split("| estimator | parameters (default) |", 1)[1].split("\n\n", 1)[0]
    for name in estimator_names():
        for p in ESTIMATOR_PARAMS[name]:
            assert f"`{p.name}` (" in table, (name, p.name)
            cell = table.split(f"`{p.name}` (", 1)[1].split(")", 1)[0]
            if p.kind is bool:
                assert str(p.default).lower() in cell, (name, p.name, cell)
            elif p.kind is str:
                assert cell.startswith(f"`{p.default}`"), (name, p.name, cell)
            else:
                numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", cell)]
                assert numbers and numbers[0] == p.default, (name, p.name, cell)
