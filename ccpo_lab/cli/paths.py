"""Checks of path arguments before a command writes anything."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.errors import UserError


def output_dir(path: Path, option: str) -> Path:
    """``path`` as a directory to write into (it may not exist yet): refuse it when it,
    or the nearest of its parents that exists, is not a directory."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    if p.exists() and not p.is_dir():
        what = "is a file" if p == path else f"{p} is a file"
        raise UserError(f"{what}, expected a directory", file=path, key=option)
    return path
