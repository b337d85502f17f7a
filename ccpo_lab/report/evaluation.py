"""The report's checkpoint evaluations (``ccpo-lab evaluate``): rows, section and tables.

From every reported run's ``evals/*.jsonl`` (read through
:func:`ccpo_lab.runs.evals.read_eval_file`; a file that cannot be used is named in a note,
with its line), :func:`evaluation_section` builds:

- one **checkpoint evaluation** group per (split, checkpoint, games, repeats,
  temperature): the checkpoint is ``final`` (the run's last step), ``best`` (its best
  training-time evaluation, ``checkpoints/best/best.json``) or ``step S``. Every run of a
  group must have played the same draw (the same games in the same order): a run whose
  draw differs from its siblings' (the most common one) is left out of the group, with a
  note, as ``verify`` refuses different step-1 rollouts. Per arm: the mean over seeds of
  each seed's success over its episodes, with the t interval; per comparison with the
  reference: the paired difference (by seed), its t interval, p, Holm over the group's
  comparisons and the verdict (:func:`ccpo_lab.stats.verdict`);
- the **selection bias** of the best checkpoint: its training-time score (the evaluation
  that made it the best) against its in-distribution re-score, per arm (paired by seed);
- **where the uncertainty comes from**: per arm and per comparison of each group the
  variance of the per-seed means split into its seed part and its episode part
  (:func:`ccpo_lab.stats.variance.decompose_crossed`, comparisons on the game-level
  paired differences), and the same for the training-time window
  (:func:`~ccpo_lab.stats.variance.decompose_window`), with the half-widths now, with one
  more seed and with twice the episodes per seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.report.evaluation_tables import evaluation_tables
from ccpo_lab.report.model import INTERVAL, NESTED, Note
from ccpo_lab.report.numbers import Pair, interval, num
from ccpo_lab.runs.layout import RunDir

LABEL_ORDER = {"final": 0, "best": 1}


@dataclass(frozen=True)
class EvalArmRow:
    """One arm in one checkpoint evaluation: over its seeds."""

    arm: str
    """Arm."""
    n_seeds: int
    """Seeds evaluated."""
    mean: float | None
    """Mean over seeds of each seed's success over its episodes."""
    sd: float | None
    """sd across seeds (ddof=1)."""
    ci_t: Pair = field(metadata=INTERVAL)
    """Student t interval of the mean."""
    episodes: int
    """Episodes per seed (games x repeats)."""
    turns: float | None
    """Mean turns per episode."""
    invalid: float | None
    """Mean inadmissible actions per episode."""
    training: float | None
    """Mean over the same seeds of the training-time evaluation at the checkpoint's step
    (None when a seed has none)."""
    per_seed: dict[int, float] = field(metadata=NESTED)
    """Seed -> its success."""
    steps: dict[int, int] = field(metadata=NESTED)
    """Seed -> the checkpoint's step."""
    training_per_seed: dict[int, float | None] = field(metadata=NESTED)
    """Seed -> its training-time evaluation at that step (None: not logged)."""


@dataclass(frozen=True)
class EvalComparisonRow:
    """An arm against the reference in one checkpoint evaluation, paired by seed."""

    arm: str
    """X."""
    reference: str
    """Y."""
    n_pairs: int
    """Seeds both evaluated."""
    diff: float | None
    """Mean of the per-seed differences X - Y."""
    ci: Pair = field(metadata=INTERVAL)
    """Paired t interval."""
    p: float | None
    """Two-sided p of the paired t-test."""
    p_holm: float | None
    """Holm-adjusted over the group's comparisons."""
    verdict: str
    """``better``, ``worse`` or ``unresolved``."""
    reason: str
    """Why."""


