"""The cross-environment section (:mod:`ccpo_lab.report.across`) in MLflow.

A sweep over several environments has one parent run per environment (its group,
``<sweep>/<environment>``, :func:`ccpo_lab.runs.family.tracking_group`) and no run of its
own; each environment's parent gets the whole section, so that any of them shows whether
its conclusions carry over: per comparison (``<arm>_vs_<reference>``)

* metrics ``across/<arm>_vs_<reference>/interaction`` (two environments: the difference of
  differences), ``interaction_ci_low`` / ``interaction_ci_high``, ``interaction_p``,
  ``interaction_p_holm``, ``directions_agree`` (1 or 0), ``n_environments``;
* tags ``ccpo_lab.across.<arm>_vs_<reference>`` (``holds``, ``differs`` or
  ``unresolved``) and ``ccpo_lab.environments`` (the sweep's, comma-separated).

Entry point: :func:`log_across` (after each environment's :func:`~ccpo_lab.tracking.
mlflow_sync.sync_sweep`, with the parent run it returned).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ccpo_lab.tracking.rows import safe_key

if TYPE_CHECKING:
    from ccpo_lab.report.across import AcrossSection

__all__ = ["ENVIRONMENTS_TAG", "across_metrics", "across_tags", "log_across"]

ENVIRONMENTS_TAG = "ccpo_lab.environments"
"""The environments of the sweep (comma-separated), on each environment's parent run."""


def across_metrics(section: AcrossSection) -> dict[str, float]:
    """The section's numbers as metric keys (undefined ones left out)."""
    out: dict[str, float] = {}

    def put(key: str, value: float | int | None) -> None:
        if value is not None and value == value and abs(float(value)) != float("inf"):
            out[safe_key(key)] = float(value)

    for r in section.rows:
        base = f"across/{r.arm}_vs_{r.reference}"
        it = r.interaction
        if it is not None:
            put(f"{base}/interaction", it.estimate)
            lo, hi = it.ci or (None, None)
            put(f"{base}/interaction_ci_low", lo)
            put(f"{base}/interaction_ci_high", hi)
            put(f"{base}/interaction_p", it.p)
        put(f"{base}/interaction_p_holm", r.p_holm)
        if r.directions in ("agree", "disagree"):
            put(f"{base}/directions_agree", int(r.directions == "agree"))
        put(f"{base}/n_environments", sum(c.verdict != "absent" for c in r.cells))
    return out


def across_tags(section: AcrossSection) -> dict[str, str]:
    """Each comparison's verdict across environments, and the environments."""
    tags = {safe_key(f"ccpo_lab.across.{r.arm}_vs_{r.reference}"): r.verdict
            for r in section.rows}
    tags[ENVIRONMENTS_TAG] = ",".join(section.environments)
    return tags


def log_across(uri: str, parent_run_id: str, section: AcrossSection,
               sweep_dir: str | Path | None = None, step: int = 0) -> int:
    """Log the section to one parent run (``SyncResult.uri`` and ``.parent_run_id`` of an
    environment's :func:`~ccpo_lab.tracking.mlflow_sync.sync_sweep`); under the store's
    sync lock when ``sweep_dir`` (that environment's directory) is given. Returns the
    number of metrics logged."""
    import contextlib

    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    from ccpo_lab.tracking.rows import MAX_METRICS
    from ccpo_lab.tracking.store import quiet_mlflow, store_lock

    metrics, tags = across_metrics(section), across_tags(section)
    now = int(time.time() * 1000)
    items = [Metric(k, v, now, step) for k, v in metrics.items()]
    lock = store_lock(uri, Path(sweep_dir)) if sweep_dir is not None else \
        contextlib.nullcontext()
    with quiet_mlflow(), lock:
        client = MlflowClient(tracking_uri=uri)
        client.log_batch(parent_run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        for i in range(0, len(items), MAX_METRICS):
            client.log_batch(parent_run_id, metrics=items[i:i + MAX_METRICS])
    return len(items)
