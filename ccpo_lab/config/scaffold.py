"""``ccpo-lab init DIR``: a new project from the shipped template (``shipped/project``):
an arm that extends a shipped one, a CPU-backend sweep for every launcher, a verl sweep
with the paths to fill in, and a README of next steps."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.config.armspath import SHIPPED
from ccpo_lab.errors import UserError

TEMPLATE = SHIPPED / "project"


def template_files() -> list[Path]:
    """``(K,)`` the template's files, relative to it, sorted."""
    return sorted(p.relative_to(TEMPLATE) for p in TEMPLATE.rglob("*") if p.is_file())


def scaffold(target: Path) -> list[Path]:
    """Write the template into ``target`` (created, or an empty folder); return the files
    written. Refused (exit 2, nothing written) when ``target`` is a file or a folder that
    holds anything."""
    from ccpo_lab.atomic import atomic_write_bytes

    if target.exists() and not target.is_dir():
        raise UserError("init needs a new or empty folder; this is a file", file=target)
    if target.is_dir() and any(target.iterdir()):
        raise UserError("init needs a new or empty folder; this one holds files (nothing "
                        "was written)", file=target)
    written = []
    for rel in template_files():
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out, (TEMPLATE / rel).read_bytes())
        written.append(out)
    return written
