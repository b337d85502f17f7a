"""The report's figures, each as a 300-dpi PNG and a vector PDF, sized for a paper.

* ``curves`` -- one panel per arm (small multiples): every seed's held-out curve (thin),
  their mean (thick), the reference's mean (dashed) and the converged window (shaded).
* ``difference`` -- one panel per arm: its difference to the reference at each evaluation,
  per seed (thin) and the mean over the seeds both ran with its paired t interval.
* ``aggregates`` -- rliable-style interval estimates per arm: the mean with its t interval,
  the IQM with its stratified bootstrap interval (where that meets its level).
* ``improvement`` -- P(arm > reference) per arm (rliable's probability of improvement),
  with its bootstrap interval where that meets its level.
* ``profile`` -- performance profiles (rliable): the fraction of (seed, task type) scores
  above each threshold.
* ``per_task`` -- success per task type and arm with t intervals clipped to [0, 100]
  (clipped ends marked).

Drawn with :class:`matplotlib.figure.Figure` (no pyplot; the style is set for each figure
by an ``rc_context``); matplotlib is imported only here, and only when figures are written.
Every figure draws numbers of the typed report (or, for curves, the runs' series).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ccpo_lab.report.collect import Series
from ccpo_lab.report.numbers import is_rate

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ccpo_lab.report.analysis import Report

WIDE_IN = 6.75
"""Width of a figure spanning a page (two-column \\textwidth ~ 6.5-7 in)."""
NARROW_IN = 3.2
"""Width of a one-column figure (two-column \\columnwidth ~ 3.2-3.3 in)."""
DPI = 300
STYLE: dict[Any, Any] = {
         "font.size": 7.5, "axes.titlesize": 8, "axes.labelsize": 7.5, "legend.fontsize": 7,
         "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.spines.top": False,
         "axes.spines.right": False, "pdf.fonttype": 42, "ps.fonttype": 42,
         "axes.grid": True, "grid.alpha": 0.25, "grid.linewidth": 0.5,
         "savefig.bbox": "tight", "savefig.pad_inches": 0.02}


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report."""

    stem: str
    """File name without extension (``<stem>.png`` and ``<stem>.pdf``)."""
    what: str
    """What it shows (the closing note, report.md and the LaTeX caption)."""
    wide: bool
    """Spans the page (else one column)."""
    draw: Callable[[Report], Figure]
    """Builds the figure."""


