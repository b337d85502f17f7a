"""Sweep files: Hydra composition with command-line overrides, validation, run expansion.

``load_sweep("sweeps/demo.yaml", ["seeds=[0,1,2]", "launcher=slurm",
"launcher.partition=gpu"])`` reads the file, fills every schema default, lets Hydra's
compose API apply the overrides (``launcher=X`` / ``backend=X`` select the kind), validates
every section against the schema (:class:`~ccpo_lab.config.schema.SweepConfig`, the
launcher's own settings class from :mod:`ccpo_lab.config.launchers.kinds`, each backend's
``validate``), loads the arms and expands arms x seeds into frozen
:class:`~ccpo_lab.config.schema.RunConfig` objects.

``launcher=X`` selects a launcher like a Hydra config group: the sweep file's launcher keys
apply when the file names the same kind, otherwise X starts from its defaults. Hydra's
sweep forms and ``~key`` are read by :mod:`ccpo_lab.config.overrides`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.adaptive import adaptive_design
from ccpo_lab.config.arms import load_arm
from ccpo_lab.config.armspath import ArmsPath, arms_path
from ccpo_lab.config.environments import ENVIRONMENTS, check_environments
from ccpo_lab.config.identity import to_plain
from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.launchers.kinds import build_settings, not_a_setting, settings_class
from ccpo_lab.config.overrides import COMMAND_LINE, as_element, reset
from ccpo_lab.config.protocol import LIMITS, ProtocolConfig
from ccpo_lab.config.schema import (
    BOOTSTRAP_REPS_RANGE,
    ArmConfig,
    BackendConfig,
    RunConfig,
    SweepConfig,
)
from ccpo_lab.config.validate import build, check_range, field_names
from ccpo_lab.config.yamlio import check_name, read_yaml_mapping
from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.config.design import AdaptiveDesign


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
    family: tuple[str, ...] = ()
    """Set on one environment of a sweep over several (:meth:`per_environment`): the
    sweep's environments. Its directory is then ``<results>/<name>/<environment>/``."""

    @property
    def name(self) -> str:
        """The sweep's name."""
        return self.config.name

    @property
    def environments(self) -> list[str]:
        """The environments the sweep runs on."""
        return list(self.config.environments)

    @property
    def environment(self) -> str:
        """The one environment of a single-environment sweep (or of one environment of a
        sweep over several); a ``ValueError`` for a sweep over several."""
        if len(self.config.environments) != 1:
            raise ValueError(f"sweep {self.name} runs on {self.config.environments}: take "
                             "per_environment() first")
        return self.config.environments[0]

    @property
    def multi_environment(self) -> bool:
        """True for a sweep over several environments (one directory each)."""
        return len(self.config.environments) > 1

    def per_environment(self) -> list[Sweep]:
        """One sweep per environment, each launched, listed and reported like any sweep
        in ``<results>/<name>/<environment>/``; a single-environment sweep is itself."""
        if not self.multi_environment:
            return [self]
        envs = tuple(self.config.environments)
        return [dataclasses.replace(self, config=dataclasses.replace(
            self.config, environments=[e]), family=envs) for e in envs]

    @property
    def runs(self) -> list[RunConfig]:
        """Every (arm, seed) run, arms outermost, in file order; over several environments,
        each environment's in turn (their directories: :meth:`per_environment`)."""
        return [make_run(self.config, arm, seed, env) for env in self.config.environments
                for arm in self.arms for seed in self.config.seeds]

    @property
    def reference_arm(self) -> str:
        """The arm comparisons are made against."""
        return self.config.analysis.reference or self.config.arms[0]

    @property
    def design(self) -> AdaptiveDesign | None:
        """The adaptive seed design of ``analysis.adaptive`` (None: fixed seeds)."""
        return adaptive_design(self.config.analysis, self.config.arms, self.config.seeds)

    def with_seeds(self, seeds: list[int]) -> Sweep:
        """The same sweep with ``seeds`` (e.g. those an adaptive design added); its
        :attr:`design` is not the sweep's any more (the listed seeds are its first look):
        take the design from the original."""
        return dataclasses.replace(self, config=dataclasses.replace(self.config, seeds=seeds))

    @property
    def warnings(self) -> list[str]:
        """Lint warnings of the arms, each once, prefixed with the arms it concerns."""
        arms: dict[str, list[str]] = {}
        for a in self.arms:
            for w in a.warnings:
                arms.setdefault(w, []).append(a.name)
        return [f"{', '.join(names)}: {w}" for w, names in arms.items()]

    def sweep_dir(self, results: str | Path) -> Path:
        """``<results>/<sweep name>``, or ``<results>/<sweep name>/<environment>`` for one
        environment of a sweep over several."""
        if self.family:
            return Path(results) / self.config.name / self.environment
        if self.multi_environment:
            raise ValueError(f"sweep {self.name} runs on {self.config.environments}: each "
                             "environment has its directory (per_environment())")
        return Path(results) / self.config.name

    def family_dir(self, results: str | Path) -> Path:
        """``<results>/<sweep name>``: the sweep's directory, or (over several
        environments) the folder of its environments' directories."""
        return Path(results) / self.config.name


