"""A report directory (``report --out DIR``): written whole or not at all, checked before
it is logged.

:func:`write_report_dir` builds the report in a temporary sibling of ``DIR``
(``.DIR.partial-<pid>-<hex>``, same file system), lists its files with their sizes in
:data:`MANIFEST`, written last, and only then puts it in place with renames: ``DIR`` is
the complete new report, or (after a failure: a full disk, a read-only location, a crash)
whatever it was before, untouched. Files in an existing ``DIR`` that the new report does
not write (a ``report.pdf`` compiled there, say) are carried over into the new one, so
nothing is lost.

Crash safety (issue 36, item 6): an existing report directory is replaced by an atomic
exchange of the two directories (``renameat2(RENAME_EXCHANGE)``, where the file system
has it): ``DIR`` is never absent, and at every instant it is the old report or the new
one. The user's files of the old one are then moved into the new one; a crash meanwhile
leaves them in the temporary sibling, which no later ``report --out`` deletes: ccpo-lab
only ever removes the files a report's :data:`MANIFEST` lists (or a temporary folder
whose writer marker, :data:`WRITER`, shows ccpo-lab was still filling it), and only a
sibling whose writer is provably gone (its pid on this host; another host's is left
alone). A directory that is neither empty nor a ccpo-lab report is refused as ``--out``.

:func:`check_report_dir` is what ``sync --report DIR`` asks first: a directory without
:data:`MANIFEST`, or whose files do not match it (an interrupted write of an older
version, a hand-edited copy), is refused with what to do.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import socket
import sys
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


WRITER = ".ccpo-lab-writing"
"""In a temporary folder being filled: its writer (host, pid). Removed once the folder is
complete (its :data:`MANIFEST` written)."""


def _temp_name(name: str, kind: str) -> str:
    """``.<name><kind><host>-<pid>-<hex>``: who made a temporary sibling."""
    host = socket.gethostname().replace("-", "_") or "host"
    return f".{name}{kind}{host}-{os.getpid()}-{secrets.token_hex(3)}"


def _writer_gone(folder: Path, prefix: str) -> bool:
    """Whether the process that made ``folder`` (named by :func:`_temp_name`) is provably
    gone: it ran on this host and its pid is not alive. Another host's: never."""
    parts = folder.name[len(prefix):].rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    host = socket.gethostname().replace("-", "_") or "host"
    if parts[0] != host:
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _ours(folder: Path) -> list[Path] | None:
    """The entries of ``folder`` ccpo-lab wrote: everything, while its :data:`WRITER`
    marker shows it was being filled; else the files its :data:`MANIFEST` lists and the
    manifest; None when it cannot tell (nothing is then removed)."""
    if (folder / WRITER).is_file() and not (folder / MANIFEST).exists():
        return list(folder.iterdir())
    try:
        doc = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = doc.get("files") if isinstance(doc, dict) else None
    except (OSError, ValueError):
        return None
    if not isinstance(files, dict):
        return None
    listed = [folder / n for n in files if isinstance(n, str) and "/" not in n
              and n not in ("", ".", "..")]
    return [p for p in listed if p.is_file() and not p.is_symlink()] + [folder / MANIFEST]


def _remove_ours(folder: Path) -> list[str]:
    """Remove what ccpo-lab wrote in ``folder``, then the folder if that empties it.
    Returns the names left (files ccpo-lab did not write: never removed)."""
    ours = _ours(folder)
    if ours is None:
        return sorted(p.name for p in folder.iterdir())
    for p in ours:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _clean_stale(parent: Path, name: str) -> None:
    """Tidy temporary siblings of ``name`` left by writers that died on this host: their
    ccpo-lab files are removed; a file ccpo-lab did not write (a user's file carried over
    when the writer was killed) is left there, named on stderr."""
    for kind in (_PARTIAL, _OLD):
        prefix = f".{name}{kind}"
        for p in parent.glob(prefix + "*"):
            if not p.is_dir() or p.is_symlink() or not _writer_gone(p, prefix):
                continue
            left = _remove_ours(p)
            if left:
                print(f"warning: {p} holds files ccpo-lab did not write ({', '.join(left[:5])}"
                      f"{'...' if len(left) > 5 else ''}), left by a report --out that was "
                      "killed: kept; move them back by hand", file=sys.stderr, flush=True)


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


def _check_report_target(out: Path) -> None:
    """Refuse an existing ``--out`` that is neither empty nor a ccpo-lab report (no
    :data:`MANIFEST`): replacing it would move what it holds."""
    if not out.is_dir() or (out / MANIFEST).is_file():
        return
    try:
        entries = sorted(p.name for p in out.iterdir())
    except OSError:
        return
    if entries:
        raise UserError(f"is not a report directory (no {MANIFEST}) and holds "
                        f"{', '.join(entries[:3])}{'...' if len(entries) > 3 else ''}: "
                        "choose a new or empty directory", file=out, key="--out")


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


_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange the directories ``a`` and ``b`` (``renameat2``); False where
    the system or the file system cannot."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap(tmp: Path, out: Path) -> None:
    """Put the complete ``tmp`` in place of ``out`` (module docstring): an atomic exchange,
    then the old report's entries the new one lacks moved into it, then the old report's
    own files removed; a crash at any point leaves ``out`` whole and no user file lost."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if not out.is_dir():
        raise UserError("is a file, expected a directory", file=out, key="--out")
    if not any(out.iterdir()):
        os.rename(tmp, out)  # rename(2) replaces an empty directory
        return
    written = {p.name for p in tmp.iterdir()}
    if not _exchange(tmp, out):
        _swap_by_renames(tmp, out, written)
        return
    old = tmp  # now the old report
    ours = {p.name for p in (_ours(old) or [])}
    for e in list(old.iterdir()):
        if e.name not in written and e.name not in ours:
            os.rename(e, out / e.name)  # the user's file: into the new report
    left = _remove_ours(old)
    if left:  # the old report listed files the new one also writes: kept, named
        print(f"warning: {old} keeps {', '.join(left[:5])}: not removed", file=sys.stderr)


def _swap_by_renames(tmp: Path, out: Path, written: set[str]) -> None:
    """The swap without an exchange: carry the user's entries into ``tmp``, then two
    renames (a window where ``out`` is absent, and a crash there leaves the user's files
    in ``tmp``, which :func:`_clean_stale` keeps)."""
    carried: list[str] = []
    old = out.with_name(_temp_name(out.name, _OLD))
    moved = False
    try:
        for e in out.iterdir():
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
    _remove_ours(old)


def _manifest(tmp: Path) -> None:
    files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())
             if p.is_file() and p.name != WRITER}
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
    _check_report_target(out)
    parent = out.parent
    tmp = parent / _temp_name(out.name, _PARTIAL)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _clean_stale(parent, out.name)
        os.mkdir(tmp)
        (tmp / WRITER).write_text(json.dumps({"host": socket.gethostname(),
                                              "pid": os.getpid()}) + "\n")
    except OSError as e:
        raise _failure(e, out, None) from None
    try:
        written = fill(tmp)
        _manifest(tmp)
        (tmp / WRITER).unlink()
        _sync_dir(tmp)
        _swap(tmp, out)
    except BaseException as e:
        culprit = _newest(tmp) if tmp.exists() else None
        if tmp.exists():  # ccpo-lab's files only: after the exchange it holds the user's
            _remove_ours(tmp)
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
