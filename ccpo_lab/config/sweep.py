"""Sweep files: Hydra composition with command-line overrides, validation, run expansion.

``load_sweep("sweeps/demo.yaml", ["seeds=[0,1,2]", "launcher=slurm",
"launcher.partition=gpu"])`` reads the file, fills every schema default, lets Hydra's
compose API apply the overrides (``launcher=X`` / ``backend=X`` select the kind), validates
the result against :class:`~ccpo_lab.config.schema.SweepConfig`, loads the arms and expands
arms x seeds into frozen :class:`~ccpo_lab.config.schema.RunConfig` objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.arms import default_arms_dir, load_arm
from ccpo_lab.config.identity import to_plain
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.schema import (
    BACKENDS,
    LAUNCHERS,
    ArmConfig,
    RunConfig,
    SweepConfig,
)
from ccpo_lab.config.validate import build, check_range, field_names
from ccpo_lab.config.yamlio import check_name, read_yaml_mapping
from ccpo_lab.errors import UserError

COMMAND_LINE = "command line"
_KIND_GROUPS = {"launcher": LAUNCHERS, "backend": BACKENDS}


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep: its validated config, arms and runs."""

    config: SweepConfig
    """The composed, validated sweep configuration."""
    arms: tuple[ArmConfig, ...]
    """The sweep's arms, resolved."""
    source: str
    """The sweep file."""
    overrides: tuple[str, ...] = ()
    """Command-line overrides applied."""

    @property
    def name(self) -> str:
        """The sweep's name."""
        return self.config.name

    @property
    def runs(self) -> list[RunConfig]:
        """Every (arm, seed) run, arms outermost, in file order."""
        return [make_run(self.config, arm, seed) for arm in self.arms for seed in self.config.seeds]

    @property
    def reference_arm(self) -> str:
        """The arm comparisons are made against."""
        return self.config.analysis.reference or self.config.arms[0]

    @property
    def warnings(self) -> list[str]:
        """Lint warnings of every arm, prefixed with the arm name."""
        return [f"{a.name}: {w}" for a in self.arms for w in a.warnings]

    def sweep_dir(self, results: str | Path) -> Path:
        """``<results>/<sweep name>``."""
        return Path(results) / self.config.name


def make_run(sweep: SweepConfig, arm: ArmConfig, seed: int) -> RunConfig:
    """The resolved run of ``arm`` at ``seed`` (arm ``training`` overrides the protocol)."""
    protocol = sweep.protocol
    if arm.training:
        protocol = dataclasses.replace(protocol, **arm.training)
    return RunConfig(sweep=sweep.name, arm=arm.name, seed=seed, estimator=arm.estimator,
                     protocol=protocol, backend=sweep.backend, launcher=sweep.launcher)


def _schema_keys(path: Sequence[str]) -> list[str] | None:
    """Valid child keys at ``path`` of the sweep schema (None if ``path`` is a leaf)."""
    import typing

    cls: Any = SweepConfig
    for part in path:
        if not dataclasses.is_dataclass(cls) or part not in field_names(cls):
            return None
        cls = typing.get_type_hints(cls)[part]
    return field_names(cls) if dataclasses.is_dataclass(cls) else None


def _is_mapping_field(path: Sequence[str]) -> bool:
    """Whether ``path`` is a free-form ``dict`` field of the schema (``backend.verl.env``)."""
    import typing

    if not path or _schema_keys(path[:-1]) is None or path[-1] not in _schema_keys(path[:-1]):
        return False
    cls: Any = SweepConfig
    for part in path:
        cls = typing.get_type_hints(cls)[part]
    return typing.get_origin(cls) is dict


