"""The GPU-cluster backend: verl-agent's trainer on real ALFWorld, with ccpo-lab's estimators.

- :mod:`.command` builds the trainer invocation (Hydra overrides, environment);
- :mod:`.runner` is the backend entry (``train``, ``describe``);
- :mod:`.layout` checks that every arm of a sweep shares one GPU / parallel layout;
- :mod:`.checkout` inspects a verl-agent checkout (commit, optional features);
- :mod:`.ray_cluster` starts a Ray cluster across a multi-node Slurm allocation;
- :mod:`.smoke` is the GPU smoke test behind ``scripts/gpu-smoke.sh``.

The hooks that put ccpo-lab's estimators into the trainer live in
:mod:`ccpo_lab.backends.verl.agent.hooks`. The trainer imports them with only what
:mod:`.trainer_env` lists, so this package imports nothing at import time.

What the report asks of the backend (:mod:`ccpo_lab.backends`): :func:`recorded_model` and
:data:`PUBLISHED_SETUP`; its machine checks are :mod:`.doctor`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PUBLISHED_SETUP: str | None = None
"""verl-agent on real ALFWorld is the published setup (the report still checks backbone
and protocol)."""


def recorded_model(backend: Mapping[str, Any], runtime: Mapping[str, Any]) -> Any:
    """The model a run trained: the one it resolved at run time, else its setting."""
    return runtime.get("model_path") or (backend.get("verl") or {}).get("model_path")
