"""What a run costs: its attempts' devices and wall time, its phases, memory and throughput.

Recorded by every run (issue 26), read through the run-file gateway (:class:`RunDir`):

* ``run.json["cost"]``: the device kind (``GPU`` for verl, ``CPU`` for the local backend),
  and one record per **attempt** (each time an executor took the run: a first start, a
  resume, a Slurm requeue), written by :mod:`ccpo_lab.runs.execute` when it starts and
  when it ends: start, end, host and the devices it held (GPUs: the backend's
  ``nodes x gpus_per_node``; CPUs: what the launcher allocated, else the backend's
  threads). An attempt killed before it could record its end (``kill -9``, a lost node)
  ends at the run's last heartbeat (``state.json``'s ``updated``, written every step).
  Device-hours are ``devices x wall time`` summed over attempts: a requeued run's lost
  work is part of its cost.
* ``metrics.jsonl``: the time of each phase per step, under verl's names
  (:data:`PHASES`: ``timing_s/gen`` for the rollout, ``timing_s/update_actor`` ...,
  ``timing_s/testing``, ``timing_s/save_checkpoint``); peak memory
  (``perf/max_memory_allocated_gb`` from verl's workers, ``perf/max_rss_gb`` the CPU
  process's peak resident set); throughput (``perf/throughput``: tokens per second per
  GPU on verl; ``perf/env_steps_per_s`` on the CPU backend). The wall time not in a timed
  phase is ``startup``: process and engine start, model loading, the first evaluation on
  verl (untimed there), waiting, and work redone after a restart.

:func:`read_cost` joins both into a :class:`RunCost`; ``status``, ``report`` and the
MLflow sync read costs through it, nothing else parses these fields.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.placement import Needs, Placement

PHASES: dict[str, tuple[str, ...]] = {
    "rollout": ("timing_s/gen", "timing_s/gen_max", "timing_s/reward"),
    "update": ("timing_s/old_log_prob", "timing_s/ref", "timing_s/values", "timing_s/adv",
               "timing_s/update_critic", "timing_s/update_actor"),
    "evaluation": ("timing_s/testing",),
    "checkpoint": ("timing_s/save_checkpoint",),
}
"""Phase -> the metrics whose per-step seconds add up to it (verl's ``timing_s/*`` names;
the CPU backend logs the same names)."""
PHASE_ORDER: tuple[str, ...] = ("startup", *PHASES)
"""Phases as tables show them; ``startup`` is the wall time in no timed phase."""
PEAK_MEMORY: tuple[tuple[str, str], ...] = (
    ("perf/max_memory_allocated_gb", "GPU allocated"),
    ("perf/max_rss_gb", "peak RSS"),
)
"""Peak-memory metrics (GB) and what each measures, the first one logged is used."""
THROUGHPUT: tuple[tuple[str, str], ...] = (
    ("perf/throughput", "tokens/s/GPU"),
    ("perf/env_steps_per_s", "env steps/s"),
)
"""Throughput metrics and their units, the first one logged is used (mean over steps)."""
MEASURED_PREFIXES: tuple[str, ...] = ("timing_s/", "timing_per_token_ms/", "perf/")
"""Metrics that measure the machine, not the training: two runs of one identity (or a run
and its resumed copy) differ in them and in nothing else (verl logs all three kinds; the
CPU backend ``timing_s/`` and ``perf/``)."""
COST_METRICS: tuple[str, ...] = (*(k for ks in PHASES.values() for k in ks),
                                 *(k for k, _ in PEAK_MEMORY), *(k for k, _ in THROUGHPUT))
"""Every metric :func:`read_cost` reads."""


def _parse(text: Any) -> float | None:
    """Seconds since the epoch of an ISO time (None when absent or malformed)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _now() -> str:
    """Current UTC time, ISO 8601 to the millisecond (attempts of a few seconds count)."""
    from datetime import timezone

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def devices_held(needs: Needs, placement: Placement | None) -> tuple[str, int]:
    """``("GPU", n)`` for a GPU run (``nodes x gpus_per_node``), else ``("CPU", n)``: the
    CPUs the launcher allocated per task (at least the backend's), times the nodes."""
    if needs.gpus_per_node > 0:
        return "GPU", needs.gpus
    given = placement.cpus if placement is not None else None
    per_task = max(x for x in (given, needs.cpus, 1) if x is not None)
    return "CPU", per_task * max(needs.nodes, 1)


