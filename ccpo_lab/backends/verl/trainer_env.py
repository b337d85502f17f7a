"""ccpo-lab inside a trainer environment (verl-agent's), without touching its torch/vLLM/verl.

The supported way in is ``ccpo-lab install-into PYTHON``
(:mod:`ccpo_lab.backends.verl.install`): the base install, the trainer's packages pinned
where they are. The older way, which leaves ``pip check`` listing ccpo-lab's base
requirements as missing::

    PY=/path/to/verl-agent-env/bin/python      # backend.verl.python of the sweep
    $PY -m pip install --no-deps ccpo-lab      # or: --no-deps -e <ccpo-lab clone>
    $PY -m pip install --no-deps $($PY -m ccpo_lab.backends.verl.trainer_env --requirements)
    $PY -m ccpo_lab.backends.verl.trainer_env --check

The job side of ccpo-lab (``ccpo_lab.runs.execute``, the verl backend, the hooks, the
estimators) needs only what :data:`NEEDS` lists; verl-agent's environment has all of it
but submitit. ``--requirements`` prints the ones to add (one per line), ``--check`` imports
every one of them and ccpo-lab's job-side modules in this interpreter and prints one line
each (exit 0 when all import). ``ccpo-lab doctor`` runs the check with the sweep's
``backend.verl.python``, the interpreter the jobs run (the ``slurm`` and ``local``
launchers start it: ``Needs.python``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    """A module ccpo-lab's job side imports, and the distribution that provides it."""

    module: str
    """Import name."""
    dist: str
    """Distribution name (for pip)."""
    spec: str = ""
    """Version specifier ccpo-lab asks for when it installs it (``--requirements``)."""
    install: bool = False
    """Whether ``--requirements`` lists it (verl-agent's environment usually lacks it)."""


NEEDS: tuple[Need, ...] = (
    Need("numpy", "numpy"),
    Need("torch", "torch"),
    Need("pandas", "pandas"),
    Need("yaml", "pyyaml"),
    Need("omegaconf", "omegaconf"),
    Need("pyarrow", "pyarrow"),
    Need("ray", "ray"),
    Need("cloudpickle", "cloudpickle"),
    Need("typing_extensions", "typing-extensions"),
    Need("submitit", "submitit", "==1.5.4", install=True),
)
"""What the job side imports (the Slurm/local job, the verl backend, hooks, estimators)."""

JOB_MODULES: tuple[str, ...] = (
    "ccpo_lab.runs.execute",
    "ccpo_lab.launch.job",
    "ccpo_lab.backends.verl.runner",
    "ccpo_lab.backends.verl.datafiles",
    "ccpo_lab.backends.verl.agent.trainer",
    "ccpo_lab.backends.verl.agent.hooks",
    "ccpo_lab.backends.verl.agent.patches",
    "ccpo_lab.estimators.ccpo",
    "ccpo_lab.estimators.gigpo",
    "ccpo_lab.estimators.grpo",
)
"""ccpo-lab modules a job imports in the trainer environment."""

UNTOUCHED: tuple[str, ...] = ("torch", "vllm", "verl", "flash-attn", "transformers")
"""The trainer's own packages, reported (never installed or pinned by ccpo-lab here)."""


def requirements() -> list[str]:
    """Requirement lines to install with ``--no-deps`` on top of verl-agent's environment."""
    return [f"{n.dist}{n.spec}" for n in NEEDS if n.install]


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def check_lines() -> tuple[list[str], int]:
    """One line per need, job module and trainer package; the number of failures."""
    lines: list[str] = []
    failures = 0
    for n in NEEDS:
        try:
            importlib.import_module(n.module)
            lines.append(f"ok    {n.dist} {_version(n.dist) or '(version unknown)'}")
        except Exception as e:  # noqa: BLE001 - reported per line
            failures += 1
            fix = f"pip install --no-deps '{n.dist}{n.spec}'" if n.install else \
                "verl-agent's environment brings it: is this the trainer's interpreter?"
            lines.append(f"FAIL  {n.dist}: {type(e).__name__}: {e} ({fix})")
    for mod in JOB_MODULES:
        try:
            importlib.import_module(mod)
            lines.append(f"ok    import {mod}")
        except Exception as e:  # noqa: BLE001 - reported per line
            failures += 1
            lines.append(f"FAIL  import {mod}: {type(e).__name__}: {e}")
    for dist in UNTOUCHED:
        lines.append(f"info  {dist} {_version(dist) or 'not installed'} (the trainer's own)")
    return lines, failures


def main(argv: list[str] | None = None) -> int:
    """``--requirements`` or ``--check`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.backends.verl.trainer_env")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--requirements", action="store_true",
                   help="print what to pip install --no-deps beside ccpo-lab")
    g.add_argument("--check", action="store_true",
                   help="import what the job side needs, one line each")
    ns = ap.parse_args(argv)
    if ns.requirements:
        print("\n".join(requirements()))
        return 0
    lines, failures = check_lines()
    print(f"python {sys.executable}")
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
