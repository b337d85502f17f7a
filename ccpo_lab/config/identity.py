"""Run identity: the sha256 of a run's result-relevant configuration in canonical form.

Key order and YAML formatting do not change it; any value that can change a result
(estimator name and parameters, protocol, active backend settings, seed) does. Launcher
queueing details and fields marked ``metadata={"identity": False}`` are left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ccpo_lab.estimators.spec import identity_params

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig

IDENTITY_VERSION = 1
"""Bumped when the identity's structure changes."""


def to_plain(obj: Any, *, identity_only: bool = False) -> Any:
    """Dataclasses, mappings and sequences as plain JSON-able Python values.

    With ``identity_only``, dataclass fields with ``metadata["identity"] is False`` are
    dropped, and those with ``metadata["identity"] == "non-default"`` when they hold their
    default (a field added later leaves the ids of runs that do not set it unchanged).
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            mark = f.metadata.get("identity", True)
            if identity_only and (mark is False or mark == "non-default"
                                  and getattr(obj, f.name) == f.default):
                continue
            out[f.name] = to_plain(getattr(obj, f.name), identity_only=identity_only)
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_plain(v, identity_only=identity_only) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v, identity_only=identity_only) for v in obj]
    return obj


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, floats as ``repr`` (round-trip exact)."""

    def check(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"non-finite float {v!r} has no canonical form")
        if isinstance(v, dict):
            return {k: check(x) for k, x in v.items()}
        if isinstance(v, list):
            return [check(x) for x in v]
        return v

    return json.dumps(check(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def identity_dict(run: RunConfig) -> dict[str, Any]:
    """The result-relevant part of a run configuration as a plain dict.

    The environment and its settings enter only when it is not ALFWorld, the default: a
    run written before environments existed keeps its id.
    """
    out = {
        "identity_version": IDENTITY_VERSION,
        "seed": run.seed,
        "estimator": {"name": run.estimator.name, "params": to_plain(
            identity_params(run.estimator.name, run.estimator.params))},
        "protocol": to_plain(run.protocol, identity_only=True),
        "backend": {
            "kind": run.backend.kind,
            run.backend.kind: to_plain(run.backend.settings, identity_only=True),
        },
    }
    if run.environment != "alfworld":
        out["environment"] = {"name": run.environment, run.environment: to_plain(
            run.env_settings, identity_only=True)}
    return out


def hash_identity(identity: Mapping[str, Any]) -> str:
    """sha256 (hex) of an identity dict's canonical JSON."""
    return hashlib.sha256(canonical_json(dict(identity)).encode("utf-8")).hexdigest()


def run_id(run: RunConfig) -> str:
    """The run's identity hash."""
    return hash_identity(identity_dict(run))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}``; lists are leaves."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


_MISSING = object()


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Key-level differences ``(key, old, new)`` between two nested configs, sorted by key.

    A key present on one side only shows ``<absent>`` on the other.
    """
    a, b = flatten(old), flatten(new)
    rows = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, _MISSING), b.get(key, _MISSING)
        if va != vb or type(va) is not type(vb):
            rows.append((key, "<absent>" if va is _MISSING else va,
                         "<absent>" if vb is _MISSING else vb))
    return rows


def format_diff(rows: list[tuple[str, Any, Any]], old_label: str = "on disk",
                new_label: str = "requested") -> str:
    """The diff as indented lines ``key: old -> new``."""
    lines = [f"  {k}: {old_label} {v_old!r} -> {new_label} {v_new!r}" for k, v_old, v_new in rows]
    return "\n".join(lines)