def start_attempt(rd: RunDir, needs: Needs, placement: Placement | None) -> None:
    """Record that an executor starts the run now (``run.json["cost"]["attempts"]``).

    An earlier attempt with no recorded end (its executor was killed) is closed at the
    run's last heartbeat first.
    """
    device, n = devices_held(needs, placement)
    data = rd.read_run()
    cost = dict(data.get("cost") or {})
    attempts = [dict(a) for a in cost.get("attempts") or [] if isinstance(a, Mapping)]
    beat = rd.read_state().get("updated")
    for a in attempts:
        if a.get("ended") is None:
            start, end = _parse(a.get("started")), _parse(beat)
            a["ended"] = beat if start is not None and end is not None and end >= start \
                else a.get("started")
            a["end"] = "last heartbeat (the executor did not record its end)"
    attempts.append({"started": _now(), "ended": None, "host": socket.gethostname(),
                     "device": device, "devices": n, "nodes": needs.nodes})
    rd.update_run(cost={**cost, "device": device, "attempts": attempts[-200:]})


def end_attempt(rd: RunDir, how: str) -> None:
    """Record the end of the current attempt (``how``: its outcome)."""
    data = rd.read_run()
    cost = dict(data.get("cost") or {})
    attempts = [dict(a) for a in cost.get("attempts") or [] if isinstance(a, Mapping)]
    if not attempts or attempts[-1].get("ended") is not None:
        return
    attempts[-1].update(ended=_now(), end=how)
    rd.update_run(cost={**cost, "attempts": attempts})


@dataclass(frozen=True)
class RunCost:
    """What one run cost so far."""

    device: str | None
    """``GPU`` or ``CPU`` (None: nothing recorded, e.g. an imported run)."""
    devices: int | None
    """Devices its latest attempt held."""
    attempts: int
    """Attempts (starts, resumes, requeues)."""
    wall_s: float
    """Wall time over every attempt (an attempt in progress: to ``now`` or its heartbeat)."""
    device_hours: float | None
    """``devices x wall time`` summed over attempts, in hours (None: no attempt recorded)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds per phase (:data:`PHASE_ORDER`): the timed phases from the metrics,
    ``startup`` the rest of the wall time."""
    peak_memory_gb: float | None = None
    """Largest peak memory logged (GB)."""
    memory_kind: str | None = None
    """What it measures (``GPU allocated``, ``peak RSS``)."""
    throughput: float | None = None
    """Mean throughput over the steps that logged it."""
    throughput_unit: str | None = None
    """Its unit."""
    steps: int = 0
    """Training steps with a metrics row (step 0, the evaluation before training, not
    counted)."""
    open_attempt: bool = False
    """The latest attempt has not recorded its end (running, or killed)."""


@dataclass
class _Metrics:
    phases: dict[str, float] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    steps: int = 0


def _scan(rd: RunDir) -> _Metrics:
    """The cost metrics of ``rd``'s metrics file, through the run-file gateway; lines that
    are not rows, values that are not finite numbers and a file the gateway does not read
    are skipped (the report names them)."""
    from ccpo_lab.runs.metrics import MetricsScan

    phase_of = {k: p for p, ks in PHASES.items() for k in ks}
    out = _Metrics()
    try:
        for row in MetricsScan(rd.metrics, keep=0, root=rd.sweep_root):
            _add_row(out, row, phase_of)
    except OSError:  # a file the run-file gateway does not read: the report names it
        return _Metrics()
    return out


