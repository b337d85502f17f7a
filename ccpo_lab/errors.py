"""The one user-facing error type.

Every mistake a user can make (bad YAML, unknown key, wrong type, unknown arm,
a relaunch that differs from what a run directory holds, ...) raises
:class:`UserError`. The CLI's single error boundary prints it as one line and
exits with code 2; anything else is a bug and shows a traceback under
``CCPO_LAB_DEBUG=1``.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from pathlib import Path
from typing import Any


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
            where = self.file
        if self.key:
            where = f"{where}: {self.key}" if where else self.key
        if where:
            parts.append(where + ":")
        parts.append(self.message)
        if self.value is not None:
            parts.append(f"(got {self.value!r})")
        if self.valid is not None:
            valid = self.valid if isinstance(self.valid, str) else ", ".join(map(str, self.valid))
            parts.append(f"; valid: {valid}")
        text = " ".join(parts).replace(" ;", ";")
        return text if self.detail is None else f"{text}\n{self.detail}"


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
