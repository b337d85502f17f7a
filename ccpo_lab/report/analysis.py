"""From run directories to the report document: per run, per arm, comparisons.

:func:`build_report` reads a sweep directory and returns a :class:`Report` whose
``data`` is the machine-readable document of ``ccpo-lab report --format json`` (values in
the metric's own units as logged, nan as null). Every table and plot is rendered from it
(plus the raw series, for learning curves). The statistics are :mod:`ccpo_lab.stats`.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.errors import UserError
from ccpo_lab.report.collect import (
    ALL_METRIC,
    TASK_METRICS,
    TASKS,
    VAL_TURNS,
    RunData,
    Series,
    load_run,
)
from ccpo_lab.report.discover import load_sweep_runs
from ccpo_lab.report.settings import DEFAULT_RNG_SEED, ReportSettings, resolve_settings

TASK_COLUMNS: tuple[str, ...] = (*(col for col, _ in TASKS), "All", "Turns")
"""Columns of the per-task-type table."""
_COLUMN_METRIC = {**{col: m for (col, _), m in zip(TASKS, TASK_METRICS, strict=True)},
                  "All": ALL_METRIC, "Turns": VAL_TURNS}
_EMPTY: Series = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))


@dataclass(frozen=True)
class Report:
    """A computed report."""

    data: dict[str, Any]
    """The JSON document (see the README's ``report --format json``)."""
    settings: ReportSettings
    """Resolved settings."""
    arms: tuple[str, ...]
    """Arms in report order."""
    runs: dict[tuple[str, int], RunData]
    """The run reported for each (arm, seed) (the newest directory)."""
    sweep_dir: Path
    """The sweep directory."""


def num(x: Any) -> float | None:
    """A finite float, or None (JSON null) for nan/inf/None."""
    if x is None:
        return None
    f = float(x)
    return f if np.isfinite(f) else None


def interval(lo: Any, hi: Any) -> list[float | None]:
    """``[lo, hi]`` with nan as None."""
    return [num(lo), num(hi)]


def is_rate(metric: str) -> bool:
    """Whether a metric is a success rate (a fraction; tables show percent)."""
    return metric.endswith("success_rate")


def arm_rng(seed: int, arm: str) -> np.random.Generator:
    """The Generator of one arm's bootstrap: fixed by (seed, arm), independent of others."""
    return np.random.default_rng([int(seed), zlib.crc32(arm.encode("utf-8"))])


def _window_mean(series: Series, start: int) -> float:
    steps, vals = series
    w = vals[steps >= start]
    w = w[~np.isnan(w)]
    return float(w.mean()) if w.size else float("nan")


def run_summary(run: RunData, s: ReportSettings) -> dict[str, Any]:
    """The per-seed entry of one run (JSON-ready)."""
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
    return {
        "mean": num(w.mean), "sd": num(w.sd), "n_evals": w.n,
        "best": num(best.value), "best_step": best.step if best.n else None,
        "best_bias": num(best.bias), "best_bias_sd": num(best.bias_sd_units),
        "binomial_se": num(se), "n_episodes": run.n_episodes,
        "start": None if first is None else num(vals[first]),
        "start_step": None if first is None else int(steps[first]),
        "interim": bool(interim), "last_step": run.last_step, "total_steps": run.total_steps,
        "state": run.state, "dir": run.path.name, "run_id": run.run_id,
        "fingerprint": run.fingerprint,
        "per_task": {col: num(_window_mean(run.series.get(m, _EMPTY), s.window_start))
                     for col, m in _COLUMN_METRIC.items()},
        "turns_from_training": run.turns_from_training,
        "error": run.error,
    }


def column_stats(m: np.ndarray, confidence: float) -> list[dict[str, Any]]:
    """:func:`ccpo_lab.stats.summarize_arm` of every column at once (JSON-ready).

    Args:
        m: float (seeds, columns); nan = missing.
        confidence: level of the t-intervals.

    Returns:
        Per column ``{"mean", "sd", "ci_t", "n_seeds"}`` with summarize_arm's rules (sd and
        interval undefined below two seeds; a zero sd gives a zero-width interval).
    """
    from scipy.special import stdtrit

    ok = ~np.isnan(m)
    n = ok.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, m, 0.0).sum(axis=0) / n
        dev = np.where(ok, m - mean, 0.0)
        sd = np.where(n >= 2, np.sqrt((dev * dev).sum(axis=0) / (n - 1)), np.nan)
        half = stdtrit(np.maximum(n - 1, 1), 0.5 + confidence / 2.0) * sd / np.sqrt(n)
    return [{"mean": num(mean[j]) if n[j] else None, "sd": num(sd[j]),
             "ci_t": interval(mean[j] - half[j], mean[j] + half[j]), "n_seeds": int(n[j])}
            for j in range(m.shape[1])]


