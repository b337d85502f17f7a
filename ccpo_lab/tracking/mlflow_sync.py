"""Idempotent, incremental sync of a sweep directory into MLflow, ready to browse.

One parent run per sweep (tag ``ccpo_lab.kind = sweep``) with the sweep's settings as
params, a description, the sweep's cost (``cost/device_hours``, ``cost/<arm>/...``) and
(when a report is given) the report's headline numbers as metrics; one nested child run
per run directory (``ccpo_lab.kind = run``, keyed by the ``ccpo_lab.run_id`` tag) with:

* params: the flattened resolved configuration (``config.yaml``), logged once;
* tags: run id, arm, seed, estimator, git commit, backend, step-1 fingerprint, state
  (updated on every sync);
* metrics: every numeric value of ``metrics.jsonl`` with its step, and the report's
  per-run summary (``summary/window_mean``: the converged-window mean, the number to
  read; ``summary/window_sd``, ``summary/n_evals``, ``summary/first``, ``summary/best``
  with ``summary/best_step`` and ``summary/best_bias``) and the run's cost
  (``cost/device_hours``, ...: :mod:`ccpo_lab.tracking.summary`), logged again when they
  change;
* start and end time: when training started and ended (``state.json``), so MLflow shows
  the training's duration. A run that has not started yet is created at its first sync
  after it starts (MLflow cannot move a run's start later).

The experiment opens in MLflow's model-training view (tag ``mlflow.experimentKind``) and
carries a shared view that groups the runs by arm: :attr:`SyncResult.ui_url`. In the
default store (``<sweep>/mlflow.db``) artifact locations are relative to the sweep
directory (``mlartifacts/...``), so moving ``results/`` keeps them: open the store from
the sweep directory (:func:`ui_command`).

Incremental and idempotent: the child's tag ``ccpo_lab.synced_step`` records the last
step whose metrics are in MLflow; a sync sends only the rows after it, streamed
(:mod:`ccpo_lab.tracking.rows`), and each batch carries the new tag value with it. Metric
timestamps are derived from the run's creation time and the step, so a batch sent twice
(a sync interrupted between a batch and its tag) is recognised as duplicate by SQL
tracking stores. One sync per store at a time, a store created whole, a server that does
not answer refused at once: :mod:`ccpo_lab.tracking.store`. What is not sent (a
directory that is not a run of its place, a line that is not a row, a value that is not a
finite number) is in :attr:`SyncResult.warnings`, with file and line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.environments import DEFAULT_ENVIRONMENT
from ccpo_lab.errors import UserError
from ccpo_lab.report.cost import sweep_cost_values
from ccpo_lab.report.directory import check_report_dir
from ccpo_lab.runs.cost import read_cost
from ccpo_lab.runs.family import tracking_group
from ccpo_lab.runs.files import RunFileError, open_file
from ccpo_lab.runs.layout import FoundRun, RunDir, SweepDir
from ccpo_lab.runs.sweep_runs import check_is_sweep, read_sweep_config
from ccpo_lab.runs.wandb_run import semantics_of
from ccpo_lab.textout import fmt_hours
from ccpo_lab.tracking.evaluation import log_children, parent_metrics
from ccpo_lab.tracking.rows import MAX_METRICS, Sent, safe_key, send_metrics
from ccpo_lab.tracking.store import (
    check_reachable,
    prepare_store,
    quiet_mlflow,
    store_failure,
    store_lock,
)
from ccpo_lab.tracking.summary import WINDOW_MEAN, cost_values, summary_settings, summary_values
from ccpo_lab.tracking.target import STORE, default_uri, mlflow_target

if TYPE_CHECKING:
    from ccpo_lab.report.model import ReportModel

KIND, RUN_ID, SYNCED = "ccpo_lab.kind", "ccpo_lab.run_id", "ccpo_lab.synced_step"
PARAMS_TAG = "ccpo_lab.params_logged"
"""Set once a child's params are all logged (a sync cut off before logs them next time)."""
SWEEP_TAG, ARM_TAG = "ccpo_lab.sweep", "ccpo_lab.arm"
ENV_TAG = "ccpo_lab.environment"
"""Every run's environment (``alfworld`` for runs written before environments); group the
MLflow UI by it to see a sweep over several environments side by side."""
NOTE = "mlflow.note.content"
"""The run description MLflow's UI shows."""
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
"""Opens the experiment in MLflow's model-training view (not its GenAI view)."""
VIEW_KEY = "ccpo-lab-by-arm"
"""Shared view of the runs page, grouped by arm (``?viewStateShareKey=<key>``)."""
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY
ARTIFACTS_DIR = "mlartifacts"
"""Artifact root of the default store, relative to the sweep directory."""
MAX_PARAMS = 100
PARAM_LEN = 6000
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
    experiment_id: str
    """Its id."""
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
    pending: int = 0
    """Runs not started yet (not in MLflow until they start)."""
    headline: int = 0
    """Report numbers logged as metrics of the parent."""
    local_store: bool = False
    """The store is the sweep's own ``mlflow.db`` (artifact paths relative to the sweep)."""
    adaptive_looks: int = 0
    """Looks of the sweep's adaptive design logged to the parent (0: fixed seeds)."""
    warnings: tuple[str, ...] = ()
    """What was not sent, and why: directories left out, runs whose files cannot be used,
    lines a run's sync stopped at, values that are not usable (file and line each)."""
    incomplete: int = 0
    """Directories not synced, or not synced whole (left out, a run file that cannot be
    used, a line a run's sync stopped at): the CLI's exit code is 1 when there are any."""

    @property
    def ui_url(self) -> str:
        """The runs page grouped by arm, in the model-training view (default port)."""
        return ui_url(self.experiment_id)

    def summary(self) -> str:
        """Lines for the terminal: what was sent, and how to open the UI."""
        lines = [f"synced to {self.uri} (experiment {self.experiment!r}, parent run "
                 f"{self.parent_run_id}): {self.created} runs created, {self.updated} updated, "
                 f"{self.up_to_date} up to date, {self.values} metric values sent"
                 + (f", {self.pending} not started yet" if self.pending else "")
                 + (f"; {self.headline} report numbers and the report files logged to the "
                    "parent" if self.artifacts else "")
                 + (f"; the adaptive design's {self.adaptive_looks} looks logged to the parent"
                    if self.adaptive_looks else "")]
        if self.local_store:
            lines.append(f"MLflow UI: {ui_command()}  (in the sweep directory), then open "
                         f"{self.ui_url}")
        return "\n".join(lines)