def make_run(sweep: SweepConfig, arm: ArmConfig, seed: int,
             environment: str | None = None) -> RunConfig:
    """The resolved run of ``arm`` at ``seed`` (arm ``training`` overrides the protocol).

    Estimator parameters bound to a protocol key (``invalid_penalty`` <-
    ``invalid_action_penalty``) take the run's protocol value: one source of truth for
    the estimator and the trainer command.
    """
    # imported on use: the estimator registry checks each implementation's module (~40 ms)
    from ccpo_lab.estimators.spec import protocol_bound

    env = environment or sweep.environments[0]
    protocol = environment_protocol(sweep, env)
    if arm.training:
        protocol = dataclasses.replace(protocol, **arm.training)
    bound = protocol_bound(arm.estimator.name)
    estimator = arm.estimator
    if bound:
        params = {**estimator.params, **{k: getattr(protocol, key) for k, key in bound.items()}}
        estimator = dataclasses.replace(estimator, params=params)
    return RunConfig(sweep=sweep.name, arm=arm.name, seed=seed, estimator=estimator,
                     protocol=protocol, backend=sweep.backend, environment=env, env=sweep.env)


def environment_protocol(sweep: SweepConfig, environment: str,
                         where: Where | None = None) -> ProtocolConfig:
    """The sweep's protocol with ``env.<environment>.protocol``'s overrides: what that
    environment's runs share (an arm's ``training`` goes on top). ``where``: check the
    overrides (keys of the protocol, values of their types) naming the file."""
    overrides = sweep.env.of(environment).protocol
    if not overrides:
        return sweep.protocol
    key = f"env.{environment}.protocol"
    origin: Where = where or (lambda _k: None)
    for k in overrides:
        if k not in field_names(ProtocolConfig):
            raise UserError("unknown key", file=origin(key), key=f"{key}.{k}",
                            valid=field_names(ProtocolConfig))
    return build(ProtocolConfig, {**to_plain(sweep.protocol), **overrides}, key=key,
                 where=origin)


def _field_type(path: Sequence[str], launcher: type[LauncherSettings]) -> Any:
    """The schema type of the field at ``path`` (the ``launcher`` section being
    ``launcher``'s), or None when there is no such field."""
    import typing

    cls: Any = SweepConfig
    for i, part in enumerate(path):
        if not dataclasses.is_dataclass(cls) or part not in field_names(cls):
            return None
        cls = launcher if i == 0 and part == "launcher" else typing.get_type_hints(cls)[part]
    return cls


def _schema_keys(path: Sequence[str], launcher: type[LauncherSettings]) -> list[str] | None:
    """Valid child keys at ``path`` of the sweep schema, the ``launcher`` section being
    ``launcher``'s (None if ``path`` is a leaf)."""
    cls = _field_type(path, launcher)
    return field_names(cls) if dataclasses.is_dataclass(cls) else None


def _is_mapping_field(path: Sequence[str], launcher: type[LauncherSettings]) -> bool:
    """Whether ``path`` is a free-form ``dict`` field of the schema (``backend.verl.env``,
    ``launcher.sbatch_extra``), whose entries an override may add or replace."""
    import typing

    return bool(path) and typing.get_origin(_field_type(path, launcher)) is dict


