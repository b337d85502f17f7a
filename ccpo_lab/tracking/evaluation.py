"""The checkpoint evaluations in MLflow (logged by ``report --out``, with the report).

Each child run (one per (arm, seed)) gets, per checkpoint evaluation of the report
(:mod:`ccpo_lab.report.evaluation`; the first of each split and checkpoint, the one with
the most episodes), ``eval/<split>/<checkpoint>/success_rate``, ``.../turns``,
``.../invalid``, ``.../episodes`` at the checkpoint's step (``<checkpoint>`` is ``final``,
``best`` or ``step_<S>``); the sweep's parent run gets the tables' numbers:
``eval/<split>/<checkpoint>/<arm>/mean`` (``ci_low``, ``ci_high``, ``n_seeds``),
``.../<arm>_vs_<reference>/diff`` (``ci_low``, ``ci_high``, ``p``, ``p_holm``), the
decomposition ``.../<arm>/var``, ``var_seed``, ``var_episode``, ``halfwidth``,
``halfwidth_more_seed``, ``halfwidth_more_episodes`` (and the same under
``.../<arm>_vs_<reference>/`` and ``eval/training_window/``), and the best checkpoint's
``eval/selection/<arm>/bias`` (``ci_low``, ``ci_high``, ``training``, ``rescore``).
Reference policies (``evaluate --reference``): ``.../ref_<label>/mean`` (``ci_low``,
``ci_high``, ``n_seeds``) and ``.../<arm>_vs_ref_<label>/diff`` (``ci_low``, ``ci_high``,
``p``, ``p_holm``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ccpo_lab.tracking.rows import MAX_METRICS, safe_key

if TYPE_CHECKING:
    from ccpo_lab.report.evaluation import EvalGroup, VarianceRow
    from ccpo_lab.report.model import ReportModel


def _label(checkpoint: str) -> str:
    return checkpoint.replace(" ", "_")


def primary_groups(report: ReportModel) -> list[EvalGroup]:
    """The first group of each (split, checkpoint): the one MLflow gets."""
    if report.evaluation is None:
        return []
    seen: set[tuple[str, str]] = set()
    out = []
    for g in report.evaluation.groups:
        if (g.split, g.checkpoint) not in seen:
            seen.add((g.split, g.checkpoint))
            out.append(g)
    return out


def _variance(base: str, r: VarianceRow) -> dict[str, float | None]:
    return {f"{base}/var": r.var_means, f"{base}/var_seed": r.seed,
            f"{base}/var_episode": r.episode, f"{base}/halfwidth": r.halfwidth,
            f"{base}/halfwidth_more_seed": r.halfwidth_more_seed,
            f"{base}/halfwidth_more_episodes": r.halfwidth_more_episodes}


def _references(base: str, g: EvalGroup) -> dict[str, float | int | None]:
    """A group's reference policies and every arm against each."""
    raw: dict[str, float | int | None] = {}
    for r in g.references:
        k = f"{base}/ref_{r.reference}"
        raw.update({f"{k}/mean": r.mean, f"{k}/ci_low": r.ci[0], f"{k}/ci_high": r.ci[1],
                    f"{k}/n_seeds": r.n_seeds})
    for c in g.reference_comparisons:
        k = f"{base}/{c.arm}_vs_ref_{c.reference}"
        raw.update({f"{k}/diff": c.diff, f"{k}/ci_low": c.ci[0], f"{k}/ci_high": c.ci[1],
                    f"{k}/p": c.p, f"{k}/p_holm": c.p_holm})
    return raw


def parent_metrics(report: ReportModel) -> dict[str, float]:
    """The evaluation tables' numbers, as metric keys of the sweep's parent run."""
    ev = report.evaluation
    if ev is None:
        return {}
    raw: dict[str, float | int | None] = {}
    for g in primary_groups(report):
        base = f"eval/{g.split}/{_label(g.checkpoint)}"
        for a in g.arms:
            raw.update({f"{base}/{a.arm}/mean": a.mean, f"{base}/{a.arm}/ci_low": a.ci_t[0],
                        f"{base}/{a.arm}/ci_high": a.ci_t[1],
                        f"{base}/{a.arm}/n_seeds": a.n_seeds})
        for c in g.comparisons:
            k = f"{base}/{c.arm}_vs_{c.reference}"
            raw.update({f"{k}/diff": c.diff, f"{k}/ci_low": c.ci[0], f"{k}/ci_high": c.ci[1],
                        f"{k}/p": c.p, f"{k}/p_holm": c.p_holm})
        for r in g.variance:
            who = r.arm if r.reference is None else f"{r.arm}_vs_{r.reference}"
            raw.update(_variance(f"{base}/{who}", r))
        raw.update(_references(base, g))
    for r in ev.window:
        who = r.arm if r.reference is None else f"{r.arm}_vs_{r.reference}"
        raw.update(_variance(f"eval/training_window/{who}", r))
    for s in ev.selection:
        raw.update({f"eval/selection/{s.arm}/bias": s.bias,
                    f"eval/selection/{s.arm}/ci_low": s.ci[0],
                    f"eval/selection/{s.arm}/ci_high": s.ci[1],
                    f"eval/selection/{s.arm}/training": s.training,
                    f"eval/selection/{s.arm}/rescore": s.rescore})
    return {safe_key(k): float(v) for k, v in raw.items() if v is not None}


def child_metrics(report: ReportModel) -> dict[tuple[str, int], list[tuple[str, float, int]]]:
    """Per (arm, seed): ``(key, value, step)`` of its evaluations."""
    out: dict[tuple[str, int], list[tuple[str, float, int]]] = {}
    for g in primary_groups(report):
        base = f"eval/{g.split}/{_label(g.checkpoint)}"
        for a in g.arms:
            for seed, value in a.per_seed.items():
                step = int(a.steps[seed])
                out.setdefault((a.arm, seed), []).extend([
                    (safe_key(f"{base}/success_rate"), float(value), step),
                    (safe_key(f"{base}/episodes"), float(a.episodes), step)])
    return out


def log_children(client: Any, children: Iterable[Any], report: ReportModel | None) -> int:
    """Log :func:`child_metrics` to the child runs (MLflow runs with the arm and seed
    tags); returns the values logged. Idempotent: SQL stores keep one value per (key,
    step, timestamp) and the timestamps are the steps."""
    from mlflow.entities import Metric

    if report is None or report.evaluation is None:
        return 0
    values = child_metrics(report)
    n = 0
    for child in children:
        tags = child.data.tags
        try:
            key = (str(tags.get("ccpo_lab.arm")), int(tags.get("ccpo_lab.seed", "")))
        except ValueError:
            continue
        items = [Metric(k, v, step, step) for k, v, step in values.get(key, [])]
        for i in range(0, len(items), MAX_METRICS):
            client.log_batch(child.info.run_id, metrics=items[i:i + MAX_METRICS])
        n += len(items)
    return n
