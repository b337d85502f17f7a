"""Idempotent, incremental sync of a sweep directory into MLflow.

One parent run per sweep (tag ``ccpo_lab.kind = sweep``), one nested child run per run
directory (``ccpo_lab.kind = run``, keyed by the ``ccpo_lab.run_id`` tag) with:

* params: the flattened resolved configuration (``config.yaml``), logged once;
* tags: run id, arm, seed, estimator, git commit, backend, step-1 fingerprint, state
  (updated on every sync);
* metrics: every numeric value of ``metrics.jsonl`` with its step.

Incremental and idempotent: the child's tag ``ccpo_lab.synced_step`` records the last
step whose metrics are in MLflow; a sync sends only the rows after it, and each batch
carries the new tag value with it. Metric timestamps are derived from the run's creation
time and the step, so a batch sent twice (a sync interrupted between a batch and its tag)
is recognised as duplicate by SQL tracking stores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError
from ccpo_lab.report.discover import check_sweep_dir, discover_runs, read_manifest
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import read_metrics

KIND, RUN_ID, SYNCED = "ccpo_lab.kind", "ccpo_lab.run_id", "ccpo_lab.synced_step"
SWEEP_TAG = "ccpo_lab.sweep"
MAX_METRICS = 900
"""Metrics per ``log_batch`` (MLflow allows 1,000 entities, tags included)."""
MAX_PARAMS = 100
PARAM_LEN, KEY_LEN = 6000, 250
_STATUS = {"pending": "SCHEDULED", "running": "RUNNING", "requeued": "RUNNING",
           "completed": "FINISHED", "failed": "FAILED", "cancelled": "KILLED",
           "interrupted": "KILLED"}
_TERMINAL = {"FINISHED", "FAILED", "KILLED"}


@dataclass(frozen=True)
class SyncResult:
    """What a sync did."""

    uri: str
    """Tracking URI."""
    experiment: str
    """Experiment name."""
    parent_run_id: str
    """MLflow id of the sweep's parent run."""
    created: int
    """Child runs created."""
    updated: int
    """Child runs that received new metric values."""
    up_to_date: int
    """Child runs with nothing new."""
    values: int
    """Metric values sent."""
    artifacts: bool
    """Whether report artifacts were logged to the parent."""

    def summary(self) -> str:
        """One line for the terminal."""
        return (f"synced to {self.uri} (experiment {self.experiment!r}, parent run "
                f"{self.parent_run_id}): {self.created} runs created, {self.updated} updated, "
                f"{self.up_to_date} up to date, {self.values} metric values sent"
                + ("; report artifacts logged" if self.artifacts else ""))


def default_uri(sweep_dir: Path) -> str:
    """``sqlite:///<absolute sweep dir>/mlflow.db``."""
    return "sqlite:///" + str(Path(sweep_dir).resolve() / "mlflow.db")


