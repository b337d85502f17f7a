"""Arm files: loading, ``extends`` inheritance, validation, listing and diffs.

An arm file ``arms/<name>.yaml``::

    name: ccpo-return-hard          # optional; must equal the file stem
    description: ...
    extends: ccpo-base              # optional parent arm
    estimator: {name: ccpo, gate: hard, target: return, rho: 0.0}
    training: {lr: 2e-6}            # optional protocol overrides
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ccpo_lab.config.armspath import ArmsPath, arms_path
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.schema import ArmConfig, EstimatorConfig
from ccpo_lab.config.validate import build, field_names
from ccpo_lab.config.yamlio import check_name, read_yaml_mapping
from ccpo_lab.errors import UserError

ARM_KEYS = ("name", "description", "extends", "estimator", "training")


def default_arms_dir() -> Path:
    """The first folder of the default arms path (``$CCPO_LAB_ARMS``, ``./arms``, the
    shipped arms): see :mod:`ccpo_lab.config.armspath`."""
    return arms_path().dirs[0]


def as_arms_path(arms: Path | ArmsPath | None) -> ArmsPath:
    """``arms`` as a search path: a folder goes in front of the default path."""
    if isinstance(arms, ArmsPath):
        return arms
    return arms_path(arms) if arms is not None else arms_path()


def arm_names(arms: Path | ArmsPath) -> list[str]:
    """Stems of the arm files along ``arms`` (a folder: that folder only), sorted."""
    if isinstance(arms, ArmsPath):
        return arms.names()
    if not arms.is_dir():
        return []
    return sorted(p.stem for p in arms.glob("*.yaml") if not p.name.startswith("."))


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _raw_chain(name: str, arms: ArmsPath, *, referrer: str | None
               ) -> list[tuple[str, Path, dict]]:
    """Raw arm mappings along ``extends``, the requested arm first (each name looked up
    along ``arms``; an arm extending its own name extends the next file of that name)."""
    chain: list[tuple[str, Path, dict]] = []
    seen: list[Path] = []
    current: str | None = name
    ref_file, ref_key = referrer, "arms"
    previous: Path | None = None
    while current is not None:
        check_name(current, file=ref_file, key=ref_key)
        after = previous if previous is not None and previous.stem == current else None
        path = arms.find(current, after=after)
        if path is None:
            what = "no further arm of that name on the arms path" if after is not None \
                else "unknown arm"
            raise UserError(what, file=ref_file, key=ref_key, value=current,
                            valid=arms.names() or f"(no arm files on {arms.describe()})")
        if path.resolve() in seen:
            cycle = " -> ".join([*(p.stem for p in seen), current])
            raise UserError("extends cycle", file=ref_file, key="extends", value=cycle)
        seen.append(path.resolve())
        raw = read_yaml_mapping(path, "arm file")
        for k in raw:
            if k not in ARM_KEYS:
                raise UserError("unknown key", file=path, key=k, valid=ARM_KEYS)
        if "name" in raw and raw["name"] != current:
            raise UserError("name must equal the file's stem", file=path, key="name",
                            value=raw["name"], valid=[current])
        for k in ("estimator", "training"):
            if k in raw and not isinstance(raw[k], Mapping):
                raise UserError("expected a mapping", file=path, key=k, value=raw[k])
        chain.append((current, path, raw))
        parent = raw.get("extends")
        if parent is not None and not isinstance(parent, str):
            raise UserError("expected an arm name", file=path, key="extends", value=parent)
        current, ref_file, ref_key, previous = parent, str(path), "extends", path
    return chain


def _merged(chain: list[tuple[str, Path, dict]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The chain's mappings merged, the root ancestor first; and the file that set each
    ``estimator.K`` / ``training.K``."""
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for _, path, raw in reversed(chain):
        est = raw.get("estimator")
        if est is not None and "name" in est and merged.get("estimator", {}).get("name") not in (
            None, est["name"]):
            merged.pop("estimator")  # another estimator: the parent's parameters do not apply
        for key in raw.get("estimator", {}):
            origin[f"estimator.{key}"] = str(path)
        for key in raw.get("training", {}):
            origin[f"training.{key}"] = str(path)
        merged = _merge(merged, {k: v for k, v in raw.items() if k not in ("name", "extends")})
    return merged, origin


