"""Training backends: ``local`` (CPU, generated ALFWorld games) and ``verl`` (GPU clusters).

Each backend module exposes ``train(run, run_dir)`` and ``describe(run, run_dir)``, and
may expose ``check_sweep(runs, run_dirs)`` (checks over a whole sweep, run before anything
is written); this module dispatches on ``run.backend.kind`` and imports the backend lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.runs.layout import RunDir

_MODULES = {"local": "ccpo_lab.backends.local.runner", "verl": "ccpo_lab.backends.verl.runner"}


def backend_module(kind: str) -> Any:
    """The module implementing backend ``kind``."""
    try:
        name = _MODULES[kind]
    except KeyError:
        raise ValueError(f"unknown backend {kind!r}; valid: {sorted(_MODULES)}") from None
    return importlib.import_module(name)


def check_sweep(runs: Sequence[RunConfig], run_dirs: Sequence[RunDir | None]) -> None:
    """Every backend's ``check_sweep`` over its runs of a sweep (with their planned
    directories, None for a refused run); raises :class:`ccpo_lab.errors.UserError`."""
    for kind in sorted({r.backend.kind for r in runs}):
        hook = getattr(backend_module(kind), "check_sweep", None)
        if hook is not None:
            mine = [(r, d) for r, d in zip(runs, run_dirs, strict=True) if r.backend.kind == kind]
            hook([r for r, _ in mine], [d for _, d in mine])


def describe(run: RunConfig, run_dir: RunDir) -> str:
    """What executing ``run`` would run, as a shell-quoted command line."""
    import shlex

    mod_name = _MODULES[run.backend.kind]
    try:
        mod = importlib.import_module(mod_name)
    except ImportError:
        mod = None
    if mod is not None and hasattr(mod, "describe"):
        return str(mod.describe(run, run_dir))
    return shlex.join(["python", "-m", "ccpo_lab.runs.execute", str(run_dir.path)])
