"""The run-file gateway: how every reader opens the files of a sweep directory.

``report``, ``verify``, ``sync`` and ``status`` read run directories they may not have
written (copied in, restored from a backup, cut short by a crash or a power loss). Each
such file is opened here, and what is not read is refused with an :class:`OSError` that
names the file and why (:class:`RunFileError`; readers that say "unreadable (...)" for an
I/O error say it for these too):

* **inside the sweep**: a file whose real path (symbolic links of the file and of every
  directory above it resolved) is not inside the sweep directory is not opened
  (:class:`OutsideSweep` names the link and where it leads). A link that stays inside,
  ``seed-0/metrics.jsonl -> ../seed-0.2/metrics.jsonl`` say, is followed.
* **regular files only**: a FIFO, a device or a directory is not read
  (:class:`NotRegular`), so no reader blocks on a FIFO or reads ``/dev/zero`` for ever.
* **bounded**: a whole-file read (JSON, YAML) stops at :data:`MAX_SMALL` bytes
  (:class:`TooLarge`); a line-oriented file is read :data:`CHUNK` bytes at a time
  (:func:`read_lines`), and a line longer than :data:`MAX_LINE` is passed on as a
  :class:`Cut` (its size and first bytes), never held: memory is bounded by the chunk,
  not by the longest line (a 200 MB run of NUL bytes after a power loss included).
* **quoted briefly**: what a message shows of a file's content is an :func:`excerpt`: at
  most 60 characters, escaped (control characters, terminal escapes and invalid UTF-8 as
  ``\\x..``).

A leaf module: the standard library only.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

MAX_LINE = 1 << 22
"""Longest line (4 MiB) a line reader passes on whole; a metrics row is a few KB (a verl
step with a thousand metrics about 60 KB)."""
CHUNK = 1 << 20
"""Bytes read at a time by :func:`read_lines`."""
MAX_SMALL = 1 << 24
"""Largest file (16 MiB) read whole: ``run.json``, ``state.json``, ``job.json``,
``config.yaml`` and ``sweep.json`` are KB (a 2,000-run manifest about 1 MB)."""
EXCERPT = 60
"""Characters of a file's content a message may quote."""


class RunFileError(OSError):
    """A sweep file the gateway does not read, and why (``str()``: one line, the path
    then :attr:`why`, which starts with "is")."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(errno.EPERM, why, str(path))
        self.path = path
        self.why = why

    def __str__(self) -> str:
        return f"{self.path} {self.why}"


class OutsideSweep(RunFileError):
    """A file whose real path is outside the sweep directory (a symbolic link out)."""


class NotRegular(RunFileError):
    """Not a regular file (a FIFO, a device, a directory, a socket)."""


class TooLarge(RunFileError):
    """A file read whole that is larger than :data:`MAX_SMALL`."""


def excerpt(raw: bytes | str, width: int = EXCERPT) -> str:
    """At most ``width`` characters of ``raw``, escaped and quoted (``repr``), with
    ``...`` when cut: what a message may show of a file's content."""
    text = raw if isinstance(raw, str) else raw[:4 * width].decode(
        "utf-8", errors="backslashreplace")
    return repr(text if len(text) <= width else text[:width] + "...")


def mib(n: int) -> str:
    """``n`` bytes in MiB, for a person (``4 MiB``, ``0.5 MiB``)."""
    return f"{n / 2**20:.3g} MiB"


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=4096)
def _real_dir(path: str, ident: tuple[int, int]) -> str:
    """The real path of directory ``path``, whose ``stat`` is ``ident`` (device, inode):
    a directory replaced since (by a link elsewhere) has another identity, so it is
    resolved again."""
    return os.path.realpath(path)


def realpath(path: str | Path) -> str:
    """``os.path.realpath(path)``, with the real paths of directories cached by identity
    (a run's files share theirs): one ``stat`` and one ``lstat`` per file when neither
    the file nor its directory is a link."""
    text = str(path)
    parent = os.path.dirname(text) or "."
    try:
        st = os.stat(parent)
    except OSError:
        return os.path.realpath(text)
    full = os.path.join(_real_dir(parent, (st.st_dev, st.st_ino)), os.path.basename(text))
    try:
        if stat.S_ISLNK(os.lstat(full).st_mode):
            return os.path.realpath(full)
    except OSError:
        pass
    return full


def _real_root(root: str | Path) -> str:
    try:
        st = os.stat(root)
    except OSError:
        return os.path.realpath(root)
    return _real_dir(str(root), (st.st_dev, st.st_ino))