def arm_summary(arm: str, per_seed: Mapping[int, dict[str, Any]],
                s: ReportSettings) -> dict[str, Any]:
    """One arm over its seeds (JSON-ready): mean, sd, intervals, IQM, per task type."""
    from ccpo_lab.stats import bootstrap_ci, stratified_bootstrap_ci, summarize_arm

    rng = arm_rng(s.rng_seed, arm)
    seeds = sorted(per_seed)
    x = np.array([np.nan if per_seed[k]["mean"] is None else per_seed[k]["mean"]
                  for k in seeds], dtype=np.float64)
    main = summarize_arm(x, s.confidence)
    boot = bootstrap_ci(x, rng, s.confidence, s.bootstrap_reps)
    tasks = np.array([[np.nan if per_seed[k]["per_task"][col] is None
                       else per_seed[k]["per_task"][col] for col in TASK_COLUMNS]
                      for k in seeds], dtype=np.float64).reshape(len(seeds), len(TASK_COLUMNS))
    per_task = dict(zip(TASK_COLUMNS, column_stats(tasks, s.confidence), strict=True))
    six = tasks[:, :len(TASKS)]
    complete = six[~np.isnan(six).any(axis=1)]
    iqm = ci_iqm = None
    if complete.shape[0]:
        iv = stratified_bootstrap_ci(complete, rng, "iqm", s.confidence, s.bootstrap_reps)
        iqm, ci_iqm = num(iv.estimate), interval(iv.low, iv.high)
    sds = [per_seed[k]["sd"] for k in seeds if per_seed[k]["sd"] is not None]
    rise = _rise([per_seed[k] for k in seeds], is_rate(s.metric))
    interim = [k for k in seeds if per_seed[k]["interim"]]
    return {
        "arm": arm, "n_seeds": main.n, "seeds": seeds,
        "mean": num(main.mean), "sd": num(main.sd), "ci_t": interval(main.ci_low, main.ci_high),
        "ci_bootstrap": interval(boot.low, boot.high), "iqm": iqm, "ci_iqm": ci_iqm,
        "iqm_n_seeds": int(complete.shape[0]),
        "n_evals": int(sum(per_seed[k]["n_evals"] for k in seeds)),
        "within_run_sd": num(np.sqrt(np.mean(np.square(sds)))) if sds else None,
        "interim": bool(interim), "interim_seeds": interim,
        "turns_from_training": any(per_seed[k]["turns_from_training"] for k in seeds),
        "per_seed": {str(k): per_seed[k] for k in seeds},
        "per_task": per_task,
        "rise": rise,
    }


def _rise(entries: list[dict[str, Any]], rate: bool) -> dict[str, Any]:
    """:func:`ccpo_lab.stats.rise_over_start` over per-seed entries (JSON-ready); the
    binomial se only for a rate metric with known episode counts."""
    from ccpo_lab.stats import rise_over_start

    def col(key: str) -> list[float]:
        return [np.nan if e[key] is None else float(e[key]) for e in entries]

    episodes = col("n_episodes") if rate else [np.nan] * len(entries)
    r = rise_over_start(col("start"), col("mean"), episodes, [e["n_evals"] for e in entries])
    steps = sorted({e["start_step"] for e in entries if e["start_step"] is not None})
    return {"start": num(r.start), "start_steps": steps, "window": num(r.window),
            "rise": num(r.rise), "se": num(r.se), "z": num(r.z), "n_seeds": r.n_seeds,
            "n_rose": r.n_rose}


