"""Checks of path arguments before a command writes anything."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ccpo_lab.errors import UserError, os_failure


def output_dir(path: Path, option: str) -> Path:
    """``path`` as a directory to write into (it may not exist yet): refuse it when it,
    or the nearest of its parents that exists, is not a directory, or cannot be reached
    (a symbolic link loop, a directory it may not search: one line naming ``option``)."""
    p = path
    while True:
        try:
            st = os.stat(p)
            break
        except (FileNotFoundError, NotADirectoryError):  # walk up to what exists
            if p == p.parent:
                return path
            p = p.parent
        except OSError as e:
            failure = os_failure(e, option, file=path)
            if failure is None:
                raise
            raise failure from None
    if not stat.S_ISDIR(st.st_mode):
        what = "is a file" if p == path else f"{p} is a file"
        raise UserError(f"{what}, expected a directory", file=path, key=option)
    return path


def sweep_file(path: Path) -> Path:
    """The sweep file ``path`` names: the file itself, else the shipped example it names
    (``demo``, ``demo.yaml`` or ``sweeps/demo.yaml`` from a folder without it: a note
    says so on stderr), else a one-line error listing the shipped examples."""
    import typer

    from ccpo_lab.config.armspath import shipped_sweep, shipped_sweep_names

    if path.exists():
        return path
    shipped = shipped_sweep(path)
    if shipped is None:
        raise UserError("sweep file not found", file=path,
                        valid=f"a file, or a shipped example: {', '.join(shipped_sweep_names())}")
    typer.secho(f"note: {path} is not here; using the shipped example {shipped}",
                fg="yellow", err=True)
    return shipped


def sweep_dirs(path: Path) -> list[tuple[str | None, Path]]:
    """The sweep directories a command given ``path`` works on: ``path`` itself, or each
    environment's directory of a sweep over several (:mod:`ccpo_lab.runs.family`), as
    ``(environment, directory)``; refuse what is not a directory."""
    from ccpo_lab.runs.family import environment_dirs

    if not path.is_dir():
        raise UserError("not a directory", file=path,
                        valid="a sweep's results directory, e.g. results/<sweep name>")
    found = environment_dirs(path)
    if not found:
        raise UserError("no environment's directory yet (nothing launched)", file=path)
    return found


def environment_heading(env: str | None, path: Path) -> str | None:
    """The line that opens one environment's part of a command's output (None for a
    plain sweep directory)."""
    return None if env is None else f"== environment {env} ({path})"
