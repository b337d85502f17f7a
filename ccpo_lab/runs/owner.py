"""Who executes a run: one live executor per run directory, enforced by a kernel lock.

The process that executes a run holds an exclusive ``flock`` on the run's ``owner.lock``
for as long as it executes it, whatever launched it (inline, a local pool, a Slurm job, a
hand-written job script calling ``python -m ccpo_lab.runs.execute``). A second executor
of the same run finds the lock held and leaves the run to its owner. The kernel drops the
lock when its holder exits, however it exits (``kill -9`` included), so a lock is never
stale, and "the lock is held" is what ``status`` means by a running run.

The lock file also holds the owner's pid, host and start time (JSON), written once the
lock is taken, so ``status`` can show the process. That text is never trusted to signal
anything: :func:`lock_holders` finds the processes that provably hold the lock (an open
file description of this very file carrying the exclusive lock, in ``/proc``) and are
this user's, and ``cancel`` signals only those. The lock file is opened without following
a symbolic link and without blocking (a FIFO), and refused unless it is a regular file
(:class:`UnsafeLockFile`): nothing is written through a link, and nothing waits on a FIFO.

A probe (:func:`current_owner`) takes a shared lock for a few microseconds; an executor
that finds only probes in its way retries (for at most :data:`ACQUIRE_RETRY_S`), one that
finds another executor gives up at once. Where the file system has no ``flock`` (Lustre
mounted without it), the run executes unlocked and says so on stderr.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.provenance import now_iso

ACQUIRE_RETRY_S = 2.0
"""Seconds an executor retries a lock that only probes hold (each for microseconds)."""
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


@dataclass(frozen=True)
class Owner:
    """The process executing a run (what its lock file says)."""

    pid: int | None
    """Its process id (None while it is still writing the file)."""
    host: str | None
    """The host it runs on."""
    since: str | None
    """When it took the run (ISO time)."""

    @property
    def here(self) -> bool:
        """Whether it runs on this host (it can be signalled from here)."""
        return self.host in (None, socket.gethostname())

    def describe(self) -> str:
        """``pid 1234 on node7``."""
        where = "" if self.here or not self.host else f" on {self.host}"
        return f"pid {self.pid if self.pid is not None else '?'}{where}"


class UnsafeLockFile(OSError):
    """``owner.lock`` is not a regular file (a symbolic link, a FIFO, ...): not used."""


_SAFE_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_lock_file(path: os.PathLike[str] | str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a lock or state file without following a link or blocking on a
    FIFO; the descriptor of a regular file, else :class:`UnsafeLockFile` (the caller's
    ``FileNotFoundError`` passes through)."""
    try:
        fd = os.open(path, flags | _SAFE_OPEN, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeLockFile(errno.ELOOP, "a symbolic link: not followed",
                                 str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeLockFile(errno.EINVAL, "not a regular file", str(path))
    return fd


class RunBusy(Exception):
    """The run is executed by another live process (its :class:`Owner`)."""

    def __init__(self, rd: RunDir, owner: Owner) -> None:
        super().__init__(f"{rd.path}: already executed by {owner.describe()}")
        self.owner = owner


class OwnerLock:
    """The exclusive lock on a run held by this process; :meth:`release` frees it."""

    def __init__(self, rd: RunDir, fd: int | None) -> None:
        self.rd = rd
        self._fd = fd
        self._depth = 1
        self._pid = os.getpid()

    @property
    def locked(self) -> bool:
        """Whether a kernel lock is held (False where the file system has none)."""
        return self._fd is not None

    def fileno(self) -> int | None:
        """The lock's file descriptor: pass it to a child process (``pass_fds``) that
        executes the run on its own, so that the lock lives as long as either does."""
        return self._fd

    def release(self) -> None:
        """Give the run up (the last of nested holds in this process releases the lock)."""
        self._depth -= 1
        if self._depth > 0:
            return
        _HELD.pop(str(self.rd.path.resolve()), None)
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> OwnerLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_HELD: dict[str, OwnerLock] = {}
"""Locks this process holds, by run directory (a nested acquire reuses the hold)."""


def _read(fd: int) -> Owner:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid")
    return Owner(pid=pid if isinstance(pid, int) else None,
                 host=data.get("host") if isinstance(data.get("host"), str) else None,
                 since=data.get("since") if isinstance(data.get("since"), str) else None)


def _held_exclusively(rd: RunDir) -> bool:
    """Whether an executor (not a probe's shared lock) holds the run's lock."""
    try:
        fd = open_lock_file(rd.owner_lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def acquire(rd: RunDir, *, wait_s: float = ACQUIRE_RETRY_S) -> OwnerLock:
    """Take the run for this process; :class:`RunBusy` when another process holds it.

    Reentrant within a process (a launcher's job and the executor it calls). Where the
    file system cannot lock, returns an unlocked hold after a warning on stderr.
    """
    key = str(rd.path.resolve())
    held = _HELD.get(key)
    if held is not None and held._pid == os.getpid() and held._depth > 0:
        held._depth += 1
        return held
    rd.path.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(rd.owner_lock, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if _held_exclusively(rd) or time.monotonic() >= deadline:
                owner = _read(fd)
                os.close(fd)
                raise RunBusy(rd, owner) from None
            time.sleep(0.01)  # only probes hold it, for an instant
        except OSError as e:
            if e.errno not in _UNSUPPORTED:
                os.close(fd)
                raise
            print(f"warning: {rd.path}: this file system cannot lock files ({e.strerror}); "
                  "executing without the one-executor guarantee", file=sys.stderr, flush=True)
            os.close(fd)
            fd = -1
            break
    lock = OwnerLock(rd, fd if fd >= 0 else None)
    if fd >= 0:
        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "since": now_iso()}).encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
    _HELD[key] = lock
    return lock


def try_acquire(rd: RunDir) -> OwnerLock | None:
    """:func:`acquire`, or None when another process holds the run."""
    try:
        return acquire(rd)
    except RunBusy:
        return None


def current_owner(rd: RunDir) -> Owner | None:
    """The live process executing ``rd`` (None: nobody holds it, or it cannot be known).

    Takes a shared lock for an instant; never waits. A lock held by this very process
    counts as held.
    """
    held = _HELD.get(str(rd.path.resolve()))
    if held is not None and held._pid == os.getpid() and held.locked:
        return Owner(pid=os.getpid(), host=socket.gethostname(), since=None)
    try:
        fd = open_lock_file(rd.owner_lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd)
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def lock_holders(rd: RunDir) -> list[int] | None:
    """Pids of this user's processes that hold the run's lock exclusively: an open file
    description of this ``owner.lock`` (same device and inode) whose ``/proc/<pid>/fdinfo``
    shows the ``FLOCK ... WRITE`` lock. The pid the file names is looked at first; if it
    is not such a holder (a stale or a planted file), every process is. None where
    ``/proc`` cannot tell (not Linux): then nothing may be signalled."""
    try:
        fd = open_lock_file(rd.owner_lock, os.O_RDONLY)
    except OSError:
        return []
    try:
        st = os.fstat(fd)
        named = _read(fd).pid
    finally:
        os.close(fd)
    if not os.path.isdir("/proc/self/fdinfo"):
        return None
    ident = (st.st_dev, st.st_ino)
    if named is not None and named != os.getpid() and _holds(named, ident):
        return [named]
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and _holds(int(entry), ident):
            out.append(int(entry))
    return out


def _holds(pid: int, ident: tuple[int, int]) -> bool:
    """Whether process ``pid`` is this user's and holds the exclusive flock of the file
    ``ident`` (``(st_dev, st_ino)``) through one of its descriptors."""
    base = f"/proc/{pid}"
    try:
        if os.stat(base).st_uid != os.getuid():
            return False
        fds = os.listdir(f"{base}/fd")
    except OSError:
        return False
    for name in fds:
        try:
            st = os.stat(f"{base}/fd/{name}")
            if (st.st_dev, st.st_ino) != ident:
                continue
            with open(f"{base}/fdinfo/{name}", encoding="ascii", errors="replace") as fh:
                info = fh.read(4096)
        except OSError:
            continue
        if any(line.startswith("lock:") and " FLOCK " in line and " WRITE " in line
               for line in info.splitlines()):
            return True
    return False


@contextlib.contextmanager
def owning(rd: RunDir) -> Iterator[OwnerLock]:
    """``with owning(rd):`` :func:`acquire` ... release."""
    lock = acquire(rd)
    try:
        yield lock
    finally:
        lock.release()


def describe_exit(returncode: int) -> str:
    """``killed by SIGKILL`` / ``exited with code 3`` (a ``Popen.returncode``)."""
    import signal

    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exited with code {returncode}"


def owner_record(owner: Owner | None) -> dict[str, Any] | None:
    """``owner`` as a JSON-able dict (status ``--json``)."""
    if owner is None:
        return None
    return {"pid": owner.pid, "host": owner.host, "since": owner.since}