def _add_row(out: _Metrics, row: Any, phase_of: Mapping[str, str]) -> None:
    from ccpo_lab.runs.metrics import value_problem

    if row.step > 0:
        out.steps += 1
    for k, v in row.data.items():
        if value_problem(v) is not None or isinstance(v, bool):
            continue
        if k in phase_of:
            out.phases[phase_of[k]] = out.phases.get(phase_of[k], 0.0) + float(v)
        elif k in _PEAKS:
            out.peak[k] = max(out.peak.get(k, float("-inf")), float(v))
        elif k in _RATES:
            out.sums[k] = out.sums.get(k, 0.0) + float(v)
            out.counts[k] = out.counts.get(k, 0) + 1


_PEAKS = {k for k, _ in PEAK_MEMORY}
_RATES = {k for k, _ in THROUGHPUT}


def attempt_seconds(attempts: Sequence[Mapping[str, Any]], heartbeat: Any,
                    now: float | None = None) -> list[tuple[float, int]]:
    """``(wall seconds, devices)`` of each attempt; an open one ends at ``now`` when given
    (it runs), else at ``heartbeat`` (the run's last ``state.json`` update)."""
    out = []
    beat = _parse(heartbeat)
    for a in attempts:
        start = _parse(a.get("started"))
        if start is None:
            continue
        end = _parse(a.get("ended"))
        if end is None:
            end = now if now is not None else beat
        wall = max(0.0, (end or start) - start)
        out.append((wall, int(a.get("devices") or 0)))
    return out


def read_cost(rd: RunDir, *, metrics: bool = True, now: float | None = None,
              run: Mapping[str, Any] | None = None,
              state: Mapping[str, Any] | None = None) -> RunCost:
    """The cost of the run in ``rd``: attempts from ``run.json`` and, with ``metrics``, the
    phases, peak memory and throughput from ``metrics.jsonl`` (a streamed pass; without it
    only the device-hours, which ``status`` refreshes often).

    ``now``: the run is executing: its open attempt ends now (else at its heartbeat).
    ``run``/``state``: ``run.json``/``state.json`` already read.
    """
    run = rd.read_run() if run is None else run
    state = rd.read_state() if state is None else state
    cost = _mapping(run.get("cost"))
    attempts = [a for a in (cost.get("attempts") or []) if isinstance(a, Mapping)]
    spans = attempt_seconds(attempts, state.get("updated"), now)
    wall = sum(w for w, _ in spans)
    hours = sum(w * n for w, n in spans) / 3600.0 if spans else None
    last: Mapping[str, Any] = attempts[-1] if attempts else {}
    base = RunCost(device=cost.get("device"), devices=last.get("devices"),
                   attempts=len(attempts), wall_s=wall, device_hours=hours,
                   open_attempt=bool(attempts) and last.get("ended") is None)
    if not metrics:
        return base
    m = _scan(rd)
    phases = {p: m.phases[p] for p in PHASES if p in m.phases}
    if spans and phases:  # no timed phase logged: nothing to tell start-up apart from
        phases = {"startup": max(0.0, wall - sum(phases.values())), **phases}
    mem = next(((m.peak[k], what) for k, what in PEAK_MEMORY if k in m.peak), (None, None))
    rate = next(((m.sums[k] / m.counts[k], unit) for k, unit in THROUGHPUT if m.counts.get(k)),
                (None, None))
    return RunCost(device=base.device, devices=base.devices, attempts=base.attempts,
                   wall_s=wall, device_hours=hours, phases=phases, peak_memory_gb=mem[0],
                   memory_kind=mem[1], throughput=rate[0], throughput_unit=rate[1],
                   steps=m.steps, open_attempt=base.open_attempt)


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else {}."""
    return value if isinstance(value, Mapping) else {}


def peak_rss_gb() -> float:
    """This process's peak resident set size so far, in GB (``getrusage``: KiB on Linux)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 30) if sys.platform == "darwin" else peak / (1 << 20)