def ui_command(port: int = 5000) -> str:
    """The command that serves the sweep's store; run it in the sweep directory."""
    return f"mlflow ui --backend-store-uri sqlite:///{STORE} --host 127.0.0.1 --port {port}"


def ui_url(experiment_id: str, port: int = 5000) -> str:
    """The experiment's runs grouped by arm (the shared view), in the model-training view."""
    return (f"http://127.0.0.1:{port}/#/experiments/{experiment_id}/runs?viewStateShareKey="
            f"{VIEW_KEY}&workflowType=machine_learning")


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


def _ms(iso: Any) -> int | None:
    """Milliseconds since the epoch of an ISO time, None when absent or malformed."""
    if not iso:
        return None
    try:
        return int(datetime.fromisoformat(str(iso)).timestamp() * 1000)
    except ValueError:
        return None


@dataclass(frozen=True)
class Times:
    """When a run's training started and ended (ms since the epoch; None: unknown)."""

    start: int | None
    end: int | None


def run_times(run: Mapping[str, Any], state: Mapping[str, Any]) -> Times:
    """Training start (``state.json`` ``started``) and end (its last update once terminal).

    An imported run has no training times: both are its import time (duration 0).
    """
    if run.get("imported"):
        t = _ms(run.get("created"))
        return Times(t, t)
    start = _ms(state.get("started"))
    status = _STATUS.get(str(state.get("state")), "RUNNING")
    end = _ms(state.get("updated")) if status in _TERMINAL else None
    if start is not None and end is not None and end < start:
        end = start
    return Times(start, end)


class NotSynced(Exception):
    """A run whose files cannot be used as they stand (``str()``: which file, why); the
    run is left out of this sync and named, the others are synced."""