def check_inside(path: str | Path, root: str | Path) -> Path:
    """``path`` when its real path is inside ``root``'s; :class:`OutsideSweep` (naming the
    link and its target) otherwise. The file need not exist."""
    p = Path(path)
    real, top = realpath(p), _real_root(root)
    if not _inside(real, top):
        raise OutsideSweep(p, f"is a link to {real}, outside the sweep directory {top}: not "
                              "read")
    return p


def open_file(path: str | Path, root: str | Path) -> BinaryIO:
    """``path`` opened for binary reading, after checking that it is inside ``root``
    (:func:`check_inside`) and a regular file (:class:`NotRegular`).

    Raises:
        FileNotFoundError: no such file.
        RunFileError: outside the sweep, or not a regular file.
        OSError: any other reason it cannot be opened.
    """
    p = check_inside(path, root)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory"
                    if stat.S_ISDIR(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                    or stat.S_ISBLK(st.st_mode) else "a special file")
            raise NotRegular(p, f"is {kind}, expected a regular file: not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small(path: str | Path, root: str | Path, limit: int = MAX_SMALL) -> bytes:
    """The bytes of a file read whole (JSON, YAML), through :func:`open_file`;
    :class:`TooLarge` beyond ``limit`` bytes (nothing more than ``limit + 1`` is read)."""
    with open_file(path, root) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(Path(path), f"is larger than {mib(limit)} (such a file holds a "
                                   "few KB; damaged?): not read")
    return data


@dataclass(frozen=True)
class Cut:
    """A line :func:`read_lines` does not pass on whole: longer than its bound, or the
    last line without its line end (a write in progress, or cut off by a crash)."""

    head: bytes
    """Its first bytes (all of them for a short last line without a line end)."""
    size: int
    """Its length in bytes (without the line end)."""
    ended: bool
    """Whether it has its line end."""
    long: bool
    """Longer than the bound: only :attr:`head` was kept."""
    nul: bool = False
    """It is all NUL bytes (what a power loss can leave at the end of a file)."""
    bound: int = MAX_LINE
    """The longest line passed on whole."""

    def why(self) -> str:
        """What it is, for a person."""
        if not self.long:
            return ("the last line has no line end (a write in progress, or cut off): not "
                    f"used: {excerpt(self.head)}")
        what = (" of NUL bytes (what a power loss leaves at the end of a file being "
                "written)" if self.nul else f" starting {excerpt(self.head, 24)}")
        end = "" if self.ended else ", without a line end"
        return (f"a line of {self.size:,} bytes{what}{end}, longer than {mib(self.bound)}: "
                "not read")


def _all_nul(data: bytes) -> bool:
    return not data.strip(b"\0")


class _Long:
    """A long line being skipped: its size, first bytes and whether all are NUL."""

    def __init__(self, data: bytes) -> None:
        self.head = data[:EXCERPT]
        self.size = len(data)
        self.nul = _all_nul(data)

    def add(self, data: bytes) -> None:
        if len(self.head) < EXCERPT:
            self.head += data[:EXCERPT - len(self.head)]
        self.size += len(data)
        if self.nul:
            self.nul = _all_nul(data)

    def done(self, ended: bool, bound: int) -> Cut:
        return Cut(self.head, self.size, ended, True, self.nul, bound)


def read_lines(f: IO[bytes], max_line: int = MAX_LINE, chunk: int = CHUNK
               ) -> Iterator[bytes | Cut]:
    """The lines of binary file ``f`` from its position: each complete line as bytes
    without its ``\\n`` (a ``\\r`` is kept), a line longer than ``max_line`` (its bytes
    are skipped, not held) and a last line without its line end as a :class:`Cut`.

    Memory stays within ``max_line + 2 * chunk`` bytes whatever the file holds.
    """
    carry = b""
    skipping: _Long | None = None
    while block := f.read(chunk):
        if skipping is not None:
            i = block.find(b"\n")
            if i < 0:
                skipping.add(block)
                continue
            skipping.add(block[:i])
            yield skipping.done(True, max_line)
            skipping = None
            block = block[i + 1:]
        data = carry + block if carry else block
        parts = data.split(b"\n")
        carry = parts.pop()
        for line in parts:
            if len(line) > max_line:
                yield _Long(line).done(True, max_line)
            else:
                yield line
        if len(carry) > max_line:
            skipping, carry = _Long(carry), b""
    if skipping is not None:
        yield skipping.done(False, max_line)
    elif carry:
        yield Cut(carry, len(carry), False, False, _all_nul(carry), max_line)
