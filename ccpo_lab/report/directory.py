"""A report directory (``report --out DIR``): written whole or not at all, checked before
it is logged.

:func:`write_report_dir` builds the report in a temporary sibling of ``DIR``
(``.DIR.partial-<pid>-<hex>``, same file system), lists its files with their sizes in
:data:`MANIFEST`, written last, and only then puts it in place with renames: ``DIR`` is
the complete new report, or (after a failure: a full disk, a read-only location, a crash)
whatever it was before, untouched. Files in an existing ``DIR`` that the new report does
not write (a ``report.pdf`` compiled there, say) are carried over into the new one, so
nothing is lost.

:func:`check_report_dir` is what ``sync --report DIR`` asks first: a directory without
:data:`MANIFEST`, or whose files do not match it (an interrupted write of an older
version, a hand-edited copy), is refused with what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from ccpo_lab.errors import EnvironmentFailure, UserError, os_failure
from ccpo_lab.runs.files import RunFileError, open_file

MANIFEST = ".ccpo-lab-report.json"
"""The list of a complete report directory's files and sizes (written last)."""
_PARTIAL = ".partial-"
_OLD = ".old-"


def _os_error(e: BaseException) -> OSError | None:
    """The :class:`OSError` behind ``e`` (itself, or what it was raised from or during:
    matplotlib's PDF writer turns a full disk into an ``AttributeError``), if any."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, OSError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _newest(d: Path) -> str | None:
    """The file of ``d`` written last (the one a failed write was writing)."""
    with contextlib.suppress(OSError):
        files = [p for p in d.iterdir() if p.is_file()]
        if files:
            return max(files, key=lambda p: p.stat().st_mtime_ns).name
    return None


def _clean_stale(parent: Path, name: str) -> None:
    """Remove temporary siblings of ``name`` left by writers that died (their pid gone)."""
    for prefix in (f".{name}{_PARTIAL}", f".{name}{_OLD}"):
        for p in parent.glob(prefix + "*"):
            pid = p.name[len(prefix):].split("-")[0]
            if not pid.isdigit():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                shutil.rmtree(p, ignore_errors=True)
            except OSError:
                continue


def _check_target(out: Path, sweep_dir: Path | None) -> None:
    """Refuse an ``--out`` that is a sweep directory or holds one: it is replaced whole."""
    real = Path(os.path.realpath(out))
    if sweep_dir is not None:
        sweep = Path(os.path.realpath(sweep_dir))
        if real == sweep or real in sweep.parents:
            raise UserError("is the sweep directory or holds it; a report directory is "
                            "replaced whole: choose a directory of its own (e.g. "
                            f"{sweep / 'report'})", file=out, key="--out")
    if (real / "sweep.json").exists():
        raise UserError("holds a sweep (sweep.json); a report directory is replaced whole: "
                        "choose a directory of its own", file=out, key="--out")


def _sync_dir(d: Path) -> None:
    """Flush the files of ``d`` and the directory itself to the disk."""
    for p in d.iterdir():
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap(tmp: Path, out: Path) -> None:
    """Put the complete ``tmp`` in place of ``out``, carrying over the entries of ``out``
    that ``tmp`` lacks; on failure everything is put back as it was."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if not out.is_dir():
        raise UserError("is a file, expected a directory", file=out, key="--out")
    entries = list(out.iterdir())
    if not entries:
        os.rename(tmp, out)  # rename(2) replaces an empty directory
        return
    written = {p.name for p in tmp.iterdir()}
    carried: list[str] = []
    old = out.with_name(f".{out.name}{_OLD}{os.getpid()}-{secrets.token_hex(3)}")
    moved = False
    try:
        for e in entries:
            if e.name not in written:
                os.rename(e, tmp / e.name)
                carried.append(e.name)
        os.rename(out, old)
        moved = True
        os.rename(tmp, out)
    except BaseException:
        if moved and not out.exists():
            os.rename(old, out)
        for name in carried:
            with contextlib.suppress(OSError):
                os.rename(tmp / name, out / name)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _manifest(tmp: Path) -> None:
    files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
    text = json.dumps({"complete": True, "files": files}, indent=2, sort_keys=True) + "\n"
    with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
        f.write(text)


