"""The one user-facing error type.

Every mistake a user can make (bad YAML, unknown key, wrong type, unknown arm,
a relaunch that differs from what a run directory holds, ...) raises
:class:`UserError`. The CLI's single error boundary prints it as one line and
exits with code 2; anything else is a bug and shows a traceback under
``CCPO_LAB_DEBUG=1``.

Whatever part of the line comes from the user (the value, a key, a file name, the valid
choices, a message that quotes them) is cut to a readable length here, in bounded time:
a value is shown by :func:`short_repr`, never by a full ``repr`` (a YAML file's value
can be a structure of millions of items), and every part has a character budget.
"""

from __future__ import annotations

import errno
import reprlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

VALUE_CHARS = 160
"""Most characters of a value echoed in an error (``(got ...)``)."""
PART_CHARS = 400
"""Most characters of a file, key or list of valid choices in an error line."""
MESSAGE_CHARS = 1500
"""Most characters of an error's message (advice may be long; a value quoted in it is cut
to this too, where its writer did not cut it)."""
DETAIL_LINES = 40
"""Most lines of an error's detail block (a diff), each cut to :data:`PART_CHARS`."""


def cut(text: str, limit: int = PART_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail with the
    number of characters left out between them."""
    if len(text) <= limit:
        return text
    keep = max(limit - 30, 10)
    head, tail = text[:keep * 2 // 3], text[len(text) - keep // 3:]
    return f"{head}...[{len(text) - len(head) - len(tail):,} characters]...{tail}"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 20, 20, 12, 20
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = VALUE_CHARS, VALUE_CHARS, 60


def short_repr(value: Any, limit: int = VALUE_CHARS) -> str:
    """``repr(value)`` for a small value; for a large one, a repr of its first items
    (``reprlib``, whose time does not grow with the value's size) cut to ``limit``."""
    return cut(_REPR.repr(value), limit)


class UserError(Exception):
    """A mistake in the user's input, reported as one line.

    The message names, where known, the file, the key path inside it, the bad
    value and what would have been valid.
    """

    exit_code = 2
    """The CLI's exit code for it: 2, a usage error (the input is at fault)."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        key: str | None = None,
        value: Any = None,
        valid: Iterable[Any] | str | None = None,
        detail: str | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        self.value = value
        self.valid = valid if isinstance(valid, str) or valid is None else list(valid)
        self.detail = detail
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        parts: list[str] = []
        where = ""
        if self.file:
            where = cut(self.file)
        if self.key:
            where = f"{where}: {cut(self.key)}" if where else cut(self.key)
        if where:
            parts.append(where + ":")
        parts.append(cut(self.message, MESSAGE_CHARS))
        if self.value is not None:
            parts.append(f"(got {short_repr(self.value)})")
        if self.valid is not None:
            parts.append(f"; valid: {_valid_text(self.valid)}")
        text = " ".join(parts).replace(" ;", ";")
        return text if self.detail is None else f"{text}\n{_detail_text(self.detail)}"


def _valid_text(valid: list[Any] | str) -> str:
    if isinstance(valid, str):
        return cut(valid)
    shown: list[str] = []
    used = 0
    for v in valid:
        item = cut(str(v), 80)
        if used + len(item) > PART_CHARS and shown:
            return ", ".join(shown) + f", ... ({len(valid) - len(shown)} more)"
        shown.append(item)
        used += len(item) + 2
    return ", ".join(shown)


def _detail_text(detail: str) -> str:
    lines = detail.splitlines()
    shown = [cut(line) for line in lines[:DETAIL_LINES]]
    if len(lines) > DETAIL_LINES:
        shown.append(f"  ... ({len(lines) - DETAIL_LINES} more lines)")
    return "\n".join(shown)


class RunConflictError(UserError):
    """A launch into a run directory that holds a different run identity."""


class EnvironmentFailure(UserError):
    """The machine failed the command, not the input (a full disk, an I/O error): one
    line, naming the path and what to do, exit code 1."""

    exit_code = 1


_ADVICE: dict[int, tuple[str, bool]] = {
    errno.EROFS: ("choose a writable location, or make this one writable", True),
    errno.EACCES: ("choose a location you may use, or change its permissions", True),
    errno.EPERM: ("choose another location, or change its permissions", True),
    errno.ELOOP: ("a symbolic link leads back to itself: fix or remove the link", True),
    errno.ENAMETOOLONG: ("choose a shorter path", True),
    errno.ENOTDIR: ("", True),
    errno.EISDIR: ("", True),
    errno.EEXIST: ("", True),
    errno.ENOENT: ("", True),
    errno.ENOSPC: ("free some space, then run the command again", False),
    errno.EDQUOT: ("free some space, then run the command again", False),
    errno.EFBIG: ("free space or raise the file size limit, then run the command again",
                  False),
    errno.EIO: ("the disk or the network file system failed: check it, then run the "
                "command again", False),
}
"""What to do about each environment error, and whether the input is at fault (a path the
user chose: exit 2) or the machine (exit 1)."""


def os_failure(e: OSError, option: str | None = None, doing: str | None = None,
               outcome: str | None = None, file: str | Path | None = None
               ) -> UserError | None:
    """One line for an :class:`OSError` of the environment (a read-only or full disk, a
    symlink loop, a permission): the path (and the option that named it), what was being
    done, the system's reason, what came of it (``outcome``) and what to do; an
    :class:`EnvironmentFailure` (exit 1) when the machine is at fault, a :class:`UserError`
    (exit 2) when a path the user chose is. ``file``: the path to name (default: the
    error's). None for any other errno (a bug, shown as such)."""
    found = _ADVICE.get(e.errno if e.errno is not None else -1)
    if found is None:
        return None
    advice, usage = found
    reason = e.strerror or errno.errorcode.get(e.errno or 0, type(e).__name__)
    text = ": ".join(x for x in (doing, reason) if x)
    text += f"; {outcome}" if outcome else ""
    text += f": {advice}" if advice else ""
    cls = UserError if usage else EnvironmentFailure
    path = file if file is not None else e.filename
    return cls(text, file=None if path is None else str(path), key=option)
