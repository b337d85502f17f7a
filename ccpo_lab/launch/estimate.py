"""What a study will cost before it runs: device-hours per arm and for the whole study.

A run's cost is ``steps x seconds per step x devices``: the steps from its protocol
(``protocol.total_steps``, an arm's ``training`` included), the devices from its backend
(:func:`ccpo_lab.runs.cost.devices_held`: GPUs ``nodes x gpus_per_node``, else the CPUs
its task gets), and the seconds per step from the best source there is:

1. **measured**: the runs already in the results folder (any sweep under it) with the
   same work per step, i.e. the same run identity apart from the estimator, the seed and
   ``total_steps`` (so the same model, GPU layout, batch and group sizes, prompt lengths,
   evaluation and checkpoint periods), that trained at least one step. Each one's
   device-hours over every attempt (start-up, evaluations, checkpoints, requeues
   included: :func:`ccpo_lab.runs.cost.read_cost`) divided by its training steps is one
   sample of the device-hours per step; completed runs are used when there are any, else
   the partial ones;
2. **stated**: ``launcher.seconds_per_step`` (wall seconds per training step, start-up
   included), set by the user;
3. none: the study's cost is unknown (a budget then cannot be checked).

The uncertainty is the spread of the samples: the estimate is their mean, the range
their smallest and largest (one sample, or a stated rate: no range). A run of this sweep
that already has steps counts what it spent plus its remaining steps at the rate;
a completed one what it spent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.schema import RunConfig
from ccpo_lab.placement import Needs, Placement
from ccpo_lab.runs.cost import devices_held, read_cost
from ccpo_lab.runs.layout import RunDir, find_run_dir

_NOT_WORK = ("run_id", "sweep", "arm", "seed", "estimator", "identity_version", "launcher",
             "backend_runtime")
"""Keys of a run's identity (``config.yaml``) that do not change the work of one step."""
MAX_SCANNED = 2000
"""Most run directories of the results folder read for a measured rate."""


def work_key(identity: Mapping[str, Any]) -> str:
    """What one training step of a run does, as text (two runs with the same key take the
    same time per step on the same machines): the identity without the estimator, the
    seed and ``protocol.total_steps``."""
    import json

    doc = {k: v for k, v in identity.items() if k not in _NOT_WORK}
    protocol = dict(doc.get("protocol") or {})
    protocol.pop("total_steps", None)
    doc["protocol"] = protocol
    return json.dumps(doc, sort_keys=True, default=str)


@dataclass(frozen=True)
class StepRate:
    """Device-hours one training step takes, with its spread."""

    device_hours: float
    """The estimate (mean of the samples, or the stated rate)."""
    low: float
    """Smallest sample (the estimate itself when there is no spread)."""
    high: float
    """Largest sample."""
    sd: float | None
    """Standard deviation of the samples (None: fewer than two)."""
    samples: int
    """Runs measured (0: a stated rate)."""
    source: str
    """Where it comes from, one phrase (``4 completed runs in results/ (same model and
    layout)``, ``launcher.seconds_per_step = 30``)."""


@dataclass(frozen=True)
class RunEstimate:
    """The cost of one run of the study, in device-hours."""

    arm: str
    """Its arm."""
    seed: int
    """Its seed."""
    steps: int
    """Its training steps (protocol)."""
    spent: float
    """Device-hours it already took (a run of this sweep on disk)."""
    mean: float
    """Estimated device-hours when it is completed (``spent`` included)."""
    low: float
    """At the fastest measured rate."""
    high: float
    """At the slowest measured rate."""
    completed: bool = False
    """It is completed: nothing more to spend."""


@dataclass(frozen=True)
class StudyEstimate:
    """The estimated cost of every run of a study."""

    unit: str
    """``GPU-hours`` or ``CPU-hours``."""
    devices: int
    """Devices one run holds."""
    rate: StepRate | None
    """The rate used (None: no estimate available)."""
    runs: tuple[RunEstimate, ...]
    """One per run (empty without a rate)."""

    @property
    def total(self) -> float:
        """The study's device-hours (the estimate)."""
        return sum(r.mean for r in self.runs)

    @property
    def low(self) -> float:
        """The study's device-hours if every run goes at the fastest measured rate."""
        return sum(r.low for r in self.runs)

    @property
    def high(self) -> float:
        """... at the slowest."""
        return sum(r.high for r in self.runs)

    @property
    def spent(self) -> float:
        """Device-hours the study's runs already took."""
        return sum(r.spent for r in self.runs)

    def by_arm(self) -> dict[str, list[RunEstimate]]:
        """The runs of each arm, in the study's order."""
        out: dict[str, list[RunEstimate]] = {}
        for r in self.runs:
            out.setdefault(r.arm, []).append(r)
        return out