def _rewrite_overrides(overrides: Sequence[str]) -> tuple[list[str], set[str]]:
    """Check override keys against the schema; ``launcher=X`` -> ``launcher.kind=X``.

    Returns the rewritten overrides and the set of key paths they set.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    out, keys = [], set()
    for text in overrides:
        try:
            (ov,) = parser.parse_overrides([text])
        except HydraException as e:
            raise UserError(f"malformed override: {str(e).splitlines()[0]}", file=COMMAND_LINE,
                            value=text) from None
        key = ov.key_or_group
        if ov.package is not None or not ov.is_force_add() and not ov.is_add() and ov.is_delete():
            raise UserError("override not supported (use key=value)", file=COMMAND_LINE,
                            value=text)
        parts = key.split(".")
        if parts[0] in _KIND_GROUPS and len(parts) == 1:
            kind = ov.value()
            if kind not in _KIND_GROUPS[parts[0]]:
                raise UserError(f"unknown {parts[0]}", file=COMMAND_LINE, key=parts[0],
                                value=kind, valid=_KIND_GROUPS[parts[0]])
            out.append(f"{parts[0]}.kind={kind}")
            keys.add(f"{parts[0]}.kind")
            continue
        parent = _schema_keys(parts[:-1])
        if parent is None and len(parts) > 1 and _is_mapping_field(parts[:-1]):
            out.append("++" + text.lstrip("+"))     # an entry of a mapping: add or replace
            keys.add(key)
            continue
        if parent is None or parts[-1] not in parent:
            valid = parent if parent is not None else field_names(SweepConfig)
            raise UserError("unknown key in override", file=COMMAND_LINE, key=key,
                            valid=valid)
        if ov.is_add() or ov.is_force_add():
            text = text.lstrip("+")
        out.append(text)
        keys.add(key)
    return out, keys


def _compose(full: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``overrides`` to ``full`` with Hydra's compose API; return a plain dict."""
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node_name = "ccpo_lab_sweep"
    ConfigStore.instance().store(name=node_name, node=OmegaConf.create(full))
    try:
        with initialize(version_base=None, config_path=None):
            cfg = compose(config_name=node_name, overrides=overrides)
        composed = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as e:
        msg = str(e).splitlines()[0]
        raise UserError(f"cannot apply overrides: {msg}", file=COMMAND_LINE,
                        value=" ".join(overrides)) from None
    assert isinstance(composed, dict)
    return composed


def load_sweep(path: str | Path, overrides: Sequence[str] = (), *,
               arms_dir: str | Path | None = None) -> Sweep:
    """Read, compose, validate and expand a sweep file."""
    p = Path(path)
    raw = read_yaml_mapping(p, "sweep file")
    file = str(p)
    base = build(SweepConfig, raw, where=lambda _k: file)  # schema errors name the file
    rewritten, override_keys = _rewrite_overrides(overrides)

    def where(key: str) -> str:
        top = key.split("[")[0]
        return COMMAND_LINE if any(top == k or top.startswith(k + ".") for k in override_keys) \
            else file

    composed = _compose(to_plain(base), rewritten) if rewritten else to_plain(base)
    cfg = build(SweepConfig, composed, where=where)
    _check_sweep(cfg, where)
    adir = Path(arms_dir) if arms_dir else _arms_dir_for(cfg, p)
    arms = tuple(load_arm(name, adir, referrer=where("arms")) for name in cfg.arms)
    for arm in arms:
        if arm.training:
            _check_protocol(dataclasses.replace(cfg.protocol, **arm.training),
                            lambda _k, src=arm.source: src)
    if cfg.analysis.reference is not None and cfg.analysis.reference not in cfg.arms:
        raise UserError("reference arm is not in the sweep", file=where("analysis.reference"),
                        key="analysis.reference", value=cfg.analysis.reference, valid=cfg.arms)
    return Sweep(config=cfg, arms=arms, source=file, overrides=tuple(overrides))


def _arms_dir_for(cfg: SweepConfig, sweep_path: Path) -> Path:
    if cfg.arms_dir:
        d = Path(cfg.arms_dir)
        return d if d.is_absolute() else (sweep_path.parent / d)
    beside = sweep_path.resolve().parent.parent / "arms"
    return beside if beside.is_dir() else default_arms_dir()


