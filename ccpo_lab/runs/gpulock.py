"""Machine-wide GPU locks: two sweeps on one node never run on the same GPU at once.

Every GPU index has a lock file ``<dir>/gpu-<i>.lock``. A slot pool takes an exclusive
``flock`` on the files of a run's slice (and on its sweep's slot file,
``<sweep>/_jobs/slot-<k>.lock``: one sweep never runs more than ``max_parallel`` runs at
once, whatever pool started them) and hands the locked file descriptions down to the
processes that execute the run: submitit's controller, the job, and the run's own process
inherit them (:data:`LOCK_FDS_ENV` names them), so a lock lasts exactly as long as the
last of those processes, not as long as the pool. A killed pool's runs keep their GPUs;
another pool (another sweep, another user, a relaunch of this sweep) finds them held and
waits. The kernel drops a lock when its last holder exits, so nothing leaves a stale lock
behind; nobody ever unlocks explicitly (``LOCK_UN`` would free a lock its other holders
still rely on), a holder only closes its copy. The directory is ``$CCPO_LAB_GPU_LOCK_DIR``,
else ``<tmp>/ccpo-lab-gpu-locks`` (created world-writable and sticky, so every user of the
machine shares it). GPU indices are the ones the slots name (``$CUDA_VISIBLE_DEVICES`` or
``nvidia-smi`` numbering).

A shared folder is used only while nobody else controls it: a real directory (not a
link) owned by this user or by root, and sticky if others may write to it (so nobody can
replace another user's lock file). Otherwise (another user created it, or made it
writable without the sticky bit) this user's own ``<tmp>/ccpo-lab-gpu-locks-<uid>`` is
used, with a warning: that user's sweeps then do not see these locks. A lock file is
opened without following a link or blocking on a FIFO and refused unless it is a regular
file (:class:`~ccpo_lab.runs.owner.UnsafeLockFile`); it is made readable by others only
when this user owns it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ccpo_lab.runs.owner import UnsafeLockFile, open_lock_file

LOCK_DIR_ENV = "CCPO_LAB_GPU_LOCK_DIR"
"""Environment variable naming the lock directory."""
LOCK_FDS_ENV = "CCPO_LAB_LOCK_FDS"
"""Environment variable naming the inherited descriptors of the locks a run holds
(comma-separated descriptor numbers)."""


def lock_dir() -> Path:
    """The machine's GPU lock directory (created if missing; module docstring: a shared
    folder someone else controls is not used)."""
    env = os.environ.get(LOCK_DIR_ENV, "").strip()
    d = Path(env) if env else Path(tempfile.gettempdir()) / "ccpo-lab-gpu-locks"
    if not d.is_dir() and not d.is_symlink():
        d.mkdir(parents=True, exist_ok=True)
        if not env:
            with contextlib.suppress(OSError):
                d.chmod(0o1777)
    why = foreign(d)
    if why is None:
        return d
    own = Path(tempfile.gettempdir()) / f"ccpo-lab-gpu-locks-{os.getuid()}"
    print(f"warning: GPU lock folder {d} {why}: not used; using {own} (other users' "
          "sweeps do not see these locks)", file=sys.stderr, flush=True)
    own.mkdir(mode=0o700, exist_ok=True)
    if foreign(own) is not None:
        raise UnsafeLockFile(errno.EPERM, f"{foreign(own)}: refusing to lock GPUs there",
                             str(own))
    return own


def foreign(d: Path) -> str | None:
    """Why someone else controls the folder ``d`` (None: it is safe to lock in)."""
    try:
        st = os.lstat(d)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid not in (os.getuid(), 0):
        return f"belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return "is writable by others without the sticky bit"
    return None


class GpuLock:
    """Exclusive locks held on a slice's GPUs (and a slot); :meth:`release` drops this
    process's hold (idempotent). The locks end when every process holding them (this
    one, and the run's processes they were handed to) has closed them or exited."""

    def __init__(self, gpus: tuple[int, ...], fds: list[int]) -> None:
        self.gpus = gpus
        self._fds = fds

    def release(self) -> None:
        """Close this process's descriptors (no ``LOCK_UN``: a run these locks were handed
        to keeps them until it exits)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:  # a dropped lock must not hold its GPUs until exit
        with contextlib.suppress(Exception):  # at interpreter exit the kernel frees them
            self.release()

    @property
    def held(self) -> bool:
        """Whether the locks are still held (an empty slice holds none)."""
        return bool(self._fds)

    @property
    def fds(self) -> tuple[int, ...]:
        """The locked descriptors (to hand to the processes that execute the run)."""
        return tuple(self._fds)


def _lock_file(path: Path) -> int | None:
    """An exclusively locked descriptor of ``path`` (created), or None if it is held;
    :class:`UnsafeLockFile` when it is not a regular file."""
    fd = open_lock_file(path, os.O_RDWR | os.O_CREAT, 0o666)
    if os.fstat(fd).st_uid == os.getuid():
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # readable by the next user whatever the umask
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_lock(gpus: Sequence[int], directory: Path | None = None,
             also: Sequence[Path] = ()) -> GpuLock | None:
    """Lock every GPU of ``gpus`` and every file of ``also`` (a sweep's slot) without
    waiting; None, holding nothing, if any of them is held by another holder. An empty
    slice with nothing ``also`` (a CPU slot of no sweep) always succeeds."""
    paths = list(also)
    if gpus:
        d = directory if directory is not None else lock_dir()
        paths += [d / f"gpu-{int(g)}.lock" for g in sorted(set(gpus))]
    fds: list[int] = []
    for path in paths:
        fd = _lock_file(path)
        if fd is None:
            GpuLock(tuple(gpus), fds).release()
            return None
        fds.append(fd)
    return GpuLock(tuple(gpus), fds)


def slot_lock_file(directory: Path, slot: int) -> Path:
    """The lock file of slot ``slot`` of the sweep whose jobs directory is ``directory``."""
    return Path(directory) / f"slot-{int(slot)}.lock"


def lock_fds_env(fds: Sequence[int]) -> dict[str, str]:
    """The environment entry that names ``fds`` to the processes they are handed to."""
    return {LOCK_FDS_ENV: ",".join(str(int(fd)) for fd in fds)}


def inherited_lock_fds() -> tuple[int, ...]:
    """The lock descriptors this process inherited (:data:`LOCK_FDS_ENV`), those that are
    open; () when none were handed down."""
    fds = []
    for part in os.environ.get(LOCK_FDS_ENV, "").split(","):
        if part.strip().isdigit():
            fd = int(part)
            try:
                os.fstat(fd)
            except OSError:
                continue
            fds.append(fd)
    return tuple(fds)


def keep_inherited_locks() -> tuple[int, ...]:
    """In a run's own process: hold the inherited lock descriptors for this process's
    life but hand them to nothing it starts (close-on-exec, and the environment entry
    dropped), so that no helper process it leaves behind keeps its GPUs."""
    fds = inherited_lock_fds()
    for fd in fds:
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
    os.environ.pop(LOCK_FDS_ENV, None)
    return fds