def _params(rd: RunDir, run: Mapping[str, Any]) -> dict[str, str]:
    """The flattened ``config.yaml`` (an imported run's import record when it has none);
    :class:`NotSynced` when it cannot be read."""
    try:
        doc = rd.read_config()
    except RunFileError as e:
        raise NotSynced(f"config.yaml {e.why}") from None
    except (OSError, ValueError) as e:
        raise NotSynced(f"config.yaml unreadable ({e})") from None
    if doc:
        return flatten(doc)
    imported = run.get("imported")
    return flatten({"imported": imported}) if isinstance(imported, dict) else {}


def _run_files(rd: RunDir) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run.json`` and ``state.json`` of a run, checking that its metrics file can be
    read; :class:`NotSynced` naming the file and why otherwise."""
    out = []
    for path in (rd.run_json, rd.state_json):
        try:
            out.append(rd.read_json(path))
        except RunFileError as e:
            raise NotSynced(f"{path.name} {e.why}") from None
        except (OSError, ValueError) as e:
            raise NotSynced(f"{path.name} unreadable ({type(e).__name__}: {e})") from None
    try:
        open_file(rd.metrics, rd.sweep_root).close()
    except FileNotFoundError:
        pass
    except RunFileError as e:
        raise NotSynced(f"metrics.jsonl {e.why}") from None
    except OSError as e:
        raise NotSynced(f"metrics.jsonl unreadable ({e})") from None
    return out[0], out[1]


def _tags(rd: RunDir, run: Mapping[str, Any], state: Mapping[str, Any], arm: str, seed: int,
          root: Path) -> dict[str, str]:
    step1, est, git = (_section(run, k) for k in ("step1", "estimator", "git"))
    tags = {KIND: "run", RUN_ID: str(run.get("run_id")), ARM_TAG: arm,
            "ccpo_lab.seed": str(seed), "ccpo_lab.estimator": str(est.get("name", "")),
            "ccpo_lab.semantics": semantics_of(run).get("semantics", ""),
            "ccpo_lab.git_commit": str(git.get("commit") or ""),
            "ccpo_lab.backend": str(run.get("backend", "")),
            ENV_TAG: str(run.get("environment") or DEFAULT_ENVIRONMENT),
            "ccpo_lab.step1_fingerprint": str(step1.get("fingerprint") or ""),
            "ccpo_lab.dir": str(rd.path.relative_to(root)),
            "ccpo_lab.state": str(state.get("state", "")),
            "ccpo_lab.times": "import time (no training times recorded)"
            if run.get("imported") else ""}
    return {k: v for k, v in tags.items() if v}


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``doc[key]`` when it is a mapping, else {}."""
    v = doc.get(key)
    return v if isinstance(v, Mapping) else {}