def _in_mapping_field(path: Sequence[str], launcher: type[LauncherSettings]) -> bool:
    """Whether ``path`` is, or lies inside, a schema field holding a free-form mapping
    (``launcher.sbatch_extra``, ``backend.verl.env``): any key may be set there."""
    import typing

    cls: Any = SweepConfig
    for i, part in enumerate(path):
        if i == 1 and path[0] == "launcher":
            cls = launcher
        if not dataclasses.is_dataclass(cls) or part not in field_names(cls):
            return False
        tp = typing.get_type_hints(cls)[part]
        if path[:1] == ["launcher"] and i == 0:
            continue
        if typing.get_origin(tp) in (dict, Mapping) or tp is Any:
            return True
        cls = tp
    return False


_SAME_KEY = {"launcher.kind": "launcher", "backend.kind": "backend"}
"""Override keys that name the same setting as another (``launcher=X``)."""


def _parse(overrides: Sequence[str]) -> list[tuple[str, Any, str]]:
    """``(key, override, text)`` of each override; malformed or unsupported ones refused,
    and a key given twice with different values (``seeds=[0,1] seeds=[5]``), as a YAML
    file's duplicate key is: Hydra would keep the last one silently. The same value given
    twice (a script adding what its base command already has) counts once."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    out: list[tuple[str, Any, str]] = []
    for text in overrides:
        try:
            (ov,) = parser.parse_overrides([text])
        except HydraException as e:
            raise UserError(f"malformed override: {str(e).splitlines()[0]}", file=COMMAND_LINE,
                            value=text) from None
        if ov.package is not None:
            raise UserError("override not supported (use key=value)", file=COMMAND_LINE,
                            value=text)
        key = ov.key_or_group
        first = next(((t, o) for k, o, t in out
                      if _SAME_KEY.get(k, k) == _SAME_KEY.get(key, key)), None)
        if first is not None:
            if first[1].value() == ov.value():  # the same setting again: as if given once
                continue
            raise UserError(f"duplicate override (first {first[0]!r}, then {text!r}); each key "
                            "may be given once", file=COMMAND_LINE, key=key)
        out.append((key, ov, text.lstrip("+") if ov.is_add() or ov.is_force_add() else text))
    return out


def _selected_launcher(parsed: list[tuple[str, Any, str]], file_kind: str) -> str:
    """The launcher kind the overrides select (``launcher=X``, ``launcher.kind=X``), else
    the file's; an unknown kind lists the registered ones."""
    kind = file_kind
    for key, ov, text in parsed:
        if key in ("launcher", "launcher.kind") and not ov.is_delete():
            as_element(key, ov, text, None)  # one kind: a sweep is refused
            kind = ov.value()
            settings_class(kind, key="launcher", file=COMMAND_LINE)
    return kind


def _rewrite_overrides(parsed: list[tuple[str, Any, str]], file_kind: str
                       ) -> tuple[list[str], dict[str, str], str]:
    """Check the keys of :func:`_parse`'s overrides against the schema; ``backend=X`` ->
    ``backend.kind=X``; a sweep form on a list-valued key -> its list.

    Returns the overrides for Hydra, the key paths they set (each with the override as
    given), and the launcher kind (selected by ``launcher=X``, applied outside Hydra).
    ``~key`` is checked and recorded here, applied to the file by :func:`load_sweep`.
    """
    kind = _selected_launcher(parsed, file_kind)
    settings_cls = settings_class(kind)
    out: list[str] = []
    keys: dict[str, str] = {}
    for key, ov, text in parsed:
        parts = key.split(".")
        if key in ("launcher", "launcher.kind"):
            keys["launcher.kind"] = text
            continue
        _check_key(key, settings_cls, kind)
        if ov.is_delete():
            keys[key] = text
            continue
        element = as_element(key, ov, text, _field_type(parts, settings_cls))
        if key == "backend":
            value = ov.value()
            if value not in BackendConfig.kinds():
                raise UserError("unknown backend", file=COMMAND_LINE, key="backend",
                                value=value, valid=BackendConfig.kinds())
            out.append(f"backend.kind={value}")
            keys["backend.kind"] = text
            continue
        out.append("++" + element if _free_key(parts, settings_cls) else element)
        keys[key] = text
    return out, keys, kind


