"""An adaptive seed design in MLflow: the sweep's parent run gets its looks.

From ``<sweep>/adaptive.json`` (:mod:`ccpo_lab.adaptive.store`), on every sync:

* metrics with the look as their step: per comparison ``adaptive/<arm>_vs_<baseline>/``
  ``p``, ``nominal`` (the boundary as a nominal level), ``level`` (alpha with the
  joint family, the Holm share ``alpha / r`` with Holm), ``alpha_spent``, ``t``,
  ``diff``, ``n_x``, ``n_y``; per arm ``adaptive/seeds/<arm>``;
* tags: ``ccpo_lab.adaptive.looks``, ``ccpo_lab.adaptive.finished`` and, per comparison,
  ``ccpo_lab.adaptive.<arm>_vs_<baseline>`` = its verdict with the look and threshold;
* the state file itself as the artifact ``adaptive/adaptive.json`` (every look, decision
  and reason, and the scores each look read).

The design's parameters are params already (the sweep's ``analysis.adaptive`` section).
Metric timestamps are the look numbers, so a sync repeated sends duplicates the SQL store
recognises; tags and the artifact are replaced. The values are built here;
:mod:`ccpo_lab.tracking.mlflow_sync` sends them.
"""

from __future__ import annotations

from ccpo_lab.adaptive.store import DesignRecord

TAG = "ccpo_lab.adaptive"
"""Prefix of the design's tags."""


def adaptive_values(record: DesignRecord) -> list[tuple[str, float, int]]:
    """``(metric key, value, look)`` of every look's decisions and seeds per arm."""
    out: list[tuple[str, float, int]] = []
    for look in record.state.looks:
        for arm, seeds in look.seeds.items():
            out.append((f"adaptive/seeds/{arm}", float(len(seeds)), look.index))
        for d in look.decisions:
            base = f"adaptive/{d.arm}_vs_{d.baseline}"
            for name, value in (("p", d.p_value), ("nominal", d.nominal), ("level", d.level),
                                ("alpha_spent", d.alpha_spent), ("t", d.t), ("diff", d.diff),
                                ("n_x", d.n_x), ("n_y", d.n_y)):
                if value is not None:
                    out.append((f"{base}/{name}", float(value), look.index))
    return out


def adaptive_tags(record: DesignRecord) -> dict[str, str]:
    """The design's tags: looks, finished, and each comparison's verdict and threshold."""
    state = record.state
    tags = {f"{TAG}.looks": str(len(state.looks)),
            f"{TAG}.finished": str(state.finished).lower()}
    closed_at = {d.key: look.index for look in state.looks for d in look.decisions}
    level = "family level" if state.design.family == "joint" else "level alpha/r ="
    for key, d in state.last_decisions().items():
        threshold = "" if d.nominal is None else f", p <= {d.nominal:.3g} needed"
        tags[f"{TAG}.{d.arm}_vs_{d.baseline}"] = (
            f"{d.verdict_text()} (look {closed_at[key]}, {level} {d.level:.3g}{threshold})")
    return tags