def write_report_dir(out: str | Path, fill: Callable[[Path], list[Path]],
                     sweep_dir: Path | None = None) -> list[Path]:
    """Write a report directory whole: ``fill(tmp)`` writes the files into a temporary
    sibling of ``out`` and returns their paths; then :data:`MANIFEST` is written and the
    directory put in place of ``out`` (see the module). Returns the paths under ``out``.

    Raises:
        UserError: ``out`` is a file, the sweep directory (``sweep_dir``) or holds a sweep,
            or its location is read-only or not permitted (exit 2).
        EnvironmentFailure: the disk is full or failed (exit 1); nothing changed at
            ``out``.
    """
    out = Path(out)
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    if out.exists() and not out.is_dir():
        raise UserError("is a file, expected a directory", file=out, key="--out")
    _check_target(out, sweep_dir)
    parent = out.parent
    tmp = parent / f".{out.name}{_PARTIAL}{os.getpid()}-{secrets.token_hex(3)}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _clean_stale(parent, out.name)
        os.mkdir(tmp)
    except OSError as e:
        raise _failure(e, out, None) from None
    try:
        written = fill(tmp)
        _manifest(tmp)
        _sync_dir(tmp)
        _swap(tmp, out)
    except BaseException as e:
        culprit = _newest(tmp) if tmp.exists() else None
        shutil.rmtree(tmp, ignore_errors=True)
        err = _os_error(e)
        if err is None or isinstance(e, UserError):
            raise
        raise _failure(err, out, culprit) from None
    return [out / p.name for p in written]


def _failure(e: OSError, out: Path, culprit: str | None) -> UserError:
    """The one line for a report directory that could not be written."""
    doing = "writing the report" + (f" ({culprit})" if culprit else "")
    kept = " (the report already there is kept)" if out.exists() else ""
    failure = os_failure(e, "--out", doing, f"nothing was written there{kept}", file=out)
    if failure is None:
        return EnvironmentFailure(f"{doing}: {e}; nothing was written there{kept}",
                                  file=out, key="--out")
    return failure


def check_report_dir(path: str | Path, option: str = "--report") -> list[Path]:
    """The files of a complete report directory (its :data:`MANIFEST` lists regular files,
    inside it, all there with their sizes); :class:`UserError` saying what to do
    otherwise."""
    p = Path(path)
    again = f"write it again with `ccpo-lab report SWEEP_DIR --out {p}`"
    if not p.is_dir():
        raise UserError("not a report directory (expected one written by `ccpo-lab report "
                        "--out`)", file=p, key=option)
    try:
        doc = json.loads((p / MANIFEST).read_text(encoding="utf-8"))
        files = doc["files"] if isinstance(doc, dict) and doc.get("complete") else None
        if not isinstance(files, dict):
            raise ValueError
    except FileNotFoundError:
        raise UserError(f"not a complete report directory (no {MANIFEST}: left by an "
                        f"interrupted `report --out`, or by an older version): {again}",
                        file=p, key=option) from None
    except (OSError, ValueError):
        raise UserError(f"its {MANIFEST} is unreadable: {again}", file=p,
                        key=option) from None
    bad = _mismatches(p, files.items())
    if bad:
        raise UserError(f"not a complete report directory ({bad[0]}"
                        f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}): {again}",
                        file=p, key=option)
    return [p / name for name in sorted(files)]


def _mismatches(p: Path, files: Iterable[tuple[str, object]]) -> list[str]:
    bad = []
    for name, size in files:
        if not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            bad.append(f"{name!r} is not a file name")
            continue
        try:
            with open_file(p / name, p) as f:
                got = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            bad.append(f"{name} is missing")
            continue
        except RunFileError as e:
            bad.append(f"{name} {e.why}")
            continue
        except OSError as e:
            bad.append(f"{name} is unreadable ({e.strerror})")
            continue
        if got != size:
            bad.append(f"{name} has {got} bytes, {size} when written")
    return bad
