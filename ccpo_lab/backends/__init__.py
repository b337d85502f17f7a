"""Training backends: ``local`` (CPU, generated ALFWorld games) and ``verl`` (GPU clusters).

A backend is a settings dataclass (a field of :class:`~ccpo_lab.config.schema.BackendConfig`,
named by its kind: the backend registry) and a module ``ccpo_lab.backends.<kind>.runner``
exposing:

- ``needs(run) -> Needs``: what one run needs (nodes, GPUs per node, CPUs), from the
  backend's own settings (the placement contract, :mod:`ccpo_lab.placement`);
- ``train(run, run_dir, placement) -> dict``: train the run to completion where its
  launcher placed it (task 0), resuming from its checkpoint; returns a summary; it may
  take ``progress=`` (called ``(step, total, last_val)`` per step: the executor prints the
  run's log line from it);
- ``describe(run, run_dir, placement) -> str``: what ``train`` would execute (dry run);
- ``resume_step(run_dir) -> int | None``: the step of the checkpoint ``train`` would
  resume from now (None: it starts at step 0), read from the files alone, cheaply;
- optionally ``check_sweep(runs, run_dirs)`` (checks over a whole sweep, before anything
  is written) and ``worker(run, run_dir, placement)`` (tasks > 0 of a multi-node run).

What the report and the CLI ask of a backend is read from its package
(``ccpo_lab.backends.<kind>``, whose ``__init__`` imports nothing heavy: the verl-agent
trainer imports the hooks below it) and from an optional module beside its runner:

- ``recorded_model(backend, backend_runtime) -> str | None``: the model a run trained,
  from its ``config.yaml`` sections (absent: the backend records none);
- ``PUBLISHED_SETUP``: None when its runs may be compared with the published ALFWorld
  numbers, else why not (absent: a generic reason);
- ``ccpo_lab.backends.<kind>.doctor``: ``run_doctor(sweep, results)`` and
  ``run_on_node(sweep, results)``, the machine checks of ``ccpo-lab doctor``.

Configuration names each backend by strings (:mod:`ccpo_lab.config.backends`, which also
dispatches ``needs``/``check_sweep``/``resume_step``/``describe`` to the runner); this
module adds what the layers above ask of a backend's package, imported lazily.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ccpo_lab.config.backends import (  # noqa: F401 (the backend registry's dispatchers)
    backend_runner,
    check_sweep,
    describe,
    needs,
    resume_step,
)


def backend_module(kind: str) -> Any:
    """The module implementing backend ``kind`` (``ccpo_lab.backends.<kind>.runner``,
    :func:`ccpo_lab.config.backends.backend_runner`)."""
    return backend_runner(kind)


def backend_package(kind: str | None) -> ModuleType | None:
    """The package ``ccpo_lab.backends.<kind>`` (None for a kind no backend has: a run
    imported from elsewhere, an unreadable one)."""
    from ccpo_lab.config.schema import BackendConfig

    if kind not in BackendConfig.kinds():
        return None
    return importlib.import_module(f"ccpo_lab.backends.{kind}")


def recorded_model(kind: str | None, backend: Mapping[str, Any],
                   runtime: Mapping[str, Any]) -> Any:
    """The model a run of backend ``kind`` trained, read from its ``config.yaml``'s
    ``backend`` and ``backend_runtime`` sections (None: the backend records none)."""
    hook = getattr(backend_package(kind), "recorded_model", None)
    return None if hook is None else hook(backend, runtime)


def published_setup(kind: str) -> str | None:
    """None when runs of backend ``kind`` may be compared with the published numbers (the
    report's baselines), else why not."""
    generic = f"backend {kind!r} is not the published setup"
    note: str | None = getattr(backend_package(kind), "PUBLISHED_SETUP", generic)
    return note


def doctor_kinds() -> tuple[str, ...]:
    """The backends with machine checks (a ``doctor`` module beside their runner)."""
    from ccpo_lab.config.schema import BackendConfig

    return tuple(k for k in BackendConfig.kinds()
                 if importlib.util.find_spec(f"ccpo_lab.backends.{k}.doctor") is not None)


def doctor_module(kind: str) -> Any:
    """Backend ``kind``'s machine checks (``run_doctor``, ``run_on_node``)."""
    return importlib.import_module(f"ccpo_lab.backends.{kind}.doctor")