@dataclass(frozen=True)
class VarianceRow:
    """The variance of the per-seed means of an arm (or of a paired difference) split into
    seeds and episodes, and what one more seed or twice the episodes would give."""

    evaluation: str
    """The group (``final, in, 48 games x 1``) or ``training window``."""
    arm: str
    """The arm (X of a comparison)."""
    reference: str | None
    """Y of a comparison (None: the arm itself)."""
    n_seeds: int
    """Seeds (pairs)."""
    n_games: float
    """Games per seed (the window: evaluations per seed)."""
    n_repeats: float | None
    """Episodes per game (the window: None)."""
    var_means: float | None
    """Observed variance of the per-seed means."""
    seed: float | None
    """Between-seed part."""
    episode: float | None
    """Episode part (of the variance of one seed's mean)."""
    drift: float | None
    """The window: the within-run drift part (None for a re-score)."""
    episode_share: float | None
    """Episode part / (seed + episode + drift)."""
    truncated: bool
    """A negative component estimate was set to 0."""
    halfwidth: float | None
    """t half-width of the mean now."""
    halfwidth_more_seed: float | None
    """Expected with one more seed."""
    halfwidth_more_episodes: float | None
    """Expected with twice the episodes per seed."""
    advice: str
    """``seeds``, ``episodes``, ``either`` or ``unknown``."""


@dataclass(frozen=True)
class SelectionRow:
    """The best checkpoint: its training-time score against its re-score (paired by seed)."""

    arm: str
    """Arm."""
    n_seeds: int
    """Seeds with both."""
    training: float | None
    """Mean training-time score of the best checkpoints (what selected them)."""
    rescore: float | None
    """Their mean re-score (in distribution)."""
    bias: float | None
    """``training - rescore``: the selection bias measured."""
    ci: Pair = field(metadata=INTERVAL)
    """Its paired t interval."""


@dataclass(frozen=True)
class EvalReferenceRow:
    """A reference policy (``ccpo-lab evaluate --reference``) in one checkpoint evaluation:
    its episodes on the seeds' sampling streams of the same draw."""

    reference: str
    """Its label (``base``, a folder's name, ``ORG/NAME@REVISION``)."""
    kind: str
    """``base`` or ``hf``."""
    source: str
    """Where its weights are (``base``: the protocol's; else the folder)."""
    n_seeds: int
    """Seed streams it played."""
    mean: float | None
    """Success over its episodes."""
    ci: Pair = field(metadata=INTERVAL)
    """t interval, streams x games crossed (:func:`ccpo_lab.stats.crossed.compare_crossed`
    against 0)."""
    per_seed: dict[int, float] = field(metadata=NESTED)
    """Seed stream -> its success."""


@dataclass(frozen=True)
class EvalReferenceComparison:
    """An arm against a reference policy in one checkpoint evaluation, paired by game."""

    arm: str
    """X."""
    reference: str
    """The reference's label."""
    n_seeds: int
    """Seeds of the arm with the reference on their stream."""
    n_games: int
    """Games of the draw."""
    diff: float | None
    """X - reference, over seeds x games."""
    ci: Pair = field(metadata=INTERVAL)
    """t interval (seeds and games both random)."""
    p: float | None
    """Two-sided p."""
    p_holm: float | None
    """Holm over the table's reference comparisons."""
    verdict: str
    """``better``, ``worse`` or ``unresolved``."""
    reason: str
    """Why."""
    method: str
    """How the variance was estimated (:class:`~ccpo_lab.stats.crossed.CrossedComparison`)."""


