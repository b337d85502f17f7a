"""A sweep over several environments: one sweep directory per environment.

``<results>/<sweep>/`` of a sweep with ``environments: [alfworld, sokoban]`` holds::

    environments.json   {"sweep": name, "environments": [...]}: what the folder is
    alfworld/           an ordinary sweep directory (sweep.json, <arm>/seed-<k>/, ...)
    sokoban/            another

Every command that takes a sweep directory takes this folder too and works per
environment (:func:`environment_dirs`); given one environment's directory it works on that
one alone. A single-environment sweep keeps the plain layout (runs directly in
``<results>/<sweep>/``), so ALFWorld sweeps written before environments are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.errors import UserError

FAMILY = "environments.json"
"""The file that marks a folder of per-environment sweep directories."""
_MANIFEST = "sweep.json"  # runs.layout.MANIFEST (not imported: layout imports config)


def is_family(path: str | Path) -> bool:
    """True when ``path`` is the folder of a sweep over several environments."""
    return (Path(path) / FAMILY).is_file()


def read_family(path: str | Path) -> list[str]:
    """The environments a family folder lists, in the sweep's order; a one-line error
    for a file that is not what :func:`write_family` writes."""
    f = Path(path) / FAMILY
    try:
        data = json.loads(f.read_bytes()[:1_000_000])
    except (OSError, ValueError) as e:
        raise UserError(f"unreadable ({e.__class__.__name__})", file=f) from None
    envs = data.get("environments") if isinstance(data, dict) else None
    if not isinstance(envs, list) or not envs or not all(
            isinstance(e, str) and e and "/" not in e and not e.startswith(".") for e in envs):
        raise UserError("not a list of environment names", file=f, key="environments",
                        value=envs)
    return list(envs)


def environment_dirs(path: str | Path) -> list[tuple[str | None, Path]]:
    """``[(environment, sweep directory)]`` under ``path``: each environment's directory
    of a family folder (those that exist), or ``[(None, path)]`` for a sweep directory."""
    p = Path(path)
    if not is_family(p):
        return [(None, p)]
    return [(env, p / env) for env in read_family(p) if (p / env).is_dir()]


def write_family(path: str | Path, sweep: str, environments: Sequence[str]) -> None:
    """Mark ``path`` as the folder of ``sweep``'s environments (idempotent).

    Refused when ``path`` holds a single-environment sweep (its ``sweep.json``), or a
    family over other environments: the environments of a sweep's folder are fixed once
    runs exist (a new environment added to the list is allowed; a sweep that drops one
    keeps its directory and lists it still).
    """
    p = Path(path)
    held = check_family(p, environments)
    merged = held + [e for e in environments if e not in held]
    if merged == held:
        return
    p.mkdir(parents=True, exist_ok=True)
    atomic_write_json(p / FAMILY, {"sweep": sweep, "environments": merged})


def check_family(path: str | Path, environments: Sequence[str]) -> list[str]:
    """Refuse a folder that holds a single-environment sweep for a sweep over several
    environments (writes nothing); the environments it lists already."""
    p = Path(path)
    if (p / _MANIFEST).exists():
        raise UserError("this folder holds a single-environment sweep; a sweep over several "
                        "environments needs a folder of its own (rename the sweep)", file=p,
                        key="environments", value=list(environments))
    return read_family(p) if is_family(p) else []


def check_not_family(path: str | Path) -> None:
    """Refuse to put a single-environment sweep's runs in a family folder."""
    if is_family(path):
        raise UserError("this folder holds a sweep over several environments; a "
                        "single-environment sweep of the same name cannot share it (set "
                        "environments to the family's list, or rename the sweep)",
                        file=Path(path) / FAMILY, key="environments")


def member_environment(sweep_dir: str | Path) -> str | None:
    """The environment whose directory ``sweep_dir`` is, in the folder of a sweep over
    several environments; None for a sweep directory of its own."""
    p = Path(sweep_dir)
    if not is_family(p.parent):
        return None
    try:
        return p.name if p.name in read_family(p.parent) else None
    except UserError:
        return None


def tracking_group(sweep: str, sweep_dir: str | Path) -> str:
    """How tracking groups a sweep's runs: the sweep, or ``<sweep>/<environment>`` for one
    environment of a sweep over several (each environment its own group and parent)."""
    env = member_environment(sweep_dir)
    return sweep if env is None else f"{sweep}/{env}"
