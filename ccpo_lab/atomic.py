"""Files and folders as the user's umask says: one owner for atomic writes.

``tempfile.mkstemp`` creates ``0600`` files and ``mkdtemp`` ``0700`` folders whatever the
umask, so a file written through a temporary name and a rename kept those modes and
lab-mates on shared storage could not read a study. Everything ccpo-lab writes through a
temporary goes through here: a file gets ``0666 & ~umask``, a folder ``0777 & ~umask``
(``0644``/``0755`` under umask 022, ``0640``/``0750`` under 027), as ``open`` and
``mkdir`` give. Private files (the engine cache's signing key) set their mode themselves.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def current_umask() -> int:
    """The process's umask, read without changing it (Linux's ``/proc/self/status``;
    elsewhere set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open`` gives a new file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode ``mkdir`` gives a new folder: ``0o777 & ~umask``."""
    return 0o777 & ~current_umask()


def temp_file(folder: Path, prefix: str, suffix: str = "") -> tuple[int, str]:
    """``(fd, path)`` of a new temporary file in ``folder`` with the umask's mode."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, file_mode())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def temp_dir(folder: Path | str | None, prefix: str) -> Path:
    """A new temporary folder in ``folder`` with the umask's mode (renamed into place by
    its caller, it keeps that mode)."""
    path = Path(tempfile.mkdtemp(dir=folder, prefix=prefix))
    os.chmod(path, dir_mode())
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, ``fsync`` and a rename; the
    file gets the umask's mode. A failure leaves ``path`` as it was (and names it: a full
    disk's ``ENOSPC`` says no path by itself)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file(p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None:
            raise OSError(e.errno, e.strerror, str(p)) from e
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))