@dataclass(frozen=True)
class EvalGroup:
    """One checkpoint evaluation: a checkpoint, a split and a setting, over the runs."""

    split: str
    """``in`` or ``out``."""
    checkpoint: str
    """``final``, ``best`` or ``step S``."""
    games: int
    """Games of the draw."""
    repeats: int
    """Episodes per game."""
    temperature: float
    """Sampling temperature."""
    draw_id: str
    """The draw every run of the group played."""
    arms: tuple[EvalArmRow, ...] = field(metadata=NESTED)
    """Per arm."""
    comparisons: tuple[EvalComparisonRow, ...] = field(metadata=NESTED)
    """Per arm but the reference."""
    variance: tuple[VarianceRow, ...] = field(metadata=NESTED)
    """Per arm and comparison."""
    left_out: tuple[str, ...] = field(metadata=NESTED)
    """Runs left out of the group and why."""
    references: tuple[EvalReferenceRow, ...] = field(default=(), metadata=NESTED)
    """Reference policies that played the group's draw."""
    reference_comparisons: tuple[EvalReferenceComparison, ...] = field(default=(),
                                                                       metadata=NESTED)
    """Every arm against every reference, paired by game."""

    @property
    def name(self) -> str:
        """``final, in, 48 games x 1 at T=0.4``."""
        return (f"{self.checkpoint}, {self.split}, {self.games} games x {self.repeats} at "
                f"T={self.temperature:g}")


@dataclass(frozen=True)
class EvaluationSection:
    """Every checkpoint evaluation of the sweep and the variance decompositions."""

    groups: tuple[EvalGroup, ...] = field(metadata=NESTED)
    """Final, then best, then steps; in then out."""
    selection: tuple[SelectionRow, ...] = field(metadata=NESTED)
    """The best checkpoint's selection bias (in distribution), per arm."""
    window: tuple[VarianceRow, ...] = field(metadata=NESTED)
    """The training-time window's decomposition, per arm and comparison."""
    reference: str
    """The reference arm of the comparisons."""

    def tables(self, model: Any) -> list[Any]:
        """The section's tables (:mod:`ccpo_lab.report.evaluation_tables`)."""
        return evaluation_tables(model, self)


@dataclass
class _Found:
    """One usable evaluation file of one run (and its means, computed once)."""

    arm: str
    seed: int
    labels: tuple[str, ...]
    ev: Any
    training: float | None
    rate: float = 0.0
    turns: float = 0.0
    invalid: float = 0.0

    def __post_init__(self) -> None:
        n = self.ev.success.size
        self.rate = float(np.count_nonzero(self.ev.success)) / n
        self.turns = float(self.ev.turns.sum()) / n
        self.invalid = float(self.ev.invalid.sum()) / n


