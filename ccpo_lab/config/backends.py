"""The backend registry, by strings: each backend kind's settings dataclass and the module
implementing it, named here and imported on use (configuration and the launchers sit below
the backends and import none of them; ``estimators/spec.py`` names estimator classes the
same way, ``config/launchers/kinds.py`` the launchers).

A backend's runner module (``ccpo_lab.backends.<kind>.runner``, beside its settings) exposes
the contract :mod:`ccpo_lab.backends` describes; the dispatchers below (:func:`needs`,
:func:`check_sweep`, :func:`resume_step`, :func:`describe`) are how everything under the
backends asks it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.placement import Needs, Placement
    from ccpo_lab.runs.layout import RunDir


BACKENDS: dict[str, str] = {
    "local": "ccpo_lab.backends.local.settings:LocalBackendConfig",
    "verl": "ccpo_lab.backends.verl.settings:VerlBackendConfig",
}
"""Backend kind -> its settings dataclass, ``"module:Class"``: named here, imported on use
(configuration sits below the backends and imports none of them)."""


def backend_settings(kind: str) -> Any:
    """The settings dataclass of backend ``kind`` (:data:`BACKENDS`), imported now.

    :class:`BackendConfig`'s field annotations call it, so ``typing.get_type_hints`` (the
    schema readers') resolves them to the settings class when a sweep is read.
    """
    module, _, name = BACKENDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def backend_runner(kind: str) -> Any:
    """The module implementing backend ``kind``: ``runner`` beside its settings module
    (``ccpo_lab.backends.<kind>.runner``), imported now: the one resolution of a backend's
    code from its kind, which the backend registry, the launchers' plans and the generic
    job (:mod:`ccpo_lab.runs.execute`) all ask."""
    if kind not in BACKENDS:
        raise ValueError(f"unknown backend {kind!r}; valid: {list(BACKENDS)}")
    package = BACKENDS[kind].partition(":")[0].rpartition(".")[0]
    return importlib.import_module(f"{package}.runner")


def needs(run: RunConfig) -> Needs:
    """What ``run`` needs, as its backend declares it."""
    result: Needs = backend_runner(run.backend.kind).needs(run)
    return result


def check_sweep(runs: Sequence[RunConfig], run_dirs: Sequence[RunDir | None]) -> None:
    """Every backend's ``check_sweep`` over its runs of a sweep (with their planned
    directories, None for a refused run); raises :class:`ccpo_lab.errors.UserError`."""
    for kind in sorted({r.backend.kind for r in runs}):
        hook = getattr(backend_runner(kind), "check_sweep", None)
        if hook is not None:
            mine = [(r, d) for r, d in zip(runs, run_dirs, strict=True) if r.backend.kind == kind]
            hook([r for r, _ in mine], [d for _, d in mine])


def missing_job_modules(runs: Sequence[RunConfig]) -> list[tuple[str, str, str]]:
    """``(backend kind, module, how to install it)`` for each module a backend's job
    imports (its runner's ``job_requires(run)``, else its ``JOB_REQUIRES``: ``((module,
    install hint), ...)``; a run's environment may add its own) that this
    interpreter cannot find, for the runs whose job runs this interpreter (``needs(run)
    .python`` None): a base install of ccpo-lab has no torch or alfworld."""
    import importlib.util

    out: list[tuple[str, str, str]] = []
    for run in runs:
        if needs(run).python is not None:
            continue
        runner = backend_runner(run.backend.kind)
        per_run = getattr(runner, "job_requires", None)
        wanted = per_run(run) if per_run else getattr(runner, "JOB_REQUIRES", ())
        for module, hint in wanted:
            found = (run.backend.kind, module, hint)
            if found not in out and importlib.util.find_spec(module) is None:
                out.append(found)
    return out


def resume_step(run: RunConfig, run_dir: RunDir) -> int | None:
    """The step of the checkpoint ``run`` would resume from in ``run_dir`` now (None: it
    starts from step 0), as its backend finds it."""
    step = backend_runner(run.backend.kind).resume_step(run_dir)
    return None if step is None else int(step)


def describe(run: RunConfig, run_dir: RunDir, placement: Placement) -> str:
    """What executing ``run`` would run where ``placement`` says, as a command line."""
    import shlex

    mod = backend_runner(run.backend.kind)
    if hasattr(mod, "describe"):
        return str(mod.describe(run, run_dir, placement))
    return shlex.join(["python", "-m", "ccpo_lab.runs.execute", str(run_dir.path)])
