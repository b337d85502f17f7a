"""Machine-wide GPU locks: two sweeps on one node never run on the same GPU at once.

Every GPU index has a lock file ``<dir>/gpu-<i>.lock``. A slot pool holds an exclusive
``flock`` on the files of a run's slice for as long as the run runs; another pool (another
sweep, another user) finds them held and waits. The kernel drops a lock when its holder
exits, so a killed pool leaves no stale lock behind. The directory is
``$CCPO_LAB_GPU_LOCK_DIR``, else ``<tmp>/ccpo-lab-gpu-locks`` (created world-writable and
sticky, so every user of the machine shares it). GPU indices are the ones the slots name
(``$CUDA_VISIBLE_DEVICES`` or ``nvidia-smi`` numbering).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

LOCK_DIR_ENV = "CCPO_LAB_GPU_LOCK_DIR"
"""Environment variable naming the lock directory."""


def lock_dir() -> Path:
    """The machine's GPU lock directory (created if missing)."""
    env = os.environ.get(LOCK_DIR_ENV, "").strip()
    d = Path(env) if env else Path(tempfile.gettempdir()) / "ccpo-lab-gpu-locks"
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True)
        if not env:
            with contextlib.suppress(OSError):
                d.chmod(0o1777)
    return d


class GpuLock:
    """Exclusive locks held on a slice's GPUs; :meth:`release` frees them (idempotent)."""

    def __init__(self, gpus: tuple[int, ...], fds: list[int]) -> None:
        self.gpus = gpus
        self._fds = fds

    def release(self) -> None:
        """Unlock and close every lock file."""
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:  # a dropped lock must not hold its GPUs until exit
        with contextlib.suppress(Exception):  # at interpreter exit the kernel frees them
            self.release()

    @property
    def held(self) -> bool:
        """Whether the locks are still held (an empty slice holds none)."""
        return bool(self._fds)


def try_lock(gpus: Sequence[int], directory: Path | None = None) -> GpuLock | None:
    """Lock every GPU of ``gpus`` without waiting; None, holding nothing, if any of them
    is held by another holder. An empty slice (a CPU slot) always succeeds."""
    if not gpus:
        return GpuLock((), [])
    d = directory if directory is not None else lock_dir()
    fds: list[int] = []
    for g in sorted(set(gpus)):
        path = d / f"gpu-{int(g)}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # readable by the next user whatever the umask
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            GpuLock(tuple(gpus), fds).release()
            return None
        fds.append(fd)
    return GpuLock(tuple(gpus), fds)