def _best_step(path: Path) -> int | None:
    from ccpo_lab.runs.metrics import fast_loads

    try:
        rec = fast_loads((path / "checkpoints" / "best" / "best.json").read_bytes())
    except (OSError, ValueError):
        return None
    step = rec.get("step") if isinstance(rec, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _labels(step: int, total: int | None, best: int | None) -> tuple[str, ...]:
    out = [n for n, s in (("final", total), ("best", best)) if s == step]
    return tuple(out) or (f"step {step}",)


def _collect(runs: Mapping[tuple[str, int], Any], metric: str
             ) -> tuple[list[_Found], list[Note]]:
    from ccpo_lab.runs.evals import EvalFileError, eval_files, read_eval_file

    found: list[_Found] = []
    notes: list[Note] = []
    for (arm, seed), r in runs.items():
        files = eval_files(RunDir(r.path))
        if not files:
            continue
        best = _best_step(r.path)
        steps, vals = r.series.get(metric, (np.empty(0, dtype=np.int64), np.empty(0)))
        for f in files:
            try:
                ev = read_eval_file(f)
            except EvalFileError as e:
                notes.append(Note(f"{arm} seed {seed}: evaluation not used: {e}", kind="run",
                                  arm=arm, seed=seed, file=str(f), line=e.problem.line))
                continue
            except OSError as e:
                notes.append(Note(f"{arm} seed {seed}: evaluation unreadable ({e}): not used",
                                  kind="run", arm=arm, seed=seed, file=str(f)))
                continue
            if ev.header.get("run_id") != r.run_id:
                notes.append(Note(f"{arm} seed {seed}: {f.name} evaluates run "
                                  f"{str(ev.header.get('run_id'))[:12]}, not this one: not "
                                  "used", kind="run", arm=arm, seed=seed, file=str(f)))
                continue
            at = np.flatnonzero(steps == ev.step)
            found.append(_Found(arm, seed, _labels(ev.step, r.total_steps, best), ev,
                                float(vals[at[-1]]) if at.size else None))
    return found, notes


@dataclass
class _RefFile:
    """One usable evaluation file of a reference policy on one seed's stream."""

    ref: Any
    seed: int
    ev: Any


def _collect_references(sweep_dir: Path | None) -> tuple[list[_RefFile], list[Note]]:
    """The evaluation files of the sweep's reference policies
    (:mod:`ccpo_lab.runs.references`) and notes on those not used."""
    from ccpo_lab.runs.evals import EvalFileError, eval_files, read_eval_file
    from ccpo_lab.runs.references import read_reference, reference_dirs

    found: list[_RefFile] = []
    notes: list[Note] = []
    for rd in reference_dirs(sweep_dir) if sweep_dir is not None else []:
        try:
            ref = read_reference(rd)
        except (OSError, ValueError) as e:
            notes.append(Note(f"reference {rd.path.parent.name}: not used ({e})", kind="run",
                              file=str(rd.path)))
            continue
        for f in eval_files(rd):
            try:
                found.append(_RefFile(ref, int(rd.seed or 0), read_eval_file(f)))
            except (EvalFileError, OSError) as e:
                notes.append(Note(f"reference {rd.path.parent.name} seed {rd.seed}: "
                                  f"evaluation not used: {e}", kind="run", file=str(f)))
    return found, notes


def _game_means(ev: Any) -> np.ndarray:
    """(N,) success per game, averaged over the repeats."""
    return np.asarray(ev.success, dtype=np.float64).mean(axis=0)


def _reference_rows(refs: Sequence[_RefFile], by_arm: dict[str, dict[int, _Found]],
                    arms: Sequence[str], games: tuple[str, ...], s: Any
                    ) -> tuple[list[EvalReferenceRow], list[EvalReferenceComparison]]:
    """The references that played ``games`` (newest file per (reference, seed)), and
    every arm against each, paired by game and seed stream (Holm over all of them)."""
    from ccpo_lab.stats import holm, verdict
    from ccpo_lab.stats.crossed import compare_crossed

    by_ref: dict[str, dict[int, _RefFile]] = {}
    kinds: dict[str, Any] = {}
    for r in refs:
        if r.ev.games != games:
            continue
        prev = by_ref.setdefault(r.ref.label, {}).get(r.seed)
        if prev is None or r.ev.path.name > prev.ev.path.name:
            by_ref[r.ref.label][r.seed] = r
        kinds[r.ref.label] = r.ref
    rows, raw = [], []
    for label, per in by_ref.items():
        seeds = sorted(per)
        y = np.stack([_game_means(per[k].ev) for k in seeds])
        c = compare_crossed(y, np.zeros_like(y), s.confidence)
        rows.append(EvalReferenceRow(
            reference=label, kind=kinds[label].kind,
            source=kinds[label].path or "the protocol's base model", n_seeds=len(seeds),
            mean=num(c.diff), ci=interval(c.ci_low, c.ci_high),
            per_seed={k: float(y[i].mean()) for i, k in enumerate(seeds)}))
        for arm in [a for a in arms if a in by_arm]:
            common = sorted(set(by_arm[arm]) & set(per))
            if not common:
                continue
            x = np.stack([_game_means(by_arm[arm][k].ev) for k in common])
            raw.append((arm, label, compare_crossed(
                x, np.stack([_game_means(per[k].ev) for k in common]), s.confidence)))
    adjusted = holm(np.array([c.p_value for *_, c in raw])) if raw else np.empty(0)
    comps = []
    for (arm, label, c), ph in zip(raw, adjusted, strict=True):
        v = verdict(c.diff, float(ph), c.n_seeds, c.n_seeds, None, s.alpha)
        comps.append(EvalReferenceComparison(
            arm=arm, reference=label, n_seeds=c.n_seeds, n_games=c.n_games,
            diff=num(c.diff), ci=interval(c.ci_low, c.ci_high), p=num(c.p_value),
            p_holm=num(ph), verdict=v.label, reason=v.reason, method=c.method))
    return rows, comps


def _decomposition_row(evaluation: str, arm: str, ref: str | None, d: Any) -> VarianceRow:
    p = d.projection
    return VarianceRow(
        evaluation=evaluation, arm=arm, reference=ref, n_seeds=d.n_seeds,
        n_games=float(d.n_games), n_repeats=None if not np.isfinite(d.n_repeats)
        else float(d.n_repeats), var_means=num(d.var_means), seed=num(d.seed),
        episode=num(d.episode), drift=None if evaluation != "training window" else num(d.drift),
        episode_share=num(d.episode_share), truncated=d.truncated, halfwidth=num(p.now),
        halfwidth_more_seed=num(p.more_seed), halfwidth_more_episodes=num(p.more_episodes),
        advice=p.advice)


def _draw_members(members: list[_Found], reference: str
                  ) -> tuple[str, list[_Found], list[str]]:
    """The group's draw (the most common; a tie goes to the reference's), the runs that
    played it and why the others are left out."""
    draws = Counter(m.ev.draw_id for m in members)
    ref_draws = [m.ev.draw_id for m in members if m.arm == reference]
    top = max(draws.items(), key=lambda kv: (kv[1], kv[0] in ref_draws))[0]
    games = next(m.ev.games for m in members if m.ev.draw_id == top)
    left, kept = [], []
    for m in members:
        if m.ev.draw_id != top or m.ev.games != games:
            left.append(f"{m.arm} seed {m.seed}: its game list differs from its siblings' "
                        f"(draw {m.ev.draw_id[:8]}, the others' {top[:8]}): left out of "
                        f"this table")
        else:
            kept.append(m)
    return top, kept, left


def _arm_row(arm: str, ms: dict[int, _Found], confidence: float) -> EvalArmRow:
    from ccpo_lab.stats import summarize_arm

    seeds = sorted(ms)
    x = np.array([ms[k].rate for k in seeds])
    a = summarize_arm(x, confidence)
    trained = [ms[k].training for k in seeds]
    return EvalArmRow(
        arm=arm, n_seeds=a.n, mean=num(a.mean), sd=num(a.sd),
        ci_t=interval(a.ci_low, a.ci_high), episodes=int(ms[seeds[0]].ev.success.size),
        turns=num(sum(ms[k].turns for k in seeds) / len(seeds)),
        invalid=num(sum(ms[k].invalid for k in seeds) / len(seeds)),
        training=None if any(t is None for t in trained)
        else num(np.mean([float(t) for t in trained if t is not None])),
        per_seed={k: float(x[i]) for i, k in enumerate(seeds)},
        steps={k: ms[k].ev.step for k in seeds},
        training_per_seed={k: ms[k].training for k in seeds})


def _comparisons(by_arm: dict[str, dict[int, _Found]], arms: Sequence[str], reference: str,
                 name: str, s: Any) -> tuple[list[EvalComparisonRow], list[VarianceRow]]:
    """Each arm against the reference, paired by seed (Holm over them), and the
    decomposition of its game-level paired differences."""
    from ccpo_lab.stats import compare_arms, holm, verdict
    from ccpo_lab.stats.variance import decompose_crossed

    raw, variance = [], []
    ref = by_arm.get(reference, {})
    for arm in [a for a in arms if a in by_arm and a != reference]:
        ms = by_arm[arm]
        sx, sy = sorted(ms), sorted(ref)
        c = compare_arms([ms[k].rate for k in sx], [ref[k].rate for k in sy], sx, sy,
                         s.confidence)
        raw.append((arm, c))
        common = sorted(set(ms) & set(ref))
        if len(common) >= 2:
            d = np.stack([ms[k].ev.success.astype(np.float64) - ref[k].ev.success.astype(
                np.float64) for k in common])
            variance.append(_decomposition_row(name, arm, reference,
                                               decompose_crossed(d, s.confidence)))
    adjusted = holm(np.array([c.p_value for _, c in raw])) if raw else np.empty(0)
    comps = []
    for (arm, c), ph in zip(raw, adjusted, strict=True):
        v = verdict(c.diff, float(ph), c.n_x, c.n_y, None, s.alpha)
        comps.append(EvalComparisonRow(arm=arm, reference=reference, n_pairs=c.n_pairs,
                                       diff=num(c.diff), ci=interval(c.ci_low, c.ci_high),
                                       p=num(c.p_value), p_holm=num(ph), verdict=v.label,
                                       reason=v.reason))
    return comps, variance


def _group(split: str, label: str, members: list[_Found], arms: Sequence[str],
           reference: str, s: Any, refs: Sequence[_RefFile] = ()) -> EvalGroup:
    """One group's rows (``members``: its runs' files, one per (arm, seed); ``refs``: the
    reference policies' files of the same setting)."""
    from ccpo_lab.stats.variance import decompose_crossed

    top, kept, left = _draw_members(members, reference)
    by_arm: dict[str, dict[int, _Found]] = {}
    for m in kept:
        by_arm.setdefault(m.arm, {})[m.seed] = m
    h = members[0].ev.header
    name = f"{label}, {split}, {h['episodes']} games x {h['repeats']}"
    arm_rows, variance = [], []
    for arm in [a for a in arms if a in by_arm]:
        arm_rows.append(_arm_row(arm, by_arm[arm], s.confidence))
        y = np.stack([by_arm[arm][k].ev.success.astype(np.float64)
                      for k in sorted(by_arm[arm])])
        variance.append(_decomposition_row(name, arm, None,
                                           decompose_crossed(y, s.confidence)))
    comps, paired = _comparisons(by_arm, arms, reference, name, s)
    ref_rows, ref_comps = _reference_rows([r for r in refs if r.ev.draw_id == top], by_arm,
                                          arms, kept[0].ev.games, s)
    return EvalGroup(split=split, checkpoint=label, games=int(h["episodes"]),
                     repeats=int(h["repeats"]), temperature=float(h["temperature"]),
                     draw_id=top, arms=tuple(arm_rows), comparisons=tuple(comps),
                     variance=tuple(variance + paired), left_out=tuple(left),
                     references=tuple(ref_rows), reference_comparisons=tuple(ref_comps))


def _selection(groups: Sequence[EvalGroup], confidence: float) -> tuple[SelectionRow, ...]:
    """Training-time score vs re-score of the best checkpoints (the in-split best groups)."""
    from ccpo_lab.stats import compare_arms

    out = []
    for g in groups:
        if g.checkpoint != "best" or g.split != "in":
            continue
        for a in g.arms:
            seeds = sorted(a.per_seed)
            if a.training is None:
                continue
            tr = np.array([a.training_per_seed[k] for k in seeds], dtype=np.float64)
            rs = np.array([a.per_seed[k] for k in seeds])
            c = compare_arms(tr, rs, seeds, seeds, confidence)
            out.append(SelectionRow(arm=a.arm, n_seeds=len(seeds), training=num(tr.mean()),
                                    rescore=num(rs.mean()), bias=num(c.diff),
                                    ci=interval(c.ci_low, c.ci_high)))
        break  # the first (largest) in-distribution best group
    return tuple(out)


def _window_rows(runs: Mapping[tuple[str, int], Any], arms: Sequence[str], reference: str,
                 s: Any) -> tuple[VarianceRow, ...]:
    """The training-time window's decomposition per arm and per comparison (rates of the
    window's evaluations, binomial episode noise from the episodes per evaluation)."""
    from ccpo_lab.stats.variance import binomial_noise, decompose_window

    series: dict[str, dict[int, dict[int, float]]] = {}
    episodes: dict[tuple[str, int], int] = {}
    for (arm, seed), r in runs.items():
        st, vals = r.series.get(s.metric, (np.empty(0, dtype=np.int64), np.empty(0)))
        if not r.n_episodes or r.n_episodes < 2 or not st.size:
            continue
        keep = st >= s.window_start
        if not keep.any():
            continue
        series.setdefault(arm, {})[seed] = dict(zip(st[keep].tolist(), vals[keep].tolist(),
                                                    strict=True))
        episodes[(arm, seed)] = int(r.n_episodes)
    out = []

    def matrix(arm: str, seeds: list[int], steps: list[int]) -> np.ndarray:
        return np.array([[series[arm][k].get(t, np.nan) for t in steps] for k in seeds])

    for arm in [a for a in arms if a in series]:
        seeds = sorted(series[arm])
        steps = sorted({t for k in seeds for t in series[arm][k]})
        v = matrix(arm, seeds, steps)
        if np.any((v[~np.isnan(v)] < 0) | (v[~np.isnan(v)] > 1)):
            return ()
        n = np.array([[episodes[(arm, k)]] * len(steps) for k in seeds], dtype=np.float64)
        d = decompose_window(v, binomial_noise(v, n), s.confidence)
        out.append(_decomposition_row("training window", arm, None, d))
    for arm in [a for a in arms if a in series and a != reference and reference in series]:
        common = sorted(set(series[arm]) & set(series[reference]))
        if len(common) < 2:
            continue
        steps = sorted({t for k in common for t in series[arm][k]} &
                       {t for k in common for t in series[reference][k]})
        vx, vy = matrix(arm, common, steps), matrix(reference, common, steps)
        nx = np.array([[episodes[(arm, k)]] * len(steps) for k in common], dtype=np.float64)
        ny = np.array([[episodes[(reference, k)]] * len(steps) for k in common],
                      dtype=np.float64)
        noise = binomial_noise(vx, nx) + binomial_noise(vy, ny)
        d = decompose_window(vx - vy, noise, s.confidence)
        out.append(_decomposition_row("training window", arm, reference, d))
    return tuple(out)


def evaluation_section(runs: Mapping[tuple[str, int], Any], arms: Sequence[str],
                       s: Any, sweep_dir: Path | None = None
                       ) -> tuple[EvaluationSection | None, list[Note]]:
    """The section (None when no run has an evaluation) and notes on files not used.

    Args:
        runs: the report's runs, ``(arm, seed) -> RunData`` (the newest directory each).
        arms: arms in report order.
        s: the report's settings (reference, confidence, alpha, metric, window).
        sweep_dir: the sweep directory, for its reference policies' evaluations.
    """
    found, notes = _collect(runs, s.metric)
    refs, ref_notes = _collect_references(sweep_dir)
    notes += ref_notes
    if not found:
        return None, notes
    buckets: dict[tuple[str, str, int, int, float], dict[tuple[str, int], _Found]] = {}
    for f in found:
        split, n, r, t = f.ev.setting
        for label in f.labels:
            bucket = buckets.setdefault((split, label, n, r, t), {})
            prev = bucket.get((f.arm, f.seed))
            if prev is None or f.ev.path.name > prev.ev.path.name:
                bucket[(f.arm, f.seed)] = f

    def order(key: tuple[str, str, int, int, float]) -> tuple[Any, ...]:
        split, label, n, r, t = key
        step = int(label.split()[-1]) if label.startswith("step") else -1
        return (LABEL_ORDER.get(label, 2), step, split != "in", -n * r, r, t)

    groups = []
    for key in sorted(buckets, key=order):
        split, label = key[0], key[1]
        members = list(buckets[key].values())
        g = _group(split, label, members, arms, s.reference, s,
                   [r for r in refs if tuple(r.ev.setting) == (split, *key[2:])])
        groups.append(g)
        notes += [Note(x, kind="run") for x in g.left_out]
    selection = _selection(groups, s.confidence)
    window = _window_rows(runs, arms, s.reference, s)
    return EvaluationSection(tuple(groups), selection, window, s.reference), notes