def _find_runs(client: Any, exp_id: str, filt: str) -> list[Any]:
    out, token = [], None
    while True:
        page = client.search_runs([exp_id], filter_string=filt, max_results=1000,
                                  page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def shared_view(metric: str) -> str:
    """The runs page's view state (JSON, as the UI's Share writes it): grouped by the arm
    tag, with the converged-window mean (``summary/window_mean``: the number to read; the
    group's row averages it over the arm's seeds), the last held-out ``metric``, the seed
    and the estimator as columns. (MLflow 3.17 sorts the metric columns by name, so the
    window mean comes first only while no other metric column sorts before it: the
    device-hours, ``cost/device_hours``, are one click away.)"""
    columns = [f"metrics.`{WINDOW_MEAN}`", f"metrics.`{metric}`", "tags.`ccpo_lab.seed`",
               "tags.`ccpo_lab.estimator`", "attributes.`Duration`"]
    return json.dumps({"groupBy": {"aggregateFunction": "average",
                                   "groupByKeys": [{"mode": "tag", "groupByData": ARM_TAG}]},
                       "selectedColumns": columns, "runsExpanded": {}})


def _experiment(client: Any, name: str, metric: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        exp_id = str(exp.experiment_id)
    else:
        exp_id = str(client.create_experiment(name))
    tags = client.get_experiment(exp_id).tags
    for key, value in (EXPERIMENT_KIND, (VIEW_TAG, shared_view(metric))):
        if tags.get(key) != value:
            client.set_experiment_tag(exp_id, key, value)
    return exp_id


_RUN_ARTIFACTS = re.compile(r"^(?:file://)?/.*/" + ARTIFACTS_DIR + r"/([0-9a-f]+/artifacts)$")


def relative_artifacts(db: Path, exp_id: str) -> None:
    """Make the experiment's artifact locations relative to the sweep directory.

    MLflow stores absolute paths (it resolves a relative location when the experiment is
    created); the experiment's location becomes ``mlartifacts`` and each run's
    ``mlartifacts/<run id>/artifacts`` (also for a store whose sweep was moved), so the
    store works wherever the sweep directory goes when it is opened from there.
    """
    with contextlib.closing(sqlite3.connect(db, timeout=30.0)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                    (ARTIFACTS_DIR, int(exp_id)))
        rows = con.execute("SELECT run_uuid, artifact_uri FROM runs WHERE experiment_id = ?",
                           (int(exp_id),)).fetchall()
        for run_uuid, uri in rows:
            m = _RUN_ARTIFACTS.match(uri or "")
            if m:
                con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?",
                            (f"{ARTIFACTS_DIR}/{m.group(1)}", run_uuid))


def headline_metrics(report: ReportModel) -> dict[str, float]:
    """The report's headline numbers as metric keys: per arm its mean, t interval, sd,
    seeds and IQM; per comparison its difference, interval, p, Holm p, P(X > Y) and the
    seeds needed."""
    out: dict[str, float] = {}

    def put(key: str, value: float | int | None) -> None:
        if value is not None:
            out[safe_key(key)] = float(value)

    for a in report.arms:
        put(f"report/{a.arm}/mean", a.mean)
        put(f"report/{a.arm}/ci_low", a.ci_t[0])
        put(f"report/{a.arm}/ci_high", a.ci_t[1])
        put(f"report/{a.arm}/sd", a.sd)
        put(f"report/{a.arm}/n_seeds", a.n_seeds)
        put(f"report/{a.arm}/iqm", a.iqm)
    for c in report.comparisons:
        base = f"report/{c.arm}_vs_{c.reference}"
        put(f"{base}/diff", c.diff)
        put(f"{base}/ci_low", c.ci[0])
        put(f"{base}/ci_high", c.ci[1])
        put(f"{base}/p", c.p)
        put(f"{base}/p_holm", c.p_holm)
        put(f"{base}/prob_improvement", c.prob_improvement)
        put(f"{base}/seeds_needed", c.seeds_needed)

    out.update(parent_metrics(report))  # the checkpoint evaluations' tables, if any
    return out


def description(manifest: Mapping[str, Any], name: str, report: ReportModel | None) -> str:
    """The parent run's description (Markdown): the sweep, and the report's headline."""
    arms = manifest.get("arms") or []
    seeds = manifest.get("seeds") or []
    backend = (manifest.get("backend") or {}).get("kind", "?")
    lines = [f"**{name}**: {manifest.get('description') or 'a ccpo-lab sweep'} "
             f"({len(arms)} arms x {len(seeds)} seeds, `{backend}` backend; one child run per "
             f"(arm, seed), grouped by `{ARM_TAG}` in the shared view `{VIEW_KEY}`)", ""]
    if report is not None:
        from ccpo_lab.stats import p_text

        pct = report.metric.endswith("success_rate")
        k = 100.0 if pct else 1.0
        lines += [f"Report ({report.metric}, converged window step >= {report.window_start}, "
                  f"{100 * report.confidence:g}% intervals):", "",
                  "| arm | mean | t interval | vs " + report.reference + " | p (Holm) | verdict |",
                  "|---|---|---|---|---|---|"]
        for a in report.arms:
            c = report.comparison(a.arm)

            def f(v: float | None, signed: bool = False) -> str:
                return "-" if v is None else f"{k * v:{'+' if signed else ''}.1f}"

            ci = "-" if a.ci_t[0] is None else f"[{f(a.ci_t[0])}, {f(a.ci_t[1])}]"
            diff = "-" if c is None or c.diff is None else \
                f"{f(c.diff, True)} [{f(c.ci[0])}, {f(c.ci[1])}]"
            p = "-" if c is None or c.p_holm is None else p_text(c.p_holm, report.alpha)
            lines.append(f"| {a.arm} | {f(a.mean)} | {ci} | {diff} | {p} | "
                         f"{'reference' if c is None else c.verdict} |")
        if report.adaptive is not None:
            lines += ["", f"Seeds were added in looks by an adaptive design "
                      f"({max((r.look for r in report.adaptive.looks), default=0)} looks, at most "
                      f"{report.adaptive.max_seeds} seeds per arm): the verdicts of its "
                      "comparisons are its own (tags `ccpo_lab.adaptive.*`, metrics "
                      "`adaptive/*` by look, artifact `adaptive/adaptive.json`)."]
        if report.cost is not None:

            lines += ["", f"Cost: {fmt_hours(report.cost.total)} {report.cost.unit} over "
                      f"{report.cost.runs} runs (metrics `cost/*`)."]
        lines += ["", "The full report (tables, figures) is in this run's artifacts, "
                  "`report/`."]
    return "\n".join(lines)


def _parent(client: Any, exp_id: str, key: str, start: int | None) -> Any:
    parents = _find_runs(client, exp_id, f"tags.`{KIND}` = 'sweep' and "
                         f"tags.`{SWEEP_TAG}` = '{key}'")
    if parents:
        return parents[0]
    return client.create_run(exp_id, run_name=key, start_time=start,
                             tags={KIND: "sweep", SWEEP_TAG: key})


def _set_status(client: Any, run: Any, status: str, end: int | None) -> None:
    if run.info.status == status:
        return
    if status in _TERMINAL:
        client.set_terminated(run.info.run_id, status, end_time=end)
    else:
        client.update_run(run.info.run_id, status=status)


def _log_new_params(client: Any, run: Any, params: Mapping[str, str]) -> None:
    from mlflow.entities import Param

    new = [Param(k, v) for k, v in params.items() if k not in run.data.params]
    for i in range(0, len(new), MAX_PARAMS):
        client.log_batch(run.info.run_id, params=new[i:i + MAX_PARAMS])


def sync_sweep(sweep_dir: str | Path, uri: str | None = None, experiment: str | None = None,
               artifacts: str | Path | None = None, report: ReportModel | None = None,
               say: Callable[[str], None] | None = None, say_target: bool = True
               ) -> SyncResult:
    """Bring MLflow up to date with a sweep directory; log ``artifacts`` (a report
    directory: the files its manifest lists, :func:`~ccpo_lab.report.directory.
    check_report_dir`) and ``report``'s headline numbers to the parent run.

    Store and experiment: ``uri``/``experiment`` > ``MLFLOW_TRACKING_URI``/
    ``MLFLOW_EXPERIMENT_NAME`` > the manifest's ``tracking`` section > :func:`default_uri`
    and the sweep's name (:func:`~ccpo_lab.tracking.target.mlflow_target`). One sync per
    store at a time (:mod:`ccpo_lab.tracking.store`): a second one waits. ``say`` receives
    progress lines (waiting for the lock, a store rebuilt, values sent so far in a long
    run) and, with ``say_target``, a line when an environment variable chose the store or
    the experiment.

    Raises:
        UserError: tracking is disabled in the manifest and no ``uri`` is given, the
            store cannot be opened and holds runs, its location cannot be written (a
            read-only disk), or ``artifacts`` is not a complete report directory.
        StoreUnreachable: a tracking server that does not accept connections.
        EnvironmentFailure: the store's disk is full or failing (one line, what to do).
    MLflow's own errors propagate.
    """
    root = check_is_sweep(sweep_dir).resolve()
    manifest = read_sweep_config(root)
    tracking = manifest.get("tracking", {})
    if uri is None and tracking.get("enabled") is False:
        raise UserError("tracking is disabled for this sweep (tracking.enabled: false); "
                        "pass --uri to sync anyway", file=root / "sweep.json")
    target = mlflow_target(root, manifest, uri, experiment)
    uri, local = target.uri, target.uri == default_uri(root)
    if say is not None and say_target:
        for note in target.notes:
            say(note)
    art = None
    if artifacts is not None:  # a report directory written whole, or refused at once

        art = [p.resolve() for p in check_report_dir(artifacts)]
    check_reachable(uri)
    try:  # the default store keeps artifact paths relative to the sweep directory: work there
        with quiet_mlflow(), store_lock(uri, root, say), \
                _working_dir(root) if local else contextlib.nullcontext():
            prepare_store(uri, say)
            return _sync(root, manifest, uri, local, target.experiment, art, report, say)
    except UserError:
        raise
    except Exception as e:  # a full or read-only disk: one line ("again later" cannot help)
        failure = store_failure(e, uri, root)
        if failure is not None:
            raise failure from None
        raise


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    """Run inside ``path`` (relative artifact paths resolve there); restore the cwd after."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


@dataclass(frozen=True)
class _Child:
    """What syncing one run did."""

    outcome: str
    """``created``, ``updated``, ``fresh`` or ``pending`` (not started: not created)."""
    status: str
    end: int | None
    sent: Sent


def _sync_child(client: Any, exp_id: str, pid: str, root: Path, run: tuple[Any, ...],
                child: Any | None, say: Callable[[str], None] | None = None,
                summary: Callable[[FoundRun, RunDir], dict[str, float]] | None = None
                ) -> _Child:
    """Create or update the child run of one run directory; send its new metric rows and
    (``summary``) its ``summary/*`` and ``cost/*`` when they may have changed."""
    from mlflow.entities import RunTag

    f, rd, info, state = run
    t = run_times(info, state)
    if child is None and t.start is None and not _has_rows(rd):
        return _Child("pending", "SCHEDULED", None, Sent(0, None))  # created once it starts
    tags = _tags(rd, info, state, f.arm, f.seed, root)
    outcome = "fresh"
    changed: list[Any] = []
    if child is None:
        outcome = "created"
        params = _params(rd, info)  # NotSynced before anything is created
        child = client.create_run(exp_id, run_name=f"{f.arm} seed {f.seed}"
                                  + ("" if f.suffix == 1 else f" ({f.path.name})"),
                                  start_time=t.start, tags={**tags, "mlflow.parentRunId": pid})
    else:
        changed = [RunTag(k, v) for k, v in tags.items() if child.data.tags.get(k) != v]
        if changed:
            client.log_batch(child.info.run_id, tags=changed)
    if child.data.tags.get(PARAMS_TAG) != "1":
        _log_new_params(client, child, params if outcome == "created" else _params(rd, info))
        client.set_tag(child.info.run_id, PARAMS_TAG, "1")

    began = time.monotonic()

    def progress(values: int, done: float) -> None:
        if say is None:
            return
        spent = time.monotonic() - began
        eta = f", about {spent * (1 - done) / done / 60:.0f} min left" if done > 0.01 else ""
        say(f"{f.arm} seed {f.seed}: {values:,} metric values sent in {spent:.0f} s "
            f"({100 * done:.0f}% of {rd.metrics.name}{eta})")

    sent = send_metrics(client, child.info.run_id, rd.metrics,
                        int(child.data.tags.get(SYNCED, -1)), _ms(info.get("created")) or 0,
                        SYNCED, progress, root=rd.sweep_root)
    if sent.values and outcome == "fresh":
        outcome = "updated"
    if summary is not None and (sent.values or changed or "summary/n_evals"
                                not in child.data.metrics):
        _log_summary(client, child, summary(f, rd), sent.last_step or 0)
    status = "FINISHED" if info.get("imported") else \
        _STATUS.get(str(state.get("state")), "RUNNING")
    _set_status(client, client.get_run(child.info.run_id), status, t.end)
    return _Child(outcome, status, t.end, sent)


def _log_summary(client: Any, run: Any, values: Mapping[str, float], step: int) -> int:
    """Log the values of ``values`` that differ from ``run``'s latest ones (at ``step``,
    timestamped now); returns how many."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    new = [Metric(safe_key(k), v, now, step) for k, v in values.items()
           if run.data.metrics.get(safe_key(k)) != v]
    for i in range(0, len(new), MAX_METRICS):
        client.log_batch(run.info.run_id, metrics=new[i:i + MAX_METRICS])
    return len(new)


def run_summary_values(settings: Any) -> Callable[[FoundRun, RunDir], dict[str, float]]:
    """``(run, its directory) -> summary/* and cost/*`` of a child (:mod:`.summary`);
    ``settings``: the report's (None: ``cost/*`` only)."""
    def values(f: FoundRun, rd: RunDir) -> dict[str, float]:
        out = cost_values(read_cost(rd))
        if settings is not None:
            out.update(summary_values(f, settings))
        return out

    return values


def _has_rows(rd: RunDir) -> bool:
    """Whether the run has written anything to its metrics file."""
    try:
        return rd.metrics.stat().st_size > 0
    except OSError:
        return False


def _child_warnings(f: FoundRun, sent: Sent) -> list[str]:
    """What of one run was not sent, for the person syncing."""
    out = []
    if sent.stopped is not None:
        out.append(f"{f.arm} seed {f.seed}: stopped at {sent.stopped}; the rows after it are "
                   "not sent (mend or remove that line, then sync again)")
    if sent.skipped:
        out.append(f"{f.arm} seed {f.seed}: {sent.skipped} value(s) not sent (not finite "
                   f"numbers, or proportions outside [0, 1]), the first at "
                   f"{sent.first_skipped}")
    return out


def _sweep_cost(root: Path, report: ReportModel | None) -> dict[str, float]:
    """``cost/*`` of the parent: device-hours per arm and in total (every sync); with a
    report, also what each comparison's seeds needed would cost
    (``cost/<arm>_vs_<reference>/more_device_hours``) and an adaptive design's saving."""
    out = {safe_key(k): v for k, v in sweep_cost_values(root).items()}
    c = report.cost if report is not None else None
    if c is not None:
        for m in c.more:
            if m.device_hours is not None:
                out[safe_key(f"cost/{m.arm}_vs_{m.reference}/more_device_hours")] = \
                    m.device_hours
        a = c.adaptive
        if a is not None:
            for k, v in (("used", a.device_hours), ("fixed_design", a.fixed_device_hours),
                         ("saved", a.saved)):
                if v is not None:
                    out[f"cost/adaptive/{k}_device_hours"] = v
    return out


def _update_parent(client: Any, pid: str, manifest: Mapping[str, Any], key: str,
                   report: ReportModel | None, step: int, artifacts: list[Path] | None,
                   root: Path) -> tuple[int, bool]:
    """The parent's params, description, headline metrics, ``cost/*`` and report files.

    Returns:
        ``(headline numbers logged, whether the report files were logged)``.
    """
    from mlflow.entities import Metric

    parent = client.get_run(pid)
    sweep_doc = _section(manifest, "config") or manifest
    _log_new_params(client, parent, flatten({k: v for k, v in sweep_doc.items()
                                             if k not in ("arms_dir",)}))
    desc = description(manifest, key, report)
    if parent.data.tags.get(NOTE) != desc and (report is not None or NOTE not in parent.data.tags):
        client.set_tag(pid, NOTE, desc)  # a description with a report is kept until the next
    headline = headline_metrics(report) if report is not None else {}
    now = int(time.time() * 1000)
    items = [Metric(k, v, now, step) for k, v in headline.items()]
    for i in range(0, len(items), MAX_METRICS):
        client.log_batch(pid, metrics=items[i:i + MAX_METRICS])
    _log_summary(client, parent, _sweep_cost(root, report), step)
    if artifacts is not None:  # the report's own files, nothing else of its directory
        for path in artifacts:
            client.log_artifact(pid, str(path), artifact_path="report")
        return len(headline), True
    return len(headline), False


def _log_adaptive(client: Any, pid: str, root: Path) -> int:
    """The sweep's adaptive design (:mod:`ccpo_lab.tracking.adaptive`) on the parent run;
    returns the looks logged (0 for fixed seeds)."""
    from mlflow.entities import Metric, RunTag

    from ccpo_lab.adaptive.store import read_record
    from ccpo_lab.tracking.adaptive import adaptive_tags, adaptive_values

    sweep = SweepDir(root)
    record = read_record(sweep)
    if record is None:
        return 0
    metrics = [Metric(safe_key(k), v, step, step) for k, v, step in adaptive_values(record)]
    client.log_batch(pid, tags=[RunTag(safe_key(k), v)
                                for k, v in adaptive_tags(record).items()])
    for i in range(0, len(metrics), MAX_METRICS):
        client.log_batch(pid, metrics=metrics[i:i + MAX_METRICS])
    client.log_artifact(pid, str(sweep.adaptive_state), artifact_path="adaptive")
    return len(record.state.looks)


def _sync_children(client: Any, exp_id: str, pid: str, root: Path,
                   manifest: Mapping[str, Any], found: list[tuple[Any, ...]],
                   children: Mapping[Any, Any], warnings: list[str],
                   say: Callable[[str], None] | None) -> tuple[list[_Child], list[Any]]:
    """Sync every found run's child; (what each did, the runs synced). A run whose files
    cannot be used is named in ``warnings`` and left out."""
    arms = sorted({f.arm for f, *_ in found})
    listed = [a for a in manifest.get("arms") or [] if a in arms]
    summary = run_summary_values(summary_settings(manifest, listed or arms))
    done, synced = [], []
    for run in found:
        try:
            done.append(_sync_child(client, exp_id, pid, root, run,
                                    children.get(run[2]["run_id"]), say, summary))
            synced.append(run)
        except NotSynced as e:
            warnings.append(f"{run[0].arm} seed {run[0].seed}: {e}; not synced (mend it, then "
                            "sync again)")
    return done, synced


def _sync(root: Path, manifest: Mapping[str, Any], uri: str, local: bool,
          experiment: str, artifacts: list[Path] | None, report: ReportModel | None,
          say: Callable[[str], None] | None = None) -> SyncResult:
    from mlflow.tracking import MlflowClient

    key = tracking_group(str(manifest.get("name") or root.name), root).replace("'", "")
    client = MlflowClient(tracking_uri=uri)
    analysis = manifest.get("analysis") or {}
    exp_id = _experiment(client, experiment,
                         str(analysis.get("metric") or "val/success_rate"))
    if local:
        relative_artifacts(root / STORE, exp_id)
    runs, left_out = SweepDir(root).discover()
    found = []
    warnings = [f"{x.text}; not synced" for x in left_out]
    for f in runs:
        rd = RunDir(f.path)
        try:
            found.append((f, rd, *_run_files(rd)))
        except NotSynced as e:
            warnings.append(f"{f.arm} seed {f.seed}: {e}; not synced (mend it, then sync "
                            "again)")
    starts = [t.start for t in (run_times(i, s) for _, _, i, s in found) if t.start is not None]
    pid = _parent(client, exp_id, key, min(starts) if starts else None).info.run_id
    children = {r.data.tags.get(RUN_ID): r for r in _find_runs(
        client, exp_id, f"tags.`{KIND}` = 'run' and tags.`mlflow.parentRunId` = '{pid}'")}
    done, synced = _sync_children(client, exp_id, pid, root, manifest, found, children,
                                  warnings, say)
    left = len(warnings)
    count = {k: sum(c.outcome == k for c in done)
             for k in ("created", "updated", "fresh", "pending")}
    step = max((c.sent.last_step for c in done if c.sent.last_step is not None), default=0)
    headline, logged = _update_parent(client, pid, manifest, key, report, step, artifacts,
                                      root)
    if report is not None and report.evaluation is not None:

        log_children(client, _find_runs(client, exp_id, f"tags.`{KIND}` = 'run' and "
                                        f"tags.`mlflow.parentRunId` = '{pid}'"), report)
    looks = _log_adaptive(client, pid, root)
    finished = bool(done) and all(c.status in _TERMINAL for c in done)
    ends = [c.end for c in done if c.end is not None]
    _set_status(client, client.get_run(pid), "FINISHED" if finished else "RUNNING",
                max(ends) if finished and ends else None)
    for run, c in zip(synced, done, strict=True):
        warnings += _child_warnings(run[0], c.sent)
        left += c.sent.stopped is not None
    return SyncResult(uri, experiment, exp_id, pid, count["created"], count["updated"],
                      count["fresh"], sum(c.sent.values for c in done), logged,
                      count["pending"], headline, local, looks, tuple(warnings), left)