def curve_band(series: list[tuple[np.ndarray, np.ndarray]],
               confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean over seeds at each evaluated step, with its t interval.

    Args:
        series: per seed ``(steps int (n_i,), values float (n_i,))``.
        confidence: level of the band.

    Returns:
        ``(steps (m,), mean (m,), low (m,), high (m,))`` over the union of steps; the band
        is nan where fewer than two seeds were evaluated.
    """
    from scipy.special import stdtrit

    steps, grid = _grid(series)
    n = (~np.isnan(grid)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.nansum(grid, axis=0) / np.maximum(n, 1), np.nan)
        dev = np.where(np.isnan(grid), 0.0, grid - mean)
        sd = np.sqrt((dev**2).sum(axis=0) / np.maximum(n - 1, 1))
        t = stdtrit(np.maximum(n - 1, 1), 0.5 + confidence / 2.0)
        half = np.where(n >= 2, t * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return steps, mean, mean - half, mean + half


def _grid(series: Sequence[Series]) -> tuple[np.ndarray, np.ndarray]:
    """Union of steps and a (seeds, steps) grid of values (nan where not evaluated)."""
    steps = np.unique(np.concatenate([s for s, _ in series])) if series else \
        np.empty(0, np.int64)
    grid = np.full((len(series), steps.size), np.nan)
    for i, (s, v) in enumerate(series):
        grid[i, np.searchsorted(steps, s)] = v
    return steps, grid


def paired_difference(x: dict[int, Series], y: dict[int, Series]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed differences X - Y at each step both evaluated, over the common seeds.

    Args:
        x, y: seed -> ``(steps, values)`` of the two arms.

    Returns:
        ``(steps (m,), diffs (common seeds, m))`` with nan where a seed lacks either.
    """
    seeds = sorted(set(x) & set(y))
    if not seeds:
        return np.empty(0, np.int64), np.empty((0, 0))
    sx, gx = _grid([x[k] for k in seeds])
    sy, gy = _grid([y[k] for k in seeds])
    steps = np.intersect1d(sx, sy)
    return steps, gx[:, np.searchsorted(sx, steps)] - gy[:, np.searchsorted(sy, steps)]


def _colors(report: Report) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {arm: cmap(i % 10) for i, arm in enumerate(report.arms)}


def _scale(report: Report) -> float:
    return 100.0 if is_rate(report.settings.metric) else 1.0


def _ylabel(report: Report) -> str:
    m = report.settings.metric
    return f"held-out {m}" + (" (%)" if is_rate(m) else "")


def _series(report: Report, arm: str) -> dict[int, Series]:
    m = report.settings.metric
    return {seed: r.series[m] for (a, seed), r in report.runs.items()
            if a == arm and m in r.series and r.series[m][0].size}


def _grid_axes(n: int, row_height: float) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    ncols = 2 if n == 4 else min(max(n, 1), 3)
    nrows = max(1, math.ceil(n / ncols))
    fig = Figure(figsize=(WIDE_IN, row_height * nrows + 0.45), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    for i, ax in enumerate(flat[:n]):
        if i >= n - ncols:  # the lowest panel of its column: ticks and label
            ax.xaxis.set_tick_params(which="both", labelbottom=True)
            ax.set_xlabel("training step")
    for i in range(0, n, ncols):
        flat[i].set_ylabel(" ")
    return fig, flat[:n]


def _ylabels(axes: Sequence[Axes], text: str) -> None:
    """Label the first panel of each row (those :func:`_grid_axes` marked)."""
    for ax in axes:
        if ax.get_ylabel():
            ax.set_ylabel(text)


def _legend_proxies(fig: Figure, items: dict[str, dict[str, Any]]) -> None:
    """A figure legend below the panels with neutral (grey) samples of each line kind."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Patch(**kw) if kw.pop("patch", False) else Line2D([], [], **kw)
               for kw in (dict(v) for v in items.values())]
    fig.legend(handles, list(items), loc="outside lower center", ncol=len(items),
               frameon=False)


def _window(ax: Axes, report: Report, last: int) -> None:
    start = report.settings.window_start
    if last >= start:
        ax.axvspan(start, last, color="0.5", alpha=0.12, linewidth=0, zorder=0)


def draw_curves(report: Report) -> Figure:
    """Small multiples: each arm's seeds (thin), their mean (thick), the reference's mean."""
    scale, colors = _scale(report), _colors(report)
    ref = report.settings.reference
    arms = [a for a in report.arms if _series(report, a)]
    fig, axes = _grid_axes(len(arms), 1.55)
    ref_series = _series(report, ref)
    last = max((int(s.max()) for a in arms for s, _ in _series(report, a).values()), default=0)
    c = report.settings.confidence
    for ax, arm in zip(axes, arms, strict=True):
        series = _series(report, arm)
        for s, v in series.values():
            ax.plot(s, scale * v, color=colors[arm], lw=0.7, alpha=0.45)
        steps, mean, _, _ = curve_band(list(series.values()), c)
        ax.plot(steps, scale * mean, color=colors[arm], lw=2.0)
        versus = report.settings.reference_of(arm)
        other = ref_series if versus == ref else _series(report, versus) if versus else {}
        if versus is not None and other:
            rs, rm, _, _ = curve_band(list(other.values()), c)
            ax.plot(rs, scale * rm, color="0.25", lw=1.0, ls="--")
        _window(ax, report, last)
        ax.set_title(f"{arm} ({len(series)} seed{'s' if len(series) != 1 else ''})")
    _ylabels(axes, _ylabel(report))
    _legend_proxies(fig, {
        "one seed": {"color": "0.45", "lw": 0.7},
        "mean over seeds": {"color": "0.45", "lw": 2.0},
        (f"{ref} mean (reference)" if not report.settings.pairs else
         "the pair's reference, mean"): {"color": "0.25", "lw": 1.0, "ls": "--"},
        f"converged window (step ≥ {report.settings.window_start})":
            {"patch": True, "color": "0.5", "alpha": 0.12}})
    return fig


def draw_difference(report: Report) -> Figure:
    """Per arm: the difference to the reference at each evaluation, with its paired t band."""
    scale, colors = _scale(report), _colors(report)
    panels = []
    for arm in report.arms:
        versus = report.settings.reference_of(arm)
        if versus is None:
            continue
        steps, diffs = paired_difference(_series(report, arm), _series(report, versus))
        if steps.size:
            panels.append((arm, versus, steps, diffs))
    fig, axes = _grid_axes(len(panels), 1.5)
    c = report.settings.confidence
    last = max((int(s.max()) for _, _, s, _ in panels), default=0)
    for ax, (arm, ref, steps, diffs) in zip(axes, panels, strict=True):
        for row in diffs:
            ok = ~np.isnan(row)
            ax.plot(steps[ok], scale * row[ok], color=colors[arm], lw=0.7, alpha=0.45)
        s, mean, lo, hi = curve_band([(steps[~np.isnan(r)], r[~np.isnan(r)]) for r in diffs], c)
        ax.plot(s, scale * mean, color=colors[arm], lw=2.0)
        ax.fill_between(s, scale * lo, scale * hi, color=colors[arm], alpha=0.2, lw=0)
        ax.axhline(0.0, color="0.2", lw=0.8)
        _window(ax, report, last)
        ax.set_title(f"{arm} − {ref}\n({diffs.shape[0]} common seeds)")
    unit = " (points)" if is_rate(report.settings.metric) else ""
    _ylabels(axes, f"difference{unit}")
    if axes:
        _legend_proxies(fig, {
            "one seed": {"color": "0.45", "lw": 0.7},
            "mean over common seeds": {"color": "0.45", "lw": 2.0},
            f"{100 * c:g}% paired t interval": {"patch": True, "color": "0.45", "alpha": 0.2},
            f"converged window (step ≥ {report.settings.window_start})":
                {"patch": True, "color": "0.5", "alpha": 0.12}})
    return fig


def _interval_row(ax: Axes, i: int, est: float | None, ci: Sequence[float | None],
                  color: Any, scale: float) -> None:
    if est is None:
        return
    if ci[0] is not None and ci[1] is not None:
        ax.barh(i, scale * (ci[1] - ci[0]), left=scale * ci[0], height=0.6, color=color,
                alpha=0.55, lw=0)
        ax.plot([scale * est] * 2, [i - 0.3, i + 0.3], color="k", lw=1.2)
    else:
        ax.plot(scale * est, i, "o", mfc="white", mec=color, mew=1.3, ms=4.5)


def draw_aggregates(report: Report) -> Figure:
    """Mean (t interval) and IQM (stratified bootstrap interval where valid) per arm."""
    from matplotlib.figure import Figure

    model, colors = report.model, _colors(report)
    scale = _scale(report)
    arms = [a for a in model.arms if a.mean is not None]
    fig = Figure(figsize=(WIDE_IN, 0.32 * len(arms) + 0.75), layout="constrained")
    ax_mean, ax_iqm = fig.subplots(1, 2, sharey=True)
    lv = f"{100 * model.confidence:g}%"
    for i, a in enumerate(arms):
        _interval_row(ax_mean, i, a.mean, a.ci_t, colors[a.arm], scale)
        _interval_row(ax_iqm, i, a.iqm, a.ci_iqm, colors[a.arm], 100.0)
        seeds = profile_scores(report, a.arm)
        if a.iqm is not None and a.ci_iqm[0] is None and seeds.shape[1] > 1:  # no interval
            from ccpo_lab.stats import aggregate_iqm

            per_seed = [aggregate_iqm(row[None, :]) for row in seeds]
            ax_iqm.plot(100.0 * np.array(per_seed), np.full(len(per_seed), i), "|",
                        color=colors[a.arm], ms=7, mew=1.0, alpha=0.8)
    lims = [*ax_mean.get_xlim(), *ax_iqm.get_xlim()]
    if scale == 100.0:
        for ax in (ax_mean, ax_iqm):
            ax.set_xlim(min(lims), max(lims))
    ax_mean.set_yticks(range(len(arms)), [a.arm for a in arms])
    ax_mean.invert_yaxis()
    ax_mean.set_title(f"mean, {lv} t interval")
    iqm_title = f"IQM, {lv} stratified bootstrap interval"
    if not any(a.ci_iqm[0] is not None for a in arms):
        iqm_title = (f"IQM (○), each seed's IQM (|); no interval below "
                     f"{model.iqm_bootstrap_min_seeds} seeds")
    ax_iqm.set_title(iqm_title)
    ax_mean.set_xlabel(_ylabel(report))
    ax_iqm.set_xlabel("IQM of task-type success (%)")
    for ax in (ax_mean, ax_iqm):
        ax.grid(axis="y", visible=False)
    return fig


def draw_improvement(report: Report) -> Figure:
    """P(arm > reference) per arm, with its bootstrap interval where it meets its level."""
    from matplotlib.figure import Figure

    model, colors = report.model, _colors(report)
    rows = [c for c in model.comparisons if c.prob_improvement is not None]
    fig = Figure(figsize=(NARROW_IN, 0.3 * len(rows) + 0.85), layout="constrained")
    ax = fig.subplots()
    for i, c in enumerate(rows):
        _interval_row(ax, i, c.prob_improvement, c.ci_prob_improvement, colors[c.arm], 1.0)
    ax.axvline(0.5, color="0.3", lw=0.8, ls="--")
    ax.set_xlim(-0.04, 1.04)
    ax.set_yticks(range(len(rows)), [c.arm for c in rows])
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    pairs = {c.reference for c in rows} - {model.reference}
    ax.set_xlabel("P(arm > its pair) over seeds" if pairs else
                  f"P(arm > {model.reference}) over seeds")
    shown = any(c.ci_prob_improvement[0] is not None for c in rows)
    ax.set_title(f"probability of improvement, {100 * model.confidence:g}% bootstrap interval"
                 if shown else f"probability of improvement (interval from "
                 f"{model.bootstrap_min_seeds} seeds per arm)")
    return fig


def profile_scores(report: Report, arm: str) -> np.ndarray:
    """(seeds, task types) window means of an arm (complete rows), else (seeds, 1) of the
    report's metric; in the metric's units."""
    a = report.model.arm(arm)
    types = [c for c in report.model.task_columns if c not in ("All", "Turns")]
    six = np.array([[np.nan if e.per_task[col] is None else e.per_task[col]
                     for col in types] for e in a.per_seed.values()], dtype=np.float64)
    six = six.reshape(-1, len(types))
    complete = six[~np.isnan(six).any(axis=1)]
    if complete.shape[0]:
        return complete
    x = np.array([e.mean for e in a.per_seed.values() if e.mean is not None], dtype=np.float64)
    return x[:, None]


def performance_profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's score distribution: the fraction of scores above each threshold.

    Args:
        scores: float (runs, tasks).
        taus: float (k,) thresholds.

    Returns:
        float (k,): ``mean(scores > tau)`` over all runs x tasks.
    """
    return (scores.reshape(-1)[None, :] > taus[:, None]).mean(axis=1)


def draw_profile(report: Report) -> Figure:
    """Performance profiles: fraction of (seed, task type) scores above each threshold."""
    from matplotlib.figure import Figure

    colors = _colors(report)
    scale = 100.0 if is_rate(report.settings.metric) else 1.0
    fig = Figure(figsize=(NARROW_IN, 2.3 + 0.13 * math.ceil(len(report.arms) / 2)),
                 layout="constrained")
    ax = fig.subplots()
    per_task = False
    all_scores = {arm: profile_scores(report, arm) for arm in report.arms}
    hi = max([1.0] + [float(np.nanmax(s)) for s in all_scores.values() if s.size])
    taus = np.linspace(0.0, hi, 201)
    for arm, s in all_scores.items():
        if not s.size:
            continue
        per_task = per_task or s.shape[1] > 1
        ax.step(scale * taus, performance_profile(s, taus), where="post", color=colors[arm],
                lw=1.4, label=f"{arm} ({s.shape[0]} seeds)")
    what = "seed × task type" if per_task else "seed"
    ax.set_xlabel(f"threshold τ{' (%)' if scale == 100.0 else ''}")
    ax.set_ylabel("fraction of scores > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"performance profile (one score per {what})")
    fig.legend(loc="outside lower center", ncol=2, frameon=False, fontsize=6.5)
    return fig


def draw_per_task(report: Report) -> Figure:
    """Per-task-type success per arm with t intervals clipped to [0, 100] (ends marked)."""
    from matplotlib.figure import Figure

    colors = _colors(report)
    cols = [c for c in report.model.task_columns if c != "Turns"]
    arms = report.model.arms
    fig = Figure(figsize=(WIDE_IN, 2.3 + 0.15 * math.ceil(len(arms) / 3)),
                 layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(arms))
    x = np.arange(len(cols))
    clipped = False
    for i, a in enumerate(arms):
        stats = [a.per_task[c] for c in cols]
        mean = np.array([np.nan if st.mean is None else 100 * st.mean for st in stats])
        lo = np.array([np.nan if st.ci_t[0] is None else 100 * st.ci_t[0] for st in stats])
        hi = np.array([np.nan if st.ci_t[1] is None else 100 * st.ci_t[1] for st in stats])
        lo_c, hi_c = np.clip(lo, 0.0, 100.0), np.clip(hi, 0.0, 100.0)
        pos = x + (i - (len(arms) - 1) / 2) * width
        ax.bar(pos, np.nan_to_num(mean), width * 0.92, color=colors[a.arm],
               label=f"{a.arm} ({a.n_seeds} seeds)")
        ok = ~np.isnan(lo)
        ax.errorbar(pos[ok], mean[ok], yerr=np.vstack([mean[ok] - lo_c[ok], hi_c[ok] - mean[ok]]),
                    fmt="none", ecolor="0.15", elinewidth=0.7, capsize=1.5)
        top, bottom = ok & (hi > 100.0), ok & (lo < 0.0)
        ax.plot(pos[top], np.full(top.sum(), 100.0), "^", color="0.15", ms=2.8)
        ax.plot(pos[bottom], np.full(bottom.sum(), 0.0), "v", color="0.15", ms=2.8)
        clipped = clipped or bool(top.any() or bottom.any())
    ax.set_xticks(x, cols)
    ax.set_ylabel("held-out success (%)")
    ax.set_ylim(0, 104)
    ax.grid(axis="x", visible=False)
    lv = f"{100 * report.settings.confidence:g}%"
    ax.set_title(f"per task type, step ≥ {report.settings.window_start}: mean over seeds with "
                 f"its {lv} t interval" + ("; intervals clipped to [0, 100], ▲ ▼ mark clipped "
                                           "ends" if clipped else ""))
    fig.legend(loc="outside lower center", ncol=min(len(arms), 3), frameon=False)
    return fig


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("curves", "held-out curves per arm (small multiples): each seed thin, the mean "
               "over seeds thick, the reference's mean dashed, the converged window shaded",
               True, draw_curves),
    FigureSpec("difference", "difference to the reference at each evaluation per arm: each "
               "common seed thin, their mean thick with its paired t interval, 0 marked",
               True, draw_difference),
    FigureSpec("aggregates", "interval estimates per arm (rliable style): mean with its t "
               "interval; IQM over seeds x task types with its stratified bootstrap "
               "interval where that meets its level (else the point alone)", True,
               draw_aggregates),
    FigureSpec("improvement", "probability of improvement P(arm > reference) over seeds "
               "(rliable), with its bootstrap interval where that meets its level; 0.5 = "
               "no difference", False, draw_improvement),
    FigureSpec("profile", "performance profiles (rliable): fraction of (seed, task type) "
               "window means above each threshold, per arm", False, draw_profile),
    FigureSpec("per_task", "success per task type and arm, mean over seeds with its t "
               "interval; intervals are clipped to [0, 100] and clipped ends are marked",
               True, draw_per_task),
)
"""The report's figures, in order."""


def write_figures(report: Report, out_dir: Path,
                  specs: Sequence[FigureSpec] = FIGURES) -> list[Path]:
    """Write each figure as ``<stem>.png`` (300 dpi) and ``<stem>.pdf``; return the paths."""
    import matplotlib

    written = []
    with matplotlib.rc_context(STYLE):
        for spec in specs:
            fig = spec.draw(report)
            for ext in ("png", "pdf"):
                path = out_dir / f"{spec.stem}.{ext}"
                fig.savefig(path, dpi=DPI, metadata={"Creator": "ccpo-lab"} if ext == "pdf"
                            else None)
                written.append(path)
    return written