def load_arm(name: str, arms_dir: Path | ArmsPath | None = None, *,
             referrer: str | None = None) -> ArmConfig:
    """Load, inherit and validate arm ``name`` from the arms path (a folder: that folder
    in front of the default path; see :mod:`ccpo_lab.config.armspath`).

    ``referrer`` is the file that named the arm (a sweep file), used in errors.
    """
    from ccpo_lab.estimators.spec import estimator_names, protocol_bound, resolve_params

    arms = as_arms_path(arms_dir)
    chain = _raw_chain(name, arms, referrer=referrer)
    merged, origin = _merged(chain)
    own_path = str(chain[0][1])
    est = dict(merged.get("estimator") or {})
    if "name" not in est:
        raise UserError("missing estimator name", file=own_path, key="estimator.name",
                        valid=estimator_names())
    est_name = est.pop("name")
    resolve_params(est_name, {}, file=origin.get("estimator.name", own_path))
    bound = protocol_bound(est_name)
    for k in est:
        if k in bound:
            raise UserError(f"set by the protocol (protocol.{bound[k]}, or training."
                            f"{bound[k]} in an arm), not by the estimator section",
                            file=origin.get(f"estimator.{k}", own_path), key=f"estimator.{k}",
                            value=est[k])
    # one key at a time, so that an error names the file that set the key
    params = {k: resolve_params(est_name, {k: v}, file=origin.get(f"estimator.{k}", own_path))[k]
              for k, v in est.items()}
    training = dict(merged.get("training") or {})
    for k in training:
        if k not in field_names(ProtocolConfig):
            raise UserError("unknown key", file=origin.get(f"training.{k}", own_path),
                            key=f"training.{k}", valid=field_names(ProtocolConfig))
    protocol = build(ProtocolConfig, training, key="training",
                     where=lambda p: origin.get(p, own_path))
    # the protocol-bound parameters as the default protocol with this arm's overrides
    # gives them (a sweep's own protocol binds them again: config.sweep.make_run)
    params.update({k: getattr(protocol, key) for k, key in bound.items()})
    full = resolve_params(est_name, params, file=own_path)
    description = merged.get("description", "")
    if not isinstance(description, str):
        raise UserError("expected text", file=own_path, key="description", value=description)
    return ArmConfig(
        name=name,
        description=description.strip(),
        estimator=EstimatorConfig(name=est_name, params=full),
        training=training,
        source=own_path,
        chain=tuple(n for n, _, _ in chain),
        shadows=_shadowed(arms, name, [p for _, p, _ in chain]),
    )


def _shadowed(arms: ArmsPath, name: str, chain: list[Path]) -> tuple[str, ...]:
    """The other files of arm ``name`` on the path that the arm (its files: ``chain``)
    neither is nor extends, and whose text differs (a copy shadows nothing)."""
    text = chain[0].read_bytes()
    used = {p.resolve() for p in chain}
    return tuple(str(p) for p in arms.find_all(name)
                 if p.resolve() not in used and p.read_bytes() != text)


def distinguishing_flags(arm: ArmConfig) -> dict[str, Any]:
    """Estimator parameters of ``arm`` that differ from their defaults."""
    # imported on use (here and in load_arm): the estimator registry checks each
    # implementation's module when imported (~40 ms)
    from ccpo_lab.estimators.spec import ESTIMATOR_PARAMS

    defaults = {p.name: p.default for p in ESTIMATOR_PARAMS[arm.estimator.name]}
    return {k: v for k, v in arm.estimator.params.items() if defaults.get(k) != v}
