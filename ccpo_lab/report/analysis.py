"""From run directories to the typed report: per run, per arm, comparisons.

:func:`build_report` reads a sweep directory and returns a :class:`Report` whose
:attr:`~Report.model` is the :class:`~ccpo_lab.report.model.ReportModel` every table,
CSV file, figure and the JSON document (``ccpo-lab report --format json``,
:attr:`Report.data`) are rendered from. The statistics are :mod:`ccpo_lab.stats`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.errors import UserError
from ccpo_lab.report.adaptive import adaptive_section, apply_design
from ccpo_lab.report.baselines import published_baselines
from ccpo_lab.report.collect import (
    COLUMN_METRIC,
    TASK_COLUMNS,
    VAL_TURNS,
    RunData,
    Series,
    column_metrics,
    load_run,
)
from ccpo_lab.report.comparisons import comparison_rows
from ccpo_lab.report.cost import add_cost
from ccpo_lab.report.evaluation import evaluation_section
from ccpo_lab.report.model import (
    ArmRow,
    Note,
    ReportModel,
    RiseRow,
    SeedRow,
    TaskStat,
    to_plain,
)
from ccpo_lab.report.numbers import NO_INTERVAL, arm_rng, interval, is_rate, num
from ccpo_lab.report.settings import (
    DEFAULT_RNG_SEED,
    OPTION_KEYS,
    ReportSettings,
    resolve_settings,
)
from ccpo_lab.runs.family import tracking_group
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import MetricsScan
from ccpo_lab.runs.sweep_runs import load_sweep_runs
from ccpo_lab.textout import safe

_EMPTY: Series = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))


@dataclass(frozen=True)
class Report:
    """A computed report: the typed model and what it was computed from."""

    model: ReportModel
    """The report (rows of runs, arms, comparisons; notes)."""
    settings: ReportSettings
    """Resolved settings."""
    arms: tuple[str, ...]
    """Arms in report order."""
    runs: dict[tuple[str, int], RunData]
    """The run reported for each (arm, seed) (the newest directory)."""
    sweep_dir: Path
    """The sweep directory."""

    @functools.cached_property
    def data(self) -> dict[str, Any]:
        """The JSON document (see the README's ``report --format json``)."""
        return to_plain(self.model)


def _window_mean(series: Series, start: int) -> float:
    steps, vals = series
    w = vals[steps >= start]
    w = w[~np.isnan(w)]
    return float(w.mean()) if w.size else float("nan")


def run_summary(run: RunData, s: ReportSettings,
                columns: Mapping[str, str] = COLUMN_METRIC) -> SeedRow:
    """The row of one run (an arm's seed)."""
    from ccpo_lab.stats import best_evaluation, binomial_se, is_interim, window_summary

    steps, vals = run.series.get(s.metric, _EMPTY)
    w = window_summary(steps, vals, s.window_start)
    best = best_evaluation(steps, vals, s.window_start)
    se = binomial_se(w.mean, run.n_episodes) if run.n_episodes and w.n else float("nan")
    before = np.flatnonzero((steps < s.window_start) & ~np.isnan(vals))
    first = int(before[np.argmin(steps[before])]) if before.size else None
    if run.total_steps is not None:
        last = np.array([run.last_step] if run.last_step is not None else [], dtype=np.int64)
        interim = is_interim(last, run.total_steps)
    else:
        interim = run.last_step is None
    return SeedRow(
        mean=num(w.mean), sd=num(w.sd), n_evals=w.n, best=num(best.value),
        best_step=best.step if best.n else None, best_bias=num(best.bias),
        best_bias_sd=num(best.bias_sd_units), binomial_se=num(se), n_episodes=run.n_episodes,
        interim=bool(interim), last_step=run.last_step, total_steps=run.total_steps,
        state=run.state, dir=run.path.name, run_id=run.run_id, fingerprint=run.fingerprint,
        per_task={col: num(_window_mean(run.series.get(m, _EMPTY), s.window_start))
                  for col, m in columns.items()},
        turns_from_training=run.turns_from_training, error=run.error,
        start=None if first is None else num(vals[first]),
        start_step=None if first is None else int(steps[first]),
    )


def task_stat(values: np.ndarray, confidence: float) -> TaskStat:
    """:func:`ccpo_lab.stats.summarize_arm` of one column as a row.

    Args:
        values: float (seeds,); nan = missing.
        confidence: level of the t interval.
    """
    from ccpo_lab.stats import summarize_arm

    a = summarize_arm(values, confidence)
    return TaskStat(mean=num(a.mean), sd=num(a.sd), ci_t=interval(a.ci_low, a.ci_high),
                    n_seeds=a.n)


def _values(rows: Sequence[SeedRow], key: str) -> np.ndarray:
    return np.array([np.nan if getattr(r, key) is None else getattr(r, key) for r in rows],
                    dtype=np.float64)


def arm_summary(arm: str, per_seed: Mapping[int, SeedRow], s: ReportSettings) -> ArmRow:
    """One arm over its seeds: mean, sd, t interval, IQM, bootstrap intervals where they
    meet their level (:func:`ccpo_lab.stats.bootstrap_min_runs`), per task type."""
    from ccpo_lab.stats import (
        aggregate_iqm,
        bootstrap_ci,
        bootstrap_min_runs,
        stratified_bootstrap_ci,
        summarize_arm,
    )

    rng = arm_rng(s.rng_seed, arm)
    seeds = sorted(per_seed)
    rows = [per_seed[k] for k in seeds]
    x = _values(rows, "mean")
    main = summarize_arm(x, s.confidence)
    boot = NO_INTERVAL
    if main.n >= bootstrap_min_runs(s.confidence):
        b = bootstrap_ci(x, rng, s.confidence, s.bootstrap_reps)
        boot = interval(b.low, b.high)
    cols = list(rows[0].per_task) if rows else list(TASK_COLUMNS)
    n_types = len(cols) - 2  # the task types, then All and Turns (collect.column_metrics)
    tasks = np.array([[np.nan if r.per_task[col] is None else r.per_task[col]
                       for col in cols] for r in rows],
                     dtype=np.float64).reshape(len(rows), len(cols))
    per_task = {col: task_stat(tasks[:, j], s.confidence) for j, col in enumerate(cols)}
    six = tasks[:, :n_types]
    complete = six[~np.isnan(six).any(axis=1)]
    iqm, ci_iqm = None, NO_INTERVAL
    if complete.shape[0]:
        iqm = num(aggregate_iqm(complete))
        if complete.shape[0] >= bootstrap_min_runs(s.confidence, n_strata=n_types):
            iv = stratified_bootstrap_ci(complete, rng, "iqm", s.confidence, s.bootstrap_reps)
            ci_iqm = interval(iv.low, iv.high)
    sds = [r.sd for r in rows if r.sd is not None]
    return ArmRow(
        arm=arm, n_seeds=main.n, seeds=tuple(seeds), mean=num(main.mean), sd=num(main.sd),
        ci_t=interval(main.ci_low, main.ci_high), ci_bootstrap=boot, iqm=iqm, ci_iqm=ci_iqm,
        iqm_n_seeds=int(complete.shape[0]), n_evals=int(sum(r.n_evals for r in rows)),
        within_run_sd=num(np.sqrt(np.mean(np.square(sds)))) if sds else None,
        interim=any(r.interim for r in rows),
        interim_seeds=tuple(k for k in seeds if per_seed[k].interim),
        turns_from_training=any(r.turns_from_training for r in rows),
        per_seed={k: per_seed[k] for k in seeds}, per_task=per_task,
        rise=_rise(rows, is_rate(s.metric)),
    )


def _rise(rows: Sequence[SeedRow], rate: bool) -> RiseRow:
    """:func:`ccpo_lab.stats.rise_over_start` over the seeds' rows; the binomial se only
    for a rate metric with known episode counts."""
    from ccpo_lab.stats import rise_over_start

    episodes = _values(rows, "n_episodes") if rate else np.full(len(rows), np.nan)
    r = rise_over_start(_values(rows, "start"), _values(rows, "mean"), episodes,
                        [e.n_evals for e in rows])
    steps = sorted({e.start_step for e in rows if e.start_step is not None})
    return RiseRow(start=num(r.start), start_steps=tuple(steps), window=num(r.window),
                   rise=num(r.rise), se=num(r.se), z=num(r.z), n_seeds=r.n_seeds,
                   n_rose=r.n_rose)


def _check_metric(runs: Mapping[tuple[str, int], RunData], metric: str) -> None:
    if any(metric in r.series for r in runs.values()):
        return

    logged: set[str] = set()
    for r in list(runs.values())[:20]:  # enough to list what the sweep logs
        rd = RunDir(r.path)
        try:
            for row in MetricsScan(rd.metrics, keep=0, root=rd.sweep_root):  # streamed
                logged.update(row.data)
        except OSError:
            continue
    if metric in logged:  # logged, but no value usable: name the runs and why
        why = [f"{r.arm} seed {r.seed}: {safe(n.text)}" for r in runs.values()
               for n in r.file_notes if metric in n.text]
        why += [f"{r.arm} seed {r.seed}: {safe(r.error)}" for r in runs.values() if r.error]
        raise UserError("no run of this sweep has a usable value of this metric; left out: "
                        + ("; ".join(why[:3]) + (f" (and {len(why) - 3} more)"
                                                 if len(why) > 3 else "")
                           if why else "every value was refused"), key="metric",
                        value=metric)
    valid = sorted(n for n in logged if n.startswith("val/")) or sorted(logged)
    raise UserError("metric not logged by any run of this sweep", key="metric", value=metric,
                    valid=[safe(n) for n in valid[:20]] if valid else
                    "no run has logged metrics yet")


_LINE = re.compile(r": line (\d+):")


def _run_notes(runs: Mapping[tuple[str, int], RunData], s: ReportSettings) -> list[Note]:
    notes = []
    for r in runs.values():
        def run_note(text: str, file: str | None = None, line: int | None = None,
                     r: RunData = r) -> Note:
            return Note(text, kind="run", arm=r.arm, seed=r.seed, file=file, line=line)

        if r.note:
            notes.append(run_note(r.note))
        for fn in r.file_notes:
            notes.append(run_note(f"{r.arm} seed {r.seed}: {fn.file.name} {fn.text}",
                                  file=str(fn.file), line=fn.line))
        if r.error:
            m = _LINE.search(r.error)
            notes.append(run_note(f"{r.arm} seed {r.seed}: unreadable metrics, left out: "
                                  f"{r.error}", file=str(RunDir(r.path).metrics),
                                  line=int(m.group(1)) if m else None))
        elif s.metric not in r.series:
            notes.append(run_note(f"{r.arm} seed {r.seed}: no {s.metric} logged yet"))
        if r.total_steps is None:
            notes.append(run_note(f"{r.arm} seed {r.seed}: final step unknown (no "
                                  "configuration); interim flag not checked"))
    train: dict[str, list[int]] = {}
    for r in runs.values():
        if r.turns_from_training:
            train.setdefault(r.arm, []).append(r.seed)
    for arm, seeds in train.items():
        notes.append(Note(f"{arm} seed {', '.join(map(str, seeds))}: Turns from training "
                          f"episodes (episode/length/mean); {VAL_TURNS} not logged",
                          kind="run", arm=arm))
    return notes


def _window_notes(arms: Sequence[ArmRow], runs: Mapping[tuple[str, int], RunData],
                  s: ReportSettings) -> list[Note]:
    empty = [a.arm for a in arms if a.n_seeds == 0]
    if not empty:
        return []
    last = max((int(r.series[s.metric][0].max()) for r in runs.values()
                if s.metric in r.series), default=None)
    if len(empty) == len(arms):
        return [Note(f"no run has an evaluation at step >= {s.window_start} (the latest is at "
                     f"step {last}): set --window-start", kind="window")]
    return [Note(f"{arm}: no seed has an evaluation at step >= {s.window_start} yet",
                 kind="window", arm=arm) for arm in empty]


def _stack_notes(runs: Mapping[tuple[str, int], RunData]) -> list[Note]:
    """Which stack the arms ran on (``run.json``'s ``stack``, issue 36): one line when
    every run that recorded one agrees, else the fields that differ, by arm."""
    from ccpo_lab.runs.provenance import STACK_FIELDS

    stacks: dict[str, list[dict[str, Any]]] = {}
    for (arm, _), r in runs.items():
        try:
            doc = json.loads((r.path / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        st = doc.get("stack") if isinstance(doc, dict) else None
        if isinstance(st, dict):
            stacks.setdefault(arm, []).append(st)
    if not stacks:
        return []
    values = {k: sorted({repr(st.get(k)) for runs_ in stacks.values() for st in runs_})
              for k in STACK_FIELDS}
    differ = [k for k, v in values.items() if len(v) > 1]
    if not differ:
        first = next(iter(stacks.values()))[0]
        shown = ", ".join(f"{k} {first.get(k)}" for k in STACK_FIELDS
                          if first.get(k) not in (None, 0))
        return [Note(safe(f"stack (every run that recorded one): {shown}"), kind="setting")]
    parts = [f"{k}: " + "; ".join(f"{arm} {' / '.join(sorted({str(st.get(k)) for st in sts}))}"
                                   for arm, sts in sorted(stacks.items())) for k in differ]
    return [Note(safe("the runs ran on different stacks, so differences between arms may "
                      "come from the stack: " + " | ".join(parts)), kind="setting")]


def _semantics(runs: Mapping[tuple[str, int], RunData], arm: str) -> str:
    """What ``arm``'s runs computed (their ``run.json``; a run made before the semantics
    existed computed the method as described)."""
    from ccpo_lab.runs.wandb_run import semantics_of

    seen = set()
    for (a, _), r in runs.items():
        if a != arm:
            continue
        try:
            doc = json.loads((r.path / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            seen.add(semantics_of(doc).get("semantics", "described"))
    return seen.pop() if len(seen) == 1 else ("mixed" if seen else "described")


def build_report(sweep_dir: str | Path, options: Mapping[str, Any] | None = None,
                 rng_seed: int = DEFAULT_RNG_SEED) -> Report:
    """Read a sweep directory and compute its report.

    Args:
        sweep_dir: ``<results>/<sweep>``; runs are ``<arm>/seed-<k>[.<n>]/run.json``.
        options: overrides of the manifest's ``analysis`` (keys of
            :data:`ccpo_lab.report.settings.OPTION_KEYS`; None values are ignored).
        rng_seed: seed of the bootstrap Generators.

    Raises:
        UserError: no sweep directory, no runs, bad settings, or a metric no run logged.
    """
    from ccpo_lab.stats import bootstrap_min_runs

    found = load_sweep_runs(sweep_dir)
    root, manifest, newest, arms = found.root, found.manifest, found.newest, found.arms
    settings, setting_notes = resolve_settings(manifest, arms, options, rng_seed)
    runs = {key: load_run(newest[key], [settings.metric]) for key in sorted(newest)}
    _check_metric(runs, settings.metric)
    notes = [Note(n, kind="setting") for n in setting_notes] + _run_notes(runs, settings)
    notes += [Note(x.text, kind="run", arm=x.arm, seed=x.seed, file=str(x.file))
              for x in found.left_out]
    arm_rows = []
    extra = {t.metric_name: t for r in runs.values() for t in r.extra_tasks}
    columns = column_metrics([extra[k] for k in sorted(extra)])
    for arm in arms:
        per_seed = {seed: run_summary(r, settings, columns) for (a, seed), r in runs.items()
                    if a == arm}
        arm_rows.append(dataclasses.replace(arm_summary(arm, per_seed, settings),
                                            semantics=_semantics(runs, arm)))
    notes += _window_notes(arm_rows, runs, settings) + _stack_notes(runs)
    design = adaptive_section(root)
    comparisons, design_notes = apply_design(comparison_rows(arm_rows, settings), design,
                                             settings)
    notes += design_notes

    evaluation, eval_notes = evaluation_section(runs, arms, settings, root)
    notes += eval_notes
    model = ReportModel(
        sweep=tracking_group(str(manifest.get("name") or root.name), root),
        **{k: getattr(settings, k) for k in OPTION_KEYS}, settings_from=dict(settings.sources),
        bootstrap_min_seeds=bootstrap_min_runs(settings.confidence),
        iqm_bootstrap_min_seeds=bootstrap_min_runs(settings.confidence, n_strata=len(columns) - 2),
        arms=tuple(arm_rows), comparisons=comparisons,
        baselines=published_baselines(list(runs.values())), notes=tuple(notes),
        adaptive=design, evaluation=evaluation,
    )
    model = add_cost(model, {arm: [r.path for (a, _), r in runs.items() if a == arm]
                             for arm in arms})
    return Report(model=model, settings=settings, arms=tuple(arms), runs=runs, sweep_dir=root)
