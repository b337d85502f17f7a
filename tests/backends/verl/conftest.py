"""Fixtures of the verl backend tests: shipped sweeps resolved into runs and run dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.config.schema import RunConfig
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.placement import Placement
from ccpo_lab.runs.layout import RunDir

REPO = Path(__file__).resolve().parents[3]
SHIPPED = ("alfworld-qwen7b-slurm", "alfworld-qwen7b-node")


def sweep_runs(name: str, overrides: list[str] | None = None) -> list[RunConfig]:
    """Runs of ``sweeps/<name>.yaml``."""
    return load_sweep(REPO / "sweeps" / f"{name}.yaml", overrides or []).runs


def planned(name: str, overrides: list[str] | None = None) -> Placement:
    """The placement the launcher of ``sweeps/<name>.yaml`` plans for task 0 of a run."""
    from ccpo_lab.launch.plan import launcher_for

    sw = load_sweep(REPO / "sweeps" / f"{name}.yaml", overrides or [])
    return launcher_for(sw, Path("/results")).placement()


def run_dir(results: Path, run: RunConfig) -> RunDir:
    """Where a run lives under ``results``."""
    return RunDir(results / run.sweep / run.arm / f"seed-{run.seed}")


@pytest.fixture
def slurm_runs() -> list[RunConfig]:
    """The 15 runs of the shipped Slurm sweep."""
    return sweep_runs("alfworld-qwen7b-slurm")
