"""The adaptive design in the sweep directory: its state file, its lock, the runs' scores.

``<sweep>/adaptive.json`` (:attr:`~ccpo_lab.runs.layout.SweepDir.adaptive_state`) holds
the :class:`~ccpo_lab.adaptive.state.AdaptiveState` JSON (the design and every look) plus
what the looks read: the metric and converged window the scores came from, and each
look's per-seed scores (``inputs``), so a decision can be audited after its runs moved
on. It is written atomically (a temporary file and a rename) after each look, before any
seed of that look is launched: a command killed between the decision and the launch
leaves the look recorded, and the next command launches its seeds without deciding
again.

``<sweep>/adaptive.lock`` is held with ``flock`` by the one command that reads, decides
and writes the state (:class:`DesignLock`); the kernel releases it when that process
dies, so a crashed login node leaves no stale lock. A second command waits a few seconds
for it, then refuses, naming the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import numpy as np

from ccpo_lab.adaptive.decide import Scores, decide_look
from ccpo_lab.adaptive.state import AdaptiveState
from ccpo_lab.config.analysis import RunScore
from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.errors import UserError
from ccpo_lab.runs.files import read_small
from ccpo_lab.runs.layout import RunDir, SweepDir
from ccpo_lab.stats import window_summary

__all__ = ["DesignLock", "DesignRecord", "read_record", "run_score", "write_record"]

LOCK_WAIT_S = 10.0
"""Seconds a command waits for another one's lock before refusing."""


@dataclass(frozen=True)
class _DesignState:
    """The record's first field (before the score's definition)."""

    state: AdaptiveState
    """The design and its looks (never re-decided)."""


@dataclass(frozen=True)
class DesignRecord(RunScore, _DesignState):
    """The state file: the design's state, the scores' definition (``metric`` and
    ``window_start``: :class:`~ccpo_lab.config.analysis.RunScore`), each look's inputs."""

    inputs: tuple[Mapping[str, Mapping[int, float]], ...] = field(default=())
    """Per look (in order), arm -> seed -> the score it read (nan: no value)."""

    def advance(self, scores: Scores) -> DesignRecord:
        """The record with the next look decided from ``scores`` and appended (only the
        assigned seeds' scores are kept as its inputs). Raises ValueError when the look
        is not ready (:func:`~ccpo_lab.adaptive.decide.pending_seeds`)."""
        look = decide_look(self.state, scores)
        assigned = self.state.assigned_seeds()
        used = {a: {s: float(scores[a][s]) for s in assigned[a] if s in scores.get(a, {})}
                for a in assigned}
        return DesignRecord(AdaptiveState(self.state.design, (*self.state.looks, look)),
                            self.metric, self.window_start, (*self.inputs, used))

    def to_json(self) -> str:
        """Deterministic JSON: the state's document plus ``scores`` and ``inputs``."""
        doc = json.loads(self.state.to_json())
        doc["scores"] = {"metric": self.metric, "window_start": self.window_start}
        doc["inputs"] = [{a: {str(s): _finite(v) for s, v in sorted(per.items())}
                          for a, per in look.items()} for look in self.inputs]
        return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> DesignRecord:
        """Inverse of :meth:`to_json`; ValueError (or UserError for a bad design) when
        malformed."""
        state = AdaptiveState.from_json(text)
        doc = json.loads(text)
        try:
            sc = doc["scores"]
            metric, window = str(sc["metric"]), int(sc["window_start"])
            inputs = tuple({str(a): {int(s): math.nan if v is None else float(v)
                                     for s, v in per.items()} for a, per in look.items()}
                           for look in doc.get("inputs", []))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"malformed scores or inputs: {e!r}") from None
        return cls(state, metric, window, inputs)


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def read_record(sweep: SweepDir) -> DesignRecord | None:
    """The sweep's design record (None when it has no ``adaptive.json``).

    Raises:
        UserError: the file exists but cannot be read back (named, never overwritten).
    """
    path = sweep.adaptive_state
    if not path.is_file() and not path.is_symlink():
        return None
    try:
        return DesignRecord.from_json(read_small(path, sweep.path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, UserError) as e:
        raise UserError(f"the adaptive design's state cannot be read ({e}); it is left as "
                        "it is: restore it, or move it away to start the design over",
                        file=path) from None


def write_record(sweep: SweepDir, record: DesignRecord) -> None:
    """Replace ``adaptive.json`` atomically (call under :class:`DesignLock`)."""
    atomic_write_text(sweep.adaptive_state, record.to_json())


def run_score(rd: RunDir, metric: str, window_start: int) -> float:
    """A completed run's score: the mean of ``metric`` over evaluations at step >=
    ``window_start`` (the report's per-seed value); nan when it has none there.

    Raises:
        UserError: the run's metrics file cannot be read (naming it).
    """
    from ccpo_lab.runs.metrics import MetricsScan, value_problem

    pts = []
    scan = MetricsScan(rd.metrics, keep=1, root=rd.sweep_root)
    try:
        for r in scan:
            v = r.data.get(metric)
            if v is None and metric not in r.data:
                continue
            why = value_problem(v, metric)
            if why is not None and v is not None:  # null: not finite when logged, skipped
                scan.problem(r.line, f"{metric}: {why}")
            elif why is None and v is not None:
                pts.append((r.step, float(v)))
    except OSError as e:
        raise UserError(f"cannot read the run's metrics for the adaptive design: {e}",
                        file=rd.metrics) from None
    err = scan.error()
    if err is not None:
        raise UserError(f"cannot read the run's metrics for the adaptive design: {err}",
                        file=rd.metrics)
    steps = np.array([s for s, _ in pts], dtype=np.int64)
    vals = np.array([v for _, v in pts], dtype=np.float64)
    return float(window_summary(steps, vals, window_start).mean)


class DesignLock:
    """``with DesignLock(sweep):`` -- the exclusive right to decide the sweep's looks.

    An ``flock`` on ``adaptive.lock`` (freed by the kernel when the holder dies). The
    holder writes its pid, host and start time into the file, which a refused command
    quotes.
    """

    def __init__(self, sweep: SweepDir, wait_s: float | None = None) -> None:
        self.sweep = sweep
        self.wait_s = LOCK_WAIT_S if wait_s is None else wait_s
        self._fd: int | None = None

    def __enter__(self) -> DesignLock:
        path = self.sweep.adaptive_lock
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = Path(path).read_text(encoding="utf-8", errors="replace").strip()
                    os.close(fd)
                    raise UserError(
                        "another ccpo-lab command is taking this sweep's adaptive decisions "
                        f"({holder or 'holder unknown'}); nothing was decided or launched: "
                        "wait for it to finish (or stop it) and run the command again",
                        file=path) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        with contextlib.suppress(OSError):
            os.close(fd)