def _check_metric(runs: Mapping[tuple[str, int], RunData], metric: str) -> None:
    if any(metric in r.series for r in runs.values()):
        return
    from ccpo_lab.runs.metrics import metric_names, read_metrics

    logged: set[str] = set()
    for r in list(runs.values())[:20]:  # enough to list what the sweep logs
        try:
            logged.update(metric_names(read_metrics(r.path / "metrics.jsonl")))
        except (OSError, ValueError):
            continue
    valid = sorted(n for n in logged if n.startswith("val/")) or sorted(logged)
    raise UserError("metric not logged by any run of this sweep", key="metric", value=metric,
                    valid=valid[:20] if valid else "no run has logged metrics yet")


def _run_notes(runs: Mapping[tuple[str, int], RunData], s: ReportSettings) -> list[str]:
    notes = []
    for r in runs.values():
        if r.note:
            notes.append(r.note)
        if r.error:
            notes.append(f"{r.arm} seed {r.seed}: unreadable metrics, left out: {r.error}")
        elif s.metric not in r.series:
            notes.append(f"{r.arm} seed {r.seed}: no {s.metric} logged yet")
        if r.total_steps is None:
            notes.append(f"{r.arm} seed {r.seed}: final step unknown (no configuration); "
                         "interim flag not checked")
    train: dict[str, list[int]] = {}
    for r in runs.values():
        if r.turns_from_training:
            train.setdefault(r.arm, []).append(r.seed)
    for arm, seeds in train.items():
        notes.append(f"{arm} seed {', '.join(map(str, seeds))}: Turns from training episodes "
                     f"(episode/length/mean); {VAL_TURNS} not logged")
    return notes


def _window_notes(arms: list[dict[str, Any]], runs: Mapping[tuple[str, int], RunData],
                  s: ReportSettings) -> list[str]:
    empty = [a["arm"] for a in arms if a["n_seeds"] == 0]
    if not empty:
        return []
    last = max((int(r.series[s.metric][0].max()) for r in runs.values()
                if s.metric in r.series), default=None)
    if len(empty) == len(arms):
        return [f"no run has an evaluation at step >= {s.window_start} (the latest is at step "
                f"{last}): set --window-start"]
    return [f"{arm}: no seed has an evaluation at step >= {s.window_start} yet" for arm in empty]


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
    from ccpo_lab.report.baselines import published_baselines
    from ccpo_lab.report.comparisons import compare_to_reference

    root, manifest, newest, arms = load_sweep_runs(sweep_dir)
    settings, notes = resolve_settings(manifest, arms, options, rng_seed)
    runs = {key: load_run(newest[key], [settings.metric]) for key in sorted(newest)}
    _check_metric(runs, settings.metric)
    notes += _run_notes(runs, settings)
    arm_docs = []
    for arm in arms:
        per_seed = {seed: run_summary(r, settings) for (a, seed), r in runs.items() if a == arm}
        arm_docs.append(arm_summary(arm, per_seed, settings))
    notes += _window_notes(arm_docs, runs, settings)
    comparisons = compare_to_reference(arm_docs, settings)
    baselines = published_baselines(list(runs.values()))
    data = {
        "sweep": str(manifest.get("name") or root.name),
        "metric": settings.metric, "window_start": settings.window_start,
        "reference": settings.reference, "confidence": settings.confidence,
        "bootstrap_reps": settings.bootstrap_reps, "alpha": settings.alpha,
        "power": settings.power, "settings_from": dict(settings.sources),
        "arms": arm_docs, "comparisons": comparisons, "baselines": baselines, "notes": notes,
    }
    return Report(data=data, settings=settings, arms=tuple(arms), runs=runs, sweep_dir=root)
