"""Stop signals held off a critical section, then delivered.

A stop (SIGTERM, SIGHUP, Ctrl-C) is turned into an exception by a Python handler
(:func:`ccpo_lab.runs.execute.stop_on`, or KeyboardInterrupt). Raised inside a write that
a C library drives through a Python file object (``torch.save`` into an open file), it
tears the write: torch then reports ``unexpected pos ...`` and the run was recorded
``failed`` instead of ``interrupted``. Within :func:`deferred` such signals are only
recorded; after the block the handlers in force before it get them, so the stop raises
when the write is whole.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["STOP_SIGNALS", "deferred"]

STOP_SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals a run stops on."""


@contextlib.contextmanager
def deferred(*signums: int) -> Iterator[None]:
    """Within the block, ``signums`` (default :data:`STOP_SIGNALS`) are recorded, not
    handled; after it the previous handlers are restored and each recorded signal is
    raised again once, in the order it came, so they act as if it arrived just then (a
    default disposition included). Main thread only: elsewhere a no-op (Python runs
    handlers in the main thread, so a worker thread's block is not interrupted by them).
    A signal whose handler was not set from Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def record(signum: int, _frame: object) -> None:
        got.append(signum)

    old: dict[int, signal.Handlers | int | object] = {}
    for s in signums or STOP_SIGNALS:
        if signal.getsignal(s) is not None:
            old[s] = signal.signal(s, record)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)  # type: ignore[arg-type]
        for s in dict.fromkeys(got):
            signal.raise_signal(s)
