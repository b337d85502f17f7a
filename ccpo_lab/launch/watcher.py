"""Scheduler queries of one watch loop, with back-off (after submitit's ``InfoWatcher``).

``status --watch`` and a launch's monitor re-read the runs every few seconds; each read
asks each launcher's tracker once (:meth:`~ccpo_lab.launch.roles.Tracker.query`, a
``sacct`` with a 5 s timeout). When a scheduler cannot be asked, a :class:`QueryWatcher`
stops asking it for a while (doubling from :attr:`QueryWatcher.first_s` to
:attr:`QueryWatcher.max_s`) and says "unknown" (None) meanwhile; the next answer resets
the delay. A one-shot ``status`` asks directly, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ccpo_lab.launch.roles import Tracker


class QueryWatcher:
    """Per launcher kind: ask its tracker, unless a recent query failed."""

    def __init__(self, first_s: float = 5.0, max_s: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s = first_s
        """Seconds without asking after a first failed query."""
        self.max_s = max_s
        """The longest pause between two queries of a scheduler that does not answer."""
        self._clock = clock
        self._paused: dict[str, tuple[float, float]] = {}
        """kind -> (when to ask again, the current delay)."""

    def query(self, kind: str, tracker: Tracker, jobs: Sequence[Mapping[str, Any]]
              ) -> dict[str, str] | None:
        """``tracker.query(jobs)``, or None without asking while ``kind`` is paused."""
        now = self._clock()
        again, delay = self._paused.get(kind, (0.0, 0.0))
        if now < again:
            return None
        states = tracker.query(jobs)
        if states is None:
            delay = min(self.max_s, max(self.first_s, delay * 2))
            self._paused[kind] = (now + delay, delay)
        else:
            self._paused.pop(kind, None)
        return states
