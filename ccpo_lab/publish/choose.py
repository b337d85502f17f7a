"""Which run and checkpoint of an arm the folder publishes, and its per-step revisions.

The rule (:data:`RULE`, printed in the card and the manifest): the card's result is the
arm's converged-window mean over its seeds, so the published weights are those of the
seed that represents it: the seed whose own window mean is closest to the arm's (ties: the
lower seed), among the seeds whose run completed with its final checkpoint; the main
revision is that final checkpoint. It is never chosen for its best single evaluation (a
maximum over noisy evaluations, selected on the held-out games: biased upward). When no
seed has a final checkpoint (an interim study), the same rule runs over the seeds' newest
kept checkpoints, and the card and manifest say interim. Every other checkpoint the chosen
run keeps becomes a revision ``step_N``, the best evaluation's labelled as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ccpo_lab.errors import UserError
from ccpo_lab.publish.sources import RunSources, Source, run_sources
from ccpo_lab.report.numbers import is_rate
from ccpo_lab.report.tables import fmt

if TYPE_CHECKING:
    from ccpo_lab.report.analysis import Report

RULE = ("the seed whose converged-window mean is closest to the arm's mean (the card's "
        "result; ties: the lower seed), among the seeds whose run completed with its final "
        "checkpoint; its final checkpoint is the main revision. Never the checkpoint of the "
        "best single evaluation (a maximum of noisy evaluations, selected on the held-out "
        "games: biased upward). With no final checkpoint in any seed (an interim study), "
        "the same rule over each seed's newest kept checkpoint, marked interim.")
"""The choice, in words (the card and the manifest quote it)."""


@dataclass(frozen=True)
class Choice:
    """The run and checkpoints a folder publishes."""

    arm: str
    """Arm."""
    seed: int
    """The chosen seed."""
    run_dir: Path
    """Its run directory."""
    backend: str | None
    """Its backend kind."""
    main: Source
    """The main revision's weights."""
    final: bool
    """``main`` is the completed run's final checkpoint (False: interim)."""
    revisions: tuple[Source, ...]
    """Every exportable checkpoint of the run, by step (``main`` among them)."""
    skipped: tuple[str, ...]
    """The run's checkpoints that cannot be exported, with why."""
    why: str
    """Why this seed: its window mean and the arm's."""


def revision_name(step: int) -> str:
    """The revision (branch) of a training step, named like published ones: ``step_N``."""
    return f"step_{step}"


def _main(found: RunSources, final: bool) -> Source | None:
    roles = ("final",) if final else ("final", "kept")
    picks = [s for s in found.sources if s.role in roles]
    return picks[-1] if picks else None


def _candidates(report: Report, arm: str, backend: str | None, final: bool
                ) -> list[tuple[float, int, Source, RunSources]]:
    """(distance to the arm's mean, seed, main source, sources) of each eligible seed."""
    row = report.model.arm(arm)
    out = []
    for seed in row.seeds:
        e = row.per_seed[seed]
        if e.mean is None or row.mean is None or (arm, seed) not in report.runs:
            continue
        last = e.total_steps if e.state == "completed" else None
        found = run_sources(backend, Path(report.runs[(arm, seed)].path), last)
        main = _main(found, final)
        if main is not None:
            out.append((abs(e.mean - row.mean), seed, main, found))
    return sorted(out, key=lambda c: (c[0], c[1]))


def _nothing(report: Report, arm: str, backend: str | None) -> UserError:
    why = []
    for seed in report.model.arm(arm).seeds:
        if (arm, seed) in report.runs:
            found = run_sources(backend, Path(report.runs[(arm, seed)].path), None)
            why += list(found.skipped)
    tail = f": {why[0]}" if why else ""
    return UserError(f"no seed of arm {arm} with a window result keeps weights that can be "
                     f"published (backend {backend}){tail}", file=report.sweep_dir,
                     key="--arm", value=arm)


def choose(report: Report, arm: str, backend: str | None) -> Choice:
    """The run and checkpoints to publish for ``arm`` (:data:`RULE`).

    Raises:
        UserError: no seed with a window result keeps exportable weights.
    """
    row = report.model.arm(arm)
    for final in (True, False):
        found = _candidates(report, arm, backend, final)
        if found:
            _, seed, main, sources = found[0]
            pct = is_rate(report.model.metric)
            u = "%" if pct else ""
            why = (f"seed {seed}'s window mean {fmt(row.per_seed[seed].mean, pct)}{u} is the "
                   f"closest to the arm's {fmt(row.mean, pct)}{u} among {len(found)} seed(s) with "
                   f"{'a final' if final else 'a kept'} checkpoint")
            return Choice(arm, seed, Path(report.runs[(arm, seed)].path), backend, main,
                          final, sources.sources, sources.skipped, why)
    raise _nothing(report, arm, backend)