def _free_key(parts: list[str], settings_cls: type[LauncherSettings]) -> bool:
    """Whether ``parts`` is, or is an entry of, a free-form mapping of the schema
    (``backend.verl.env``): Hydra adds or merges it (``++``)."""
    return _in_mapping_field(parts, settings_cls) or (
        len(parts) > 1 and _schema_keys(parts[:-1], settings_cls) is None
        and _is_mapping_field(parts[:-1], settings_cls))


def _check_key(key: str, settings_cls: type[LauncherSettings], kind: str) -> None:
    """Refuse an override key that is not in the schema, listing the valid ones."""
    parts = key.split(".")
    parent = _schema_keys(parts[:-1], settings_cls)
    if _free_key(parts, settings_cls) or parent is not None and parts[-1] in parent:
        return
    valid = parent if parent is not None else field_names(SweepConfig)
    why = "unknown key in override"
    if parts[0] == "launcher" and len(parts) >= 2 and parts[1] not in \
            field_names(settings_cls):
        valid = field_names(settings_cls)
        why = not_a_setting(kind, parts[1]).replace(
            f"unknown key for launcher {kind}", "unknown key in override")
    raise UserError(why, file=COMMAND_LINE, key=key, valid=valid)


def _interpolated(value: Any) -> bool:
    """Whether ``value`` holds an OmegaConf interpolation (``${oc.env:SCRATCH}``)."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_interpolated(v) for v in value.values())
    if isinstance(value, list):
        return any(_interpolated(v) for v in value)
    return False


def _compose(full: dict[str, Any], overrides: list[str], file: str,
             given: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Apply ``overrides`` to ``full`` with Hydra's compose API and resolve interpolations
    (with or without overrides, the same); return a plain dict. ``given``: the key paths
    the overrides set, with each override as given: a value that cannot be resolved is
    blamed on the override that set it (or set a mapping holding it), else on the file."""
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
        at = str(getattr(e, "full_key", None) or "") or None
        culprit = next((text for key, text in (given or {}).items() if at is not None and
                        (at == key or at.startswith(key + "."))), None)
        if culprit is not None:
            raise UserError(f"cannot resolve: {msg}", file=COMMAND_LINE, key=at,
                            value=culprit) from None
        if not overrides or "interpolation" in msg.lower() or at is not None:
            raise UserError(f"cannot resolve: {msg}", file=file, key=at) from None
        raise UserError(f"cannot apply overrides: {msg}", file=COMMAND_LINE,
                        value=" ".join(overrides)) from None
    assert isinstance(composed, dict)
    return {str(k): v for k, v in composed.items()}


def load_sweep(path: str | Path, overrides: Sequence[str] = (), *,
               arms_dir: str | Path | None = None) -> Sweep:
    """Read, compose, validate and expand a sweep file."""
    p = Path(path)
    raw = read_yaml_mapping(p, "sweep file")
    parsed = _parse(overrides)
    reset(raw, [(key, ov) for key, ov, _ in parsed if ov.is_delete()])  # ~key: file unset
    file = str(p)
    in_file: Where = lambda _k: file  # noqa: E731 - schema errors name the file
    file_launcher = build_settings(raw.pop("launcher", {}), where=in_file)
    base = build(SweepConfig, raw, where=in_file)
    rewritten, override_keys, kind = _rewrite_overrides(parsed, file_launcher.kind)

    def where(key: str) -> str:
        top = key.split("[")[0]
        return COMMAND_LINE if any(top == k or top.startswith(k + ".") for k in override_keys) \
            else file

    full = to_plain(base)
    full["launcher"] = to_plain(file_launcher if kind == file_launcher.kind
                                else settings_class(kind)())
    composed = _compose(full, rewritten, file, override_keys) \
        if rewritten or _interpolated(full) else full
    launcher = build_settings(composed.pop("launcher"), where=where)
    cfg = dataclasses.replace(build(SweepConfig, composed, where=where), launcher=launcher)
    _check_sweep(cfg, where)
    adir = arms_path(Path(arms_dir)) if arms_dir else _arms_dir_for(cfg, p)
    arms = tuple(load_arm(name, adir, referrer=where("arms")) for name in cfg.arms)
    for arm in arms:
        if arm.training:
            _check_protocol(dataclasses.replace(cfg.protocol, **arm.training),
                            lambda _k, src=arm.source: src)
    _check_environment_protocols(cfg, arms, where)
    _check_used_protocol(cfg, arms, where)
    if cfg.analysis.reference is not None and cfg.analysis.reference not in cfg.arms:
        raise UserError("reference arm is not in the sweep", file=where("analysis.reference"),
                        key="analysis.reference", value=cfg.analysis.reference, valid=cfg.arms)
    _check_pairs(cfg, where)
    adaptive_design(cfg.analysis, cfg.arms, cfg.seeds, where)
    return Sweep(config=cfg, arms=arms, source=file, overrides=tuple(overrides))


