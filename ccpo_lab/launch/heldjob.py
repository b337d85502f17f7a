"""Submitit local jobs that inherit their pool's locks: a run holds its own GPU locks.

The ``local`` launcher's pool locks a run's GPU slice and sweep slot
(:mod:`ccpo_lab.runs.gpulock`) and starts the run's job with :class:`LockedExecutor`:
submitit's local executor, except that its controller (``python -m
ccpo_lab.launch.heldjob FOLDER``, which runs submitit's own controller) inherits the locked
descriptors and hands them to the job's task, which hands them to the run's process
(:func:`ccpo_lab.runs.execute.supervise`). Each process of the chain holds the locks while
it lives, so they outlast a killed pool (or a killed controller or job wrapper) exactly as
long as the run goes on, and end with the last of them.

Submitit starts both processes with ``subprocess.Popen`` and closes every other
descriptor; while it starts them, its module's ``subprocess`` is one whose ``Popen`` also
passes the lock descriptors (``pass_fds``) and names them in the environment
(:data:`~ccpo_lab.runs.gpulock.LOCK_FDS_ENV`), and, for the controller, runs this
module in place of ``submitit.local._local``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from submitit import LocalExecutor

from ccpo_lab.runs.gpulock import inherited_lock_fds, lock_fds_env

SUBMITIT_CONTROLLER = "submitit.local._local"
"""The module submitit's local executor runs as a job's controller."""
CONTROLLER = "ccpo_lab.launch.heldjob"
"""The module run in its place (this one): submitit's controller, passing the locks on."""


class _PassingSubprocess:
    """The ``subprocess`` module, but ``Popen`` passes ``fds`` on (and, for a
    controller, runs :data:`CONTROLLER`)."""

    def __init__(self, fds: Sequence[int], controller: bool) -> None:
        self._fds = tuple(fds)
        self._controller = controller

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def Popen(self, cmd: Any, **kw: Any) -> subprocess.Popen[Any]:  # noqa: N802 - its name
        if self._controller:
            cmd = _as_controller(cmd)
        env = dict(kw.get("env") or os.environ)
        env.update(lock_fds_env(self._fds))
        kw["env"] = env
        kw["pass_fds"] = (*kw.get("pass_fds", ()), *self._fds)
        return subprocess.Popen(cmd, **kw)


def _as_controller(cmd: Any) -> Any:
    """Submitit's controller command with :data:`CONTROLLER` for its module."""
    if isinstance(cmd, str) and f" -m {SUBMITIT_CONTROLLER} " in cmd:  # with ``setup``
        return cmd.replace(f" -m {SUBMITIT_CONTROLLER} ", f" -m {CONTROLLER} ", 1)
    if isinstance(cmd, list) and SUBMITIT_CONTROLLER in cmd:
        return [CONTROLLER if x == SUBMITIT_CONTROLLER else x for x in cmd]
    raise RuntimeError(f"submitit's local controller command changed: {cmd!r}")


@contextlib.contextmanager
def _passing(fds: Sequence[int], controller: bool) -> Iterator[None]:
    """Within the block, the processes submitit's local module starts inherit ``fds``."""
    import submitit.local.local as sl

    real = sl.subprocess
    setattr(sl, "subprocess", _PassingSubprocess(fds, controller))  # noqa: B010
    try:
        yield
    finally:
        setattr(sl, "subprocess", real)  # noqa: B010


class LockedExecutor(LocalExecutor):
    """Submitit's local executor whose jobs inherit the locked descriptors ``fds``."""

    def __init__(self, folder: str | Path, fds: Sequence[int], python: str | None = None
                 ) -> None:
        super().__init__(folder=folder, python=python)
        self.lock_fds = tuple(fds)

    def _submit_command(self, command: str) -> Any:
        if not self.lock_fds:
            return super()._submit_command(command)
        with _passing(self.lock_fds, controller=True):
            return super()._submit_command(command)


def main(argv: list[str] | None = None) -> int:
    """A job's controller: ``python -m ccpo_lab.launch.heldjob FOLDER`` (submitit's
    controller; the tasks it starts inherit this process's lock descriptors)."""
    from submitit.local.local import Controller

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m {CONTROLLER} SUBMITIT_FOLDER", file=sys.stderr)
        return 2
    controller = Controller(Path(args[0]))
    with _passing(inherited_lock_fds(), controller=False):
        controller.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