def _check_sweep(cfg: SweepConfig, where: Any) -> None:
    """Value checks the schema's types cannot express."""
    if cfg.name == "???":
        raise UserError("missing sweep name", file=where("name"), key="name")
    check_name(cfg.name, file=where("name"), key="name")
    if not cfg.arms:
        raise UserError("no arms", file=where("arms"), key="arms", value=cfg.arms)
    for i, a in enumerate(cfg.arms):
        check_name(a, file=where("arms"), key=f"arms[{i}]")
    dupes = sorted({a for a in cfg.arms if cfg.arms.count(a) > 1})
    if dupes:
        raise UserError("duplicate arm names", file=where("arms"), key="arms", value=dupes)
    if not cfg.seeds:
        raise UserError("empty seed list", file=where("seeds"), key="seeds", value=cfg.seeds,
                        valid="a non-empty list of integers >= 0")
    for i, s in enumerate(cfg.seeds):
        check_range(s, low=0, high=2**31 - 1, key=f"seeds[{i}]", file=where("seeds"))
    if len(set(cfg.seeds)) != len(cfg.seeds):
        raise UserError("duplicate seeds", file=where("seeds"), key="seeds", value=cfg.seeds)
    for key, kind, valid in (("backend.kind", cfg.backend.kind, BACKENDS),
                             ("launcher.kind", cfg.launcher.kind, LAUNCHERS)):
        if kind not in valid:
            raise UserError(f"unknown {key.split('.')[0]}", file=where(key), key=key,
                            value=kind, valid=valid)
    _check_protocol(cfg.protocol, where)
    launcher = cfg.launcher
    for key in ("max_parallel", "time_min", "nodes", "cpus_per_task", "array_parallelism"):
        check_range(getattr(launcher, key), low=1, key=f"launcher.{key}",
                    file=where(f"launcher.{key}"))
    for key in ("gpus_per_run", "gpus_per_node", "max_num_timeout"):
        check_range(getattr(launcher, key), low=0, key=f"launcher.{key}",
                    file=where(f"launcher.{key}"))
    a = cfg.analysis
    check_range(a.confidence, low=0, high=1, low_open=True, high_open=True,
                key="analysis.confidence", file=where("analysis.confidence"))
    check_range(a.alpha, low=0, high=1, low_open=True, high_open=True, key="analysis.alpha",
                file=where("analysis.alpha"))
    check_range(a.power, low=0, high=1, low_open=True, high_open=True, key="analysis.power",
                file=where("analysis.power"))
    check_range(a.bootstrap_reps, low=100, key="analysis.bootstrap_reps",
                file=where("analysis.bootstrap_reps"))
    check_range(a.window_start, low=0, key="analysis.window_start",
                file=where("analysis.window_start"))


def _check_protocol(p: ProtocolConfig, where: Any) -> None:
    positive = ("total_steps", "train_batch_size", "group_size", "val_batch_size", "test_freq",
                "save_freq", "max_steps", "max_prompt_length", "max_response_length",
                "ppo_mini_batch_size", "ppo_epochs")
    for key in positive:
        check_range(getattr(p, key), low=1, key=f"protocol.{key}", file=where(f"protocol.{key}"))
    for key in ("lr", "train_temperature", "val_temperature"):
        check_range(getattr(p, key), low=0, low_open=True, key=f"protocol.{key}",
                    file=where(f"protocol.{key}"))
    for key in ("history_length", "kl_loss_coef", "entropy_coeff", "invalid_action_penalty",
                "clip_ratio", "env_seed"):
        check_range(getattr(p, key), low=0, key=f"protocol.{key}", file=where(f"protocol.{key}"))
    if p.kl_loss_type not in ("low_var_kl", "kl", "abs", "mse"):
        raise UserError("unknown KL estimator", file=where("protocol.kl_loss_type"),
                        key="protocol.kl_loss_type", value=p.kl_loss_type,
                        valid=["low_var_kl", "kl", "abs", "mse"])