def _check_pairs(cfg: SweepConfig, where: Callable[[str], str | None]) -> None:
    """Each ``analysis.pairs`` entry: two distinct arms of the sweep, each pair once."""
    seen: set[tuple[str, str]] = set()
    for i, pair in enumerate(cfg.analysis.pairs):
        key = f"analysis.pairs[{i}]"
        if len(pair) != 2 or pair[0] == pair[1]:
            raise UserError("a pair is two different arms, [arm, reference]", file=where(key),
                            key=key, value=pair)
        for name in pair:
            if name not in cfg.arms:
                raise UserError("arm of a pair is not in the sweep", file=where(key), key=key,
                                value=name, valid=cfg.arms)
        if (pair[0], pair[1]) in seen:
            raise UserError("pair listed twice", file=where(key), key=key, value=pair)
        seen.add((pair[0], pair[1]))
    if cfg.analysis.pairs and cfg.analysis.adaptive.max_seeds is not None:
        raise UserError("an adaptive design compares every arm with analysis.reference; it "
                        "cannot take explicit pairs", file=where("analysis.pairs"),
                        key="analysis.pairs", value=cfg.analysis.pairs)


def _arms_dir_for(cfg: SweepConfig, sweep_path: Path) -> ArmsPath:
    """The sweep's arms path: its ``arms_dir`` (relative to the sweep file) or the
    ``arms/`` beside its folder in front of the default path."""
    if cfg.arms_dir:
        d = Path(cfg.arms_dir)
        d = d if d.is_absolute() else (sweep_path.parent / d)
        if not d.is_dir():
            raise UserError("arms folder not found (relative to the sweep file)",
                            file=sweep_path, key="arms_dir", value=cfg.arms_dir)
        return arms_path(d, "arms_dir")
    beside = sweep_path.resolve().parent.parent / "arms"
    return arms_path(beside, "arms/ beside the sweep's folder") if beside.is_dir() \
        else arms_path()


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
    if cfg.backend.kind not in BackendConfig.kinds():
        raise UserError("unknown backend", file=where("backend.kind"), key="backend.kind",
                        value=cfg.backend.kind, valid=BackendConfig.kinds())
    _check_protocol(cfg.protocol, where)
    check_environments(cfg.environments, cfg.backend.kind, where)
    for name in ENVIRONMENTS:  # every environment's section, used or not
        cfg.env.of(name).validate(where, f"env.{name}")
    for kind in BackendConfig.kinds():  # every backend section, active or not
        settings = getattr(cfg.backend, kind)
        if hasattr(settings, "validate"):
            settings.validate(where)
    active = cfg.backend.settings
    if hasattr(active, "check_protocol"):
        active.check_protocol(cfg.protocol, where)
    an = cfg.analysis
    check_range(an.confidence, low=0, high=1, low_open=True, high_open=True,
                key="analysis.confidence", file=where("analysis.confidence"))
    check_range(an.alpha, low=0, high=1, low_open=True, high_open=True, key="analysis.alpha",
                file=where("analysis.alpha"))
    check_range(an.power, low=0, high=1, low_open=True, high_open=True, key="analysis.power",
                file=where("analysis.power"))
    low, high = BOOTSTRAP_REPS_RANGE
    check_range(an.bootstrap_reps, low=low, high=high, key="analysis.bootstrap_reps",
                file=where("analysis.bootstrap_reps"))
    check_range(an.window_start, low=0, key="analysis.window_start",
                file=where("analysis.window_start"))
    cfg.tracking.validate(where)
    _check_cost(cfg, where)


_CURRENCY = re.compile(r"[A-Z]{3}")
"""A currency as ``launcher.currency`` and ``budget.currency`` take it (ISO 4217 letters)."""