def safe_key(key: str) -> str:
    """A metric/param key MLflow accepts (bad characters and path tricks become '_')."""
    k = re.sub(r"[^/\w.\- ]", "_", str(key))
    k = re.sub(r"/+", "/", k).strip("/").replace("..", "__")
    k = "/".join(p if p not in ("", ".") else "_" for p in k.split("/")) or "_"
    return k[:KEY_LEN]


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> ``{"a.b.c": str(value)}`` (lists as JSON; values cut to 6,000)."""
    out: dict[str, str] = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        else:
            text = json.dumps(v) if isinstance(v, list | dict) else str(v)
            out[safe_key(key)] = text[:PARAM_LEN]
    return out


def _ms(iso: Any) -> int:
    try:
        return int(datetime.fromisoformat(str(iso)).timestamp() * 1000)
    except ValueError:
        return 0


def _params(rd: RunDir, run: Mapping[str, Any]) -> dict[str, str]:
    import yaml

    if rd.config_yaml.is_file():
        doc = yaml.safe_load(rd.config_yaml.read_text(encoding="utf-8")) or {}
        return flatten(doc) if isinstance(doc, dict) else {}
    imported = run.get("imported")
    return flatten({"imported": imported}) if isinstance(imported, dict) else {}


def _tags(rd: RunDir, run: Mapping[str, Any], arm: str, seed: int, root: Path) -> dict[str, str]:
    step1 = run.get("step1") if isinstance(run.get("step1"), dict) else {}
    est = run.get("estimator") if isinstance(run.get("estimator"), dict) else {}
    git = run.get("git") if isinstance(run.get("git"), dict) else {}
    tags = {KIND: "run", RUN_ID: str(run.get("run_id")), "ccpo_lab.arm": arm,
            "ccpo_lab.seed": str(seed), "ccpo_lab.estimator": str(est.get("name", "")),
            "ccpo_lab.git_commit": str(git.get("commit") or ""),
            "ccpo_lab.backend": str(run.get("backend", "")),
            "ccpo_lab.step1_fingerprint": str(step1.get("fingerprint") or ""),
            "ccpo_lab.dir": str(rd.path.relative_to(root)),
            "ccpo_lab.state": str(rd.read_state().get("state", ""))}
    return {k: v for k, v in tags.items() if v}


def _batches(rows: list[dict[str, Any]], after: int, base_ms: int) -> Iterator[tuple[list, int]]:
    """Metric batches of the rows after step ``after``: ``(metrics, last complete step)``."""
    from mlflow.entities import Metric

    batch: list[Any] = []
    last = after
    for row in sorted((r for r in rows if r["step"] > after), key=lambda r: r["step"]):
        step = int(row["step"])
        values = [Metric(safe_key(k), float(v), base_ms + step, step)
                  for k, v in row["data"].items()
                  if isinstance(v, int | float) and not isinstance(v, bool) and v == v
                  and abs(v) != float("inf")]
        if batch and len(batch) + len(values) > MAX_METRICS:
            yield batch, last
            batch = []
        while len(values) > MAX_METRICS:  # a step with more values than a batch holds
            yield values[:MAX_METRICS], after
            values = values[MAX_METRICS:]
        batch.extend(values)
        last = after = step
    if batch:
        yield batch, last


def _find_runs(client: Any, exp_id: str, filt: str) -> list[Any]:
    out, token = [], None
    while True:
        page = client.search_runs([exp_id], filter_string=filt, max_results=1000,
                                  page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def _experiment(client: Any, name: str, uri: str, root: Path) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return str(exp.experiment_id)
    local = uri.startswith(("sqlite:", "file:")) or "://" not in uri
    location = (root.resolve() / "mlartifacts").as_uri() if local else None
    return str(client.create_experiment(name, artifact_location=location))


def _set_status(client: Any, run: Any, status: str) -> None:
    if run.info.status == status:
        return
    if status in _TERMINAL:
        client.set_terminated(run.info.run_id, status)
    else:
        client.update_run(run.info.run_id, status=status)


def sync_sweep(sweep_dir: str | Path, uri: str | None = None, experiment: str | None = None,
               artifacts: str | Path | None = None) -> SyncResult:
    """Bring MLflow up to date with a sweep directory; log ``artifacts`` (a report
    directory) to the parent run.

    Defaults come from the manifest's ``tracking`` section, then
    :func:`default_uri` and the sweep's name. Raises :class:`UserError` when tracking is
    disabled in the manifest and no ``uri`` is given; MLflow errors propagate.
    """
    root = check_sweep_dir(sweep_dir)
    manifest = read_manifest(root)
    tracking = manifest.get("tracking", {})
    if uri is None and tracking.get("enabled") is False:
        raise UserError("tracking is disabled for this sweep (tracking.enabled: false); "
                        "pass --uri to sync anyway", file=root / "sweep.json")
    from mlflow.entities import Param, RunTag
    from mlflow.tracking import MlflowClient

    uri = uri or tracking.get("uri") or default_uri(root)
    name = experiment or tracking.get("experiment") or str(manifest.get("name") or root.name)
    key = str(manifest.get("name") or root.name).replace("'", "")
    client = MlflowClient(tracking_uri=uri)
    exp_id = _experiment(client, name, uri, root)
    parents = _find_runs(client, exp_id, f"tags.`{KIND}` = 'sweep' and "
                         f"tags.`{SWEEP_TAG}` = '{key}'")
    parent = parents[0] if parents else client.create_run(
        exp_id, run_name=key, tags={KIND: "sweep", SWEEP_TAG: key,
                                     "ccpo_lab.sweep_dir": str(root.resolve())})
    pid = parent.info.run_id
    children = {r.data.tags.get(RUN_ID): r for r in _find_runs(
        client, exp_id, f"tags.`{KIND}` = 'run' and tags.`mlflow.parentRunId` = '{pid}'")}
    created = updated = fresh = values = 0
    statuses = []
    for found in discover_runs(root):
        rd = RunDir(found.path)
        info = rd.read_run()
        if not info.get("run_id"):
            continue
        tags = _tags(rd, info, found.arm, found.seed, root)
        child = children.get(info["run_id"])
        is_new = child is None
        if child is None:
            child = client.create_run(exp_id, run_name=f"{found.arm}/{found.path.name}",
                                      tags={**tags, "mlflow.parentRunId": pid})
            params = [Param(k, v) for k, v in _params(rd, info).items()]
            for i in range(0, len(params), MAX_PARAMS):
                client.log_batch(child.info.run_id, params=params[i:i + MAX_PARAMS])
        else:
            changed = [RunTag(k, v) for k, v in tags.items() if child.data.tags.get(k) != v]
            if changed:
                client.log_batch(child.info.run_id, tags=changed)
        after = int(child.data.tags.get(SYNCED, -1))
        sent = 0
        for metrics, last in _batches(read_metrics(rd.metrics), after, _ms(info.get("created"))):
            client.log_batch(child.info.run_id, metrics=metrics, tags=[RunTag(SYNCED, str(last))])
            sent += len(metrics)
        values += sent
        if is_new:
            created += 1
        elif sent:
            updated += 1
        else:
            fresh += 1
        status = "FINISHED" if info.get("imported") else \
            _STATUS.get(str(rd.read_state().get("state")), "RUNNING")
        _set_status(client, client.get_run(child.info.run_id), status)
        statuses.append(status)
    logged = False
    if artifacts is not None and Path(artifacts).is_dir():
        client.log_artifacts(pid, str(artifacts), artifact_path="report")
        logged = True
    done = bool(statuses) and all(s in _TERMINAL for s in statuses)
    _set_status(client, client.get_run(pid), "FINISHED" if done else "RUNNING")
    return SyncResult(uri, name, pid, created, updated, fresh, values, logged)
