"""Real file-system faults for tests: a full disk and a read-only one.

A command runs as its own process inside a private mount namespace (``unshare -m``,
where the sandbox allows it: root, or a user namespace), on

* a **full disk**: a tmpfs holding a copy of a directory, shrunk to what that copy uses
  plus ``free_kb`` (``mount -o remount,size=``), so the command's writes beyond that
  fail with ``ENOSPC`` as on a real full disk. What the command left is copied back out
  for the test to read.
* a **read-only disk**: a directory bind-mounted read-only over itself (``EROFS``).

Where mounting is not allowed, a full disk falls back to a per-process file size limit
(``RLIMIT_FSIZE``: writes beyond it fail with ``EFBIG``), said in :attr:`Ran.how`; a
read-only disk has no fallback as root (permissions do not bind root) and the test is
skipped, saying why.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "ccpo_lab.cli.main"]


@dataclass(frozen=True)
class Ran:
    """A command's outcome."""

    rc: int
    out: str
    err: str
    how: str
    """``tmpfs``, ``rlimit`` (file size limit) or ``bind-ro``."""


@functools.cache
def can_mount() -> bool:
    """Whether this process may mount a tmpfs in a private mount namespace."""
    if shutil.which("unshare") is None:
        return False
    d = tempfile.mkdtemp(prefix="ccpo-mount-probe-")
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(d)}"],
                           capture_output=True, timeout=30)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        os.rmdir(d)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}


def on_full_disk(src: Path, args: list[str], free_kb: int, back: Path,
                 timeout: float = 600, file_kb: int = 16) -> Ran:
    """``ccpo-lab ARGS`` with ``src`` copied onto a disk with ``free_kb`` KB free.

    In ``args``, ``@`` stands for the copy of ``src``. Afterwards ``back`` holds what the
    command left there (a copy). Without mounts: ``src`` is copied to ``back`` and the
    command runs there with a file size limit of ``file_kb`` KB per file (the first file
    written beyond it fails, as on a full disk).
    """
    if can_mount():
        mnt = Path(tempfile.mkdtemp(prefix="ccpo-full-"))
        here = mnt / src.name
        cmd = " ".join(shlex.quote(a.replace("@", str(here))) for a in [*CLI, *args])
        script = f"""
set -e
mount -t tmpfs -o size=1g tmpfs {shlex.quote(str(mnt))}
cp -a {shlex.quote(str(src))} {shlex.quote(str(here))}
used=$(df -k --output=used {shlex.quote(str(mnt))} | tail -1)
mount -o remount,size=$((used + {int(free_kb)}))k {shlex.quote(str(mnt))}
set +e
{cmd}
rc=$?
cp -a {shlex.quote(str(here))} {shlex.quote(str(back))}
exit $rc
"""
        try:
            p = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True,
                               text=True, timeout=timeout, env=_env(), cwd=REPO)
        finally:
            os.rmdir(mnt)
        return Ran(p.returncode, p.stdout, p.stderr, "tmpfs")
    shutil.copytree(src, back, symlinks=True)
    limit = int(file_kb) * 1024
    wrapper = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
               f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); "
               "from ccpo_lab.cli.main import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", wrapper, *(a.replace("@", str(back))
                                                         for a in args)],
                       capture_output=True, text=True, timeout=timeout, env=_env(), cwd=REPO)
    return Ran(p.returncode, p.stdout, p.stderr, "rlimit")


def on_read_only(path: Path, args: list[str], timeout: float = 600) -> Ran:
    """``ccpo-lab ARGS`` with ``path`` read-only (bind-mounted over itself); skips the
    test where mounts are not allowed."""
    if not can_mount():
        pytest.skip("mounts are not allowed here (unshare -m): no read-only disk to test on")
    q = shlex.quote(str(path))
    cmd = " ".join(shlex.quote(a) for a in [*CLI, *args])
    script = f"mount --bind {q} {q} && mount -o remount,bind,ro {q} && {cmd}"
    p = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True,
                       text=True, timeout=timeout, env=_env(), cwd=REPO)
    return Ran(p.returncode, p.stdout, p.stderr, "bind-ro")
