"""Where tracking goes (issue 35): one precedence for every MLflow and W&B setting.

Highest first: the command's flag (``sync --uri``, ``--experiment``, ``--wandb-mode``,
``--wandb-project``, ``--wandb-entity``, or a value a caller passes explicitly), the
environment variable MLflow or W&B itself reads (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``, ``WANDB_MODE``, ``WANDB_PROJECT``, ``WANDB_ENTITY``), the
sweep's ``tracking`` section (its ``sweep.json``), then ccpo-lab's default. An empty (or
blank) value counts as unset at every level. When an environment variable decides and the
sweep names something else (or nothing), one line says where it goes and why
(:attr:`MlflowTarget.notes`, :attr:`WandbTarget.notes`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from ccpo_lab.errors import UserError
from ccpo_lab.runs.wandb_run import WandbSettings, mapping, wandb_settings

Source = Literal["flag", "env", "sweep", "default"]
"""Which level decided a setting."""
D = TypeVar("D", bound=str | None)
ENV_URI, ENV_EXPERIMENT = "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"
ENV_MODE, ENV_PROJECT, ENV_ENTITY = "WANDB_MODE", "WANDB_PROJECT", "WANDB_ENTITY"
SYNC_MODES = ("online", "offline")
"""The W&B modes a sync sends in."""


def resolve_tracking_target(flag: str | None, env: str | None, sweep_value: str | None,
                            default: D) -> tuple[str | D, Source]:
    """``(value, source)``: the flag, else the environment's value, else the sweep's, else
    ``default``; an empty or blank value counts as unset."""
    levels: tuple[tuple[str | None, Source], ...] = (
        (flag, "flag"), (env, "env"), (sweep_value, "sweep"))
    for value, source in levels:
        if value is not None and value.strip():
            return value, source
    return default, "default"


def env_value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The environment variable ``name``; None when unset or blank."""
    value = (os.environ if environ is None else environ).get(name, "")
    return value if value.strip() else None


def _text(value: Any) -> str | None:
    """A setting of the sweep file as text; None when absent or empty."""
    return str(value) if value not in (None, "") else None


@dataclass(frozen=True)
class Setting:
    """One setting resolved: its value, who decided it, and the line to say (or None)."""

    value: str | None
    source: Source
    note: str | None


def resolve_setting(what: str, env_name: str, sweep_key: str, flag: str | None,
                    sweep_value: str | None, default: str | None, shown_default: str,
                    environ: Mapping[str, str] | None = None) -> Setting:
    """Resolve ``what`` (e.g. ``MLflow store``) by :func:`resolve_tracking_target`; the note
    when the environment decides over what the sweep names (or its default)."""
    value, source = resolve_tracking_target(flag, env_value(env_name, environ), sweep_value,
                                            default)
    if source != "env" or value == sweep_value:
        return Setting(value, source, None)
    other = (f"the sweep's {sweep_key} ({sweep_value})" if sweep_value
             else f"the default ({shown_default})")
    return Setting(value, source, f"{what} from {env_name} ({value}); {other} is not used")


@dataclass(frozen=True)
class MlflowTarget:
    """Where a sweep's MLflow sync goes."""

    uri: str
    uri_source: Source
    experiment: str
    experiment_source: Source
    notes: tuple[str, ...]
    """One line per setting an environment variable decided (see the module)."""


STORE = "mlflow.db"
"""The file name of a sweep's own MLflow store."""


def default_uri(sweep_dir: Path) -> str:
    """``sqlite:///<absolute sweep dir>/mlflow.db``, the path percent-encoded (SQLAlchemy
    decodes it): a ``?``, ``#`` or ``%20`` in a results path is part of the file name,
    never a query, a fragment or an escape."""
    from urllib.parse import quote

    return "sqlite:///" + quote(str(Path(sweep_dir).resolve() / STORE), safe="/")


def mlflow_target(root: Path, manifest: Mapping[str, Any], uri: str | None = None,
                  experiment: str | None = None, environ: Mapping[str, str] | None = None
                  ) -> MlflowTarget:
    """The store and experiment of the sweep in ``root`` (``manifest``: its
    :func:`~ccpo_lab.runs.sweep_runs.read_sweep_config`): ``uri``/``experiment`` >
    ``MLFLOW_TRACKING_URI``/``MLFLOW_EXPERIMENT_NAME`` > its ``tracking.uri``/
    ``tracking.experiment`` > ``sqlite:///<sweep dir>/mlflow.db``/the sweep's name."""
    tracking = mapping(manifest.get("tracking"))
    store_default = default_uri(root)
    name = str(manifest.get("name") or root.name)
    u = resolve_setting("MLflow store", ENV_URI, "tracking.uri", uri,
                        _text(tracking.get("uri")), store_default, store_default, environ)
    e = resolve_setting("MLflow experiment", ENV_EXPERIMENT, "tracking.experiment",
                        experiment, _text(tracking.get("experiment")), name,
                        f"the sweep's name, {name}", environ)
    return MlflowTarget(str(u.value), u.source, str(e.value), e.source,
                        tuple(n for n in (u.note, e.note) if n))


@dataclass(frozen=True)
class WandbTarget:
    """Where a sweep's W&B sync goes."""

    settings: WandbSettings
    notes: tuple[str, ...]
    """One line per setting an environment variable decided (see the module)."""


def _check_mode(mode: str | None, source: Source) -> str:
    """The resolved mode; one a sync cannot send in (``WANDB_MODE=disabled``) is refused."""
    if mode not in SYNC_MODES:
        key = {"env": ENV_MODE, "flag": "--wandb-mode"}.get(source, "tracking.wandb.mode")
        raise UserError(f"{key} is not a mode `sync --wandb` sends in (unset it, or pass "
                        "--wandb-mode)", key=key, value=mode, valid=SYNC_MODES)
    return str(mode)


def wandb_target(manifest: Mapping[str, Any], sweep: str, mode: str | None = None,
                 project: str | None = None, entity: str | None = None,
                 environ: Mapping[str, str] | None = None) -> WandbTarget:
    """W&B settings of a sync: each flag > ``WANDB_MODE``/``WANDB_PROJECT``/``WANDB_ENTITY``
    > the sweep's ``tracking.wandb`` (a ``disabled`` mode names none) > ``online``, the
    sweep's name, the logged-in user's default entity.

    Raises:
        UserError: the mode that decides is neither ``online`` nor ``offline``.
    """
    w = mapping(mapping(manifest.get("tracking")).get("wandb"))
    swept = _text(w.get("mode"))
    m = resolve_setting("W&B mode", ENV_MODE, "tracking.wandb.mode", mode,
                        None if swept == "disabled" else swept, "online", "online", environ)
    p = resolve_setting("W&B project", ENV_PROJECT, "tracking.wandb.project", project,
                        _text(w.get("project")), sweep, f"the sweep's name, {sweep}", environ)
    e = resolve_setting("W&B entity", ENV_ENTITY, "tracking.wandb.entity", entity,
                        _text(w.get("entity")), None, "the logged-in user's entity", environ)
    settings = wandb_settings(manifest, sweep, mode=_check_mode(m.value, m.source),
                              project=p.value, entity=e.value)
    assert settings is not None  # the mode is online or offline
    return WandbTarget(settings, tuple(n.note for n in (m, p, e) if n.note))
