"""Defect 5: ccpo-lab in a trainer environment without touching its torch / vLLM / verl."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ccpo_lab.backends.verl import trainer_env
from tests.conftest import REPO


def test_requirements_are_only_what_verl_agents_environment_lacks() -> None:
    reqs = trainer_env.requirements()
    assert reqs == ["submitit==1.5.4"]
    assert not any(r.startswith(("torch", "verl", "vllm", "flash")) for r in reqs)


def test_check_passes_here_and_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    r = subprocess.run([sys.executable, "-m", "ccpo_lab.backends.verl.trainer_env", "--check"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok    import ccpo_lab.runs.execute" in r.stdout
    monkeypatch.setitem(sys.modules, "submitit", None)      # an environment without it
    for mod in [m for m in sys.modules if m.startswith(("ccpo_lab.launch.job",
                                                         "ccpo_lab.runs.execute"))]:
        monkeypatch.delitem(sys.modules, mod)
    lines, failures = trainer_env.check_lines()
    assert failures >= 1
    assert any(ln.startswith("FAIL  submitit:") and "pip install --no-deps 'submitit==1.5.4'"
               in ln for ln in lines)


def test_ccpo_labs_pins_would_replace_the_trainers_torch() -> None:
    """Why a plain ``pip install ccpo-lab`` is not the supported way."""
    import importlib.metadata as md

    requires = md.requires("ccpo-lab") or []
    assert any(r.replace(" ", "").startswith("torch==") for r in requires)
    assert any(r.replace(" ", "").startswith("verl==") for r in requires)


def test_a_sweep_without_a_design_loads_without_scipy() -> None:
    """A trainer environment (verl-agent's, ccpo-lab added with --no-deps) may lack scipy,
    pandas and MLflow: loading the shipped verl sweeps and their runs must not import them
    (it did: the adaptive design's module, needing scipy, was imported for every sweep;
    the contract test caught it in a CPU trainer environment)."""
    code = (
        "import sys\n"
        "from ccpo_lab.config.sweep import load_sweep\n"
        "for f in ('sweeps/alfworld-qwen7b-slurm.yaml', 'sweeps/alfworld-qwen7b-node.yaml'):\n"
        "    sw = load_sweep(f)\n"
        "    assert sw.runs and sw.design is None\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'scipy', 'pandas', 'mlflow', 'matplotlib'}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, check=False, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