def _run_dirs(results: Path) -> Iterator[RunDir]:
    """Run directories under the results folder (``<sweep>/<arm>/<seed-N>/``), at most
    :data:`MAX_SCANNED`."""
    n = 0
    for path in sorted(results.glob("*/*/*/run.json")):
        if path.parent.parent.parent.name.startswith(("_", ".")):
            continue
        yield RunDir(path.parent)
        n += 1
        if n >= MAX_SCANNED:
            return


def _sample(rd: RunDir, key: str) -> tuple[float, bool] | None:
    """``(device-hours per training step, completed)`` of the run in ``rd`` when its work
    key is ``key`` and it trained a step; None otherwise (a file it cannot read too)."""
    try:
        doc = rd.read_config()
        if work_key(doc) != key:
            return None
        state = rd.read_state()
        cost = read_cost(rd, state=state)
    except (OSError, ValueError):
        return None
    if not cost.steps or not cost.device_hours or cost.open_attempt:
        return None
    return cost.device_hours / cost.steps, state.get("state") == "completed"


def measured_rate(results: Path, key: str) -> StepRate | None:
    """The device-hours per step of the finished runs under ``results`` whose work key is
    ``key`` (completed ones when there are any, else every run that trained a step);
    None when there is none."""
    found = [s for rd in _run_dirs(results) if (s := _sample(rd, key)) is not None]
    done = [v for v, completed in found if completed]
    values = done or [v for v, _ in found]
    if not values:
        return None
    what = "completed" if done else "partial"
    where = f"{len(values)} {what} run{'s' if len(values) != 1 else ''} in {results}/"
    return StepRate(device_hours=statistics.fmean(values), low=min(values), high=max(values),
                    sd=statistics.stdev(values) if len(values) > 1 else None,
                    samples=len(values), source=f"{where} (same model and layout)")


def stated_rate(seconds_per_step: float | None, devices: int) -> StepRate | None:
    """The rate ``launcher.seconds_per_step`` states for a run on ``devices`` devices."""
    if seconds_per_step is None:
        return None
    per = seconds_per_step * devices / 3600.0
    return StepRate(device_hours=per, low=per, high=per, sd=None, samples=0,
                    source=f"launcher.seconds_per_step = {seconds_per_step:g}")


def _one(run: RunConfig, rd: RunDir | None, rate: StepRate) -> RunEstimate:
    """The estimate of one run (its directory on disk, when it has one)."""
    steps = run.protocol.total_steps
    spent, done, left = 0.0, False, steps
    if rd is not None and rd.exists():
        state = rd.read_state()
        spent = read_cost(rd, metrics=False, state=state).device_hours or 0.0
        done = state.get("state") == "completed"
        left = 0 if done else max(0, steps - int(state.get("step") or 0))
    return RunEstimate(run.arm, run.seed, steps, spent, spent + left * rate.device_hours,
                       spent + left * rate.low, spent + left * rate.high, done)


def estimate_study(runs: Sequence[RunConfig], sweep_dir: Path, results: Path, needs: Needs,
                   placement: Placement | None, seconds_per_step: float | None
                   ) -> StudyEstimate:
    """The estimated cost of ``runs`` (one study, one layout), their directories in
    ``sweep_dir``; the rate measured under ``results``, else stated."""
    device, devices = devices_held(needs, placement)
    unit = f"{device}-hours"
    if not runs:
        return StudyEstimate(unit, devices, None, ())
    rate = measured_rate(results, work_key(runs[0].identity)) \
        or stated_rate(seconds_per_step, devices)
    if rate is None:
        return StudyEstimate(unit, devices, None, ())
    found = [find_run_dir(sweep_dir, r) if sweep_dir.is_dir() else None for r in runs]
    return StudyEstimate(unit, devices, rate,
                         tuple(_one(r, rd, rate) for r, rd in zip(runs, found, strict=True)))


def spread_text(rate: StepRate) -> str:
    """``+-12% (sd over 4 runs), 0.011..0.014 per step`` or ``no spread (one run)``."""
    if rate.samples == 0:
        return "a stated rate: no measured spread"
    if rate.sd is None or not math.isfinite(rate.sd):
        return "one run measured: no spread"
    rel = 100.0 * rate.sd / rate.device_hours if rate.device_hours else 0.0
    return f"sd {rel:.0f}% over {rate.samples} runs"