def _check_cost(cfg: SweepConfig, where: Any) -> None:
    """The launcher's rate and price and the study's budget: positive numbers, a price or a
    money budget with its currency, one currency for both."""
    la, bu = cfg.launcher, cfg.budget
    for key, value in (("launcher.seconds_per_step", la.seconds_per_step),
                       ("launcher.price_per_device_hour", la.price_per_device_hour),
                       ("budget.device_hours", bu.device_hours), ("budget.money", bu.money)):
        if value is not None:
            check_range(value, low=0, low_open=True, key=key, file=where(key))
    for key, cur, amount, given in (
            ("launcher.currency", la.currency, la.price_per_device_hour,
             "launcher.price_per_device_hour"),
            ("budget.currency", bu.currency, bu.money, "budget.money")):
        if amount is not None and cur is None:
            raise UserError(f"{given} ({amount}) needs its currency", file=where(given),
                            key=key, value=None, valid="three capital letters (USD, EUR)")
        if cur is not None and not _CURRENCY.fullmatch(str(cur)):
            raise UserError("not a currency code", file=where(key), key=key, value=cur,
                            valid="three capital letters (USD, EUR)")
    if bu.money is not None and la.price_per_device_hour is None:
        raise UserError("a budget in money needs the launcher's price per device-hour",
                        file=where("budget.money"), key="launcher.price_per_device_hour",
                        value=None)
    if bu.money is not None and bu.currency != la.currency:
        raise UserError(f"the budget's currency differs from the price's ({la.currency})",
                        file=where("budget.currency"), key="budget.currency",
                        value=bu.currency, valid=[la.currency])


def _check_environment_protocols(cfg: SweepConfig, arms: Sequence[ArmConfig],
                                 where: Where) -> None:
    """Each environment's protocol (its overrides on the sweep's), with every arm's
    ``training`` on top: in range, and acceptable to the active backend."""
    active = cfg.backend.settings
    for env in cfg.environments:
        if not cfg.env.of(env).protocol:
            continue
        protocol = environment_protocol(cfg, env, where)
        _check_protocol(protocol, where)
        if hasattr(active, "check_protocol"):
            active.check_protocol(protocol, where)
        for arm in arms:
            if arm.training:
                _check_protocol(dataclasses.replace(protocol, **arm.training),
                                lambda _k, src=arm.source: src)


def _check_used_protocol(cfg: SweepConfig, arms: Sequence[ArmConfig], where: Any) -> None:
    """Refuse a protocol key the active backend does not read, set to other than its
    default (by the sweep or an arm's ``training``): it would change the run id only."""
    ignored = getattr(type(cfg.backend.settings), "ignored_protocol", {})
    default = ProtocolConfig()
    sources = [(environment_protocol(cfg, e), where) for e in cfg.environments] + [
        (dataclasses.replace(cfg.protocol, **a.training), lambda _k, src=a.source: src)
        for a in arms if a.training]
    for protocol, origin in sources:
        for key, why in ignored.items():
            if getattr(protocol, key) != getattr(default, key):
                used = [k for k in field_names(ProtocolConfig) if k not in ignored]
                raise UserError(f"not used by the {cfg.backend.kind} backend ({why}); leave "
                                "it out: it would change the run id and nothing else",
                                file=origin(f"protocol.{key}"), key=f"protocol.{key}",
                                value=getattr(protocol, key), valid=used)


def _check_protocol(p: ProtocolConfig, where: Any) -> None:
    """Every numeric field in its range (:data:`~ccpo_lab.config.protocol.LIMITS`), and a
    group of at least two rollouts."""
    for key, (low, high, low_open) in LIMITS.items():
        check_range(getattr(p, key), low=low, high=high, low_open=low_open,
                    key=f"protocol.{key}", file=where(f"protocol.{key}"))
    if p.group_size == 1:
        raise UserError("a group of one rollout gives every GRPO-family estimator (grpo, "
                        "gigpo, ccpo) a zero advantage: nothing would be learned; use 2 or "
                        "more", file=where("protocol.group_size"), key="protocol.group_size",
                        value=1)
    if p.kl_loss_type not in ("low_var_kl", "kl", "abs", "mse"):
        raise UserError("unknown KL estimator", file=where("protocol.kl_loss_type"),
                        key="protocol.kl_loss_type", value=p.kl_loss_type,
                        valid=["low_var_kl", "kl", "abs", "mse"])
