"""The contract of a backend's evaluation: ``ccpo_lab.backends.<kind>.evaluate``.

A backend that can re-score its checkpoints has a module ``evaluate`` beside its
``runner`` with:

- ``checkpoints(run, rd) -> Checkpoints``: the checkpoints a run has (by training step),
  its final one (once completed) and the one of its best training-time evaluation;
- ``episodes(run, split) -> EpisodeRange``: the default and the allowed number of games
  of a split (:class:`~ccpo_lab.errors.UserError` for a split the backend lacks);
- ``draw(run, rd, setting) -> dict``: the draw description (JSON): which games, in which
  order, how each episode's sampling seed is derived from (run seed, game, repeat). It
  must not depend on the arm or the seed (so every run of a sweep shares it) and is
  hashed into the evaluation's key;
- ``evaluate(run, rd, target, repeat, job, placement) -> RepeatResult``: play repeat
  ``repeat`` of the evaluation on the checkpoint (``job``: the job's directory, for its
  scratch files and logs);
- ``describe(run, rd, target, job) -> str``: what ``evaluate`` runs (``--dry-run``);
- optionally ``worker(run, rd, target, job, placement)``: tasks > 0 of a multi-node job.

Nothing else in ccpo-lab asks which backend it evaluates.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from ccpo_lab.backends import backend_module
from ccpo_lab.errors import UserError


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoints of one run."""

    steps: dict[int, str]
    """Training step -> where its weights are (a file or folder, for the header)."""
    final: int | None
    """The final step, when the run is completed and its checkpoint exists."""
    best: int | None
    """The step of the best training-time evaluation, when its weights are kept."""
    best_value: float | None = None
    """That evaluation's value."""
    final_why: str = ""
    """Why there is no final checkpoint (the run is not finished...)."""
    best_why: str = ""
    """Why there is no best checkpoint."""


@dataclass(frozen=True)
class EpisodeRange:
    """Games of one split: the default number and the allowed range."""

    default: int
    """Used without ``--episodes``."""
    low: int
    """Fewest."""
    high: int
    """Most."""
    what: str = ""
    """What bounds it (shown when ``--episodes`` is out of range)."""


@dataclass(frozen=True)
class RepeatResult:
    """One repeat of an evaluation: the games in draw order and one record per game."""

    games: tuple[str, ...]
    """Game ids in the draw's order."""
    episodes: tuple[dict[str, Any], ...]
    """Per game (same order): ``task_type``, ``success``, ``reward``, ``turns``,
    ``invalid`` (the job adds ``repeat``, ``i`` and ``game``)."""
    info: dict[str, Any] = field(default_factory=dict)
    """What the backend wants in the header (wall time, command, ...)."""


def eval_backend(kind: str) -> Any:
    """The ``evaluate`` module of backend ``kind``; :class:`UserError` when it has none."""
    backend_module(kind)  # an unknown kind raises there
    try:
        return importlib.import_module(f"ccpo_lab.backends.{kind}.evaluate")
    except ModuleNotFoundError as e:
        if e.name != f"ccpo_lab.backends.{kind}.evaluate":
            raise
        raise UserError("this backend cannot evaluate checkpoints", key="backend.kind",
                        value=kind) from None
