"""Weights & Biases for ccpo-lab runs: who a run is there, and logging it while it trains.

A run's W&B identity (:func:`identity`) is ccpo-lab's: **group** = the sweep, **job
type** = the arm, **name** = ``<arm>-seed<k>`` (``<arm>-seed<k>.<n>`` for a run put
beside another with ``--new-run``), **config** = the run's resolved configuration
(``config.yaml``: run id, identity, launcher, runtime settings), and a **run id derived
from ccpo-lab's run id** (:func:`wandb_id`) with resume allowed: a Slurm requeue, a
relaunch or a later ``sync --wandb`` continues the same W&B run instead of opening a new
one. The id also hashes the sweep, the arm and the run directory's creation time, so the
same configuration in another sweep, or a run directory deleted and run again, gets a run
of its own.

Where it logs from:

* **verl**: verl's own ``wandb`` logger (``trainer.logger=[console,file,wandb]``), which
  calls ``wandb.init(project=trainer.project_name, name=trainer.experiment_name,
  config=<verl's config>)``; everything else reaches ``wandb.init`` through the
  variables it reads (:func:`wandb_env`: ``WANDB_RUN_ID``, ``WANDB_RESUME=allow``,
  ``WANDB_RUN_GROUP``, ``WANDB_JOB_TYPE``, ``WANDB_TAGS``, ``WANDB_MODE``, ``WANDB_ENTITY``,
  ``WANDB_DIR``), set for the trainer and every Ray worker (:func:`verl_logging`), and the
  hooks add ccpo-lab's configuration under ``ccpo_lab``
  (:func:`ccpo_lab.backends.verl.agent.patches.verl_run_config`);
* **CPU backend**: :class:`LiveRun`, from the training loop, one ``log`` per metrics row.

Offline runs are written in the run directory (``<run>/wandb/offline-run-*-<id>/``);
:func:`inspect` reads one back with W&B's own transaction-log reader (``wandb leet
inspect``). ``wandb`` is imported only by a run that logs to W&B, never on a command's
start (``mode: disabled``, the default, costs nothing).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.runs.family import tracking_group
from ccpo_lab.runs.layout import RunDir, SweepDir

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig

OFFLINE_DIR = "wandb"
"""Folder of a run directory holding its W&B files (``WANDB_DIR`` is the run directory)."""
VERL_LOGGERS = ("console", "file")
"""verl's ``trainer.logger`` without W&B (the run's ``metrics.jsonl`` and the console)."""
INSPECT_TIMEOUT_S = 120
"""Longest wait for ``wandb leet inspect`` on one run."""


@dataclass(frozen=True)
class WandbSettings:
    """Where a sweep's runs go in W&B (``tracking.wandb``, resolved)."""

    mode: str
    """``online`` or ``offline``."""
    project: str
    """Project (default: the sweep's name)."""
    entity: str | None
    """Entity (None: the user's default)."""
    tags: tuple[str, ...] = ()
    """Tags of every run."""


def wandb_settings(manifest: Mapping[str, Any], sweep: str, *, mode: str | None = None,
                   project: str | None = None, entity: str | None = None
                   ) -> WandbSettings | None:
    """The resolved ``tracking.wandb`` of a manifest
    (:func:`~ccpo_lab.runs.sweep_runs.read_sweep_config`'s or ``sweep.json``'s ``config``),
    the arguments overriding it; None when the mode is ``disabled``."""
    w = mapping(mapping(manifest.get("tracking")).get("wandb"))
    mode = mode or str(w.get("mode") or "disabled")
    if mode == "disabled":
        return None
    tags = w.get("tags")
    return WandbSettings(mode=mode, project=project or str(w.get("project") or sweep),
                         entity=entity or (str(w["entity"]) if w.get("entity") else None),
                         tags=tuple(str(t) for t in tags) if isinstance(tags, list) else ())


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else {}."""
    return value if isinstance(value, Mapping) else {}


def settings_for_run(rd: RunDir) -> WandbSettings | None:
    """The ``tracking.wandb`` of the sweep a run directory belongs to (``<sweep>/sweep.json``,
    as its latest launch wrote it); None when off or not recorded."""
    sweep = SweepDir(rd.path.parent.parent)
    config = mapping(sweep.read_manifest().get("config"))
    return wandb_settings(config, sweep.sweep_name() or sweep.path.name)


def wandb_id(run_id: str, sweep: str, arm: str, created: str | None) -> str:
    """The W&B run id of a ccpo-lab run: its run id's first 16 hex digits, ``-``, and 8 hex
    digits of a hash of the sweep, the arm and the directory's creation time (``run.json``
    ``created``). Stable across resumes, requeues and syncs of the same directory."""
    salt = hashlib.sha256(f"{sweep}\0{arm}\0{created or ''}".encode()).hexdigest()[:8]
    return f"{run_id[:16]}-{salt}"


@dataclass(frozen=True)
class WandbIdentity:
    """A run as W&B names it."""

    id: str
    """The W&B run id (:func:`wandb_id`)."""
    name: str
    """Display name: ``<arm>-seed<k>``."""
    group: str
    """The sweep (``<sweep>/<environment>`` for one environment of a sweep over several)."""
    job_type: str
    """The arm."""


def identity(rd: RunDir, run: Mapping[str, Any] | None = None) -> WandbIdentity:
    """The W&B identity of the run in ``rd`` (``run``: its ``run.json`` when read)."""
    run = rd.read_run() if run is None else run
    sweep = str(run.get("sweep") or rd.path.parent.parent.name)
    arm = str(run.get("arm") or rd.arm)
    seed = run.get("seed", rd.seed)
    name = f"{arm}-seed{seed}" + ("" if rd.suffix == 1 else f".{rd.suffix}")
    rid = str(run.get("run_id") or hashlib.sha256(str(rd.path).encode()).hexdigest())
    return WandbIdentity(id=wandb_id(rid, sweep, arm, run.get("created")), name=name,
                         group=tracking_group(sweep, rd.path.parent.parent), job_type=arm)


def run_config(rd: RunDir, run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration a run's W&B run carries: ``config.yaml`` (an imported run: its
    import record), plus the run directory."""
    import yaml

    doc: Any = None
    if rd.config_yaml.is_file():
        try:
            doc = yaml.safe_load(rd.config_yaml.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            doc = None
    if not isinstance(doc, dict):
        run = rd.read_run() if run is None else run
        doc = {"run_id": run.get("run_id"), "sweep": run.get("sweep"), "arm": run.get("arm"),
               "seed": run.get("seed"), "imported": run.get("imported")}
    return {**doc, **semantics_of(doc), "run_dir": str(rd.path)}


def semantics_of(doc: Mapping[str, Any]) -> dict[str, str]:
    """``{"semantics": ...}`` of a run record with an ``estimator`` section (a run whose
    parameters do not name it computed the method as described), else ``{}``."""
    est = doc.get("estimator")
    if not isinstance(est, Mapping):
        return {}
    params = est.get("params")
    value = params.get("semantics") if isinstance(params, Mapping) else None
    return {"semantics": str(value or "described")}


def wandb_env(settings: WandbSettings, ident: WandbIdentity, rd: RunDir) -> dict[str, str]:
    """The variables ``wandb.init`` reads for what its caller (verl) does not pass."""
    env = {"WANDB_RUN_ID": ident.id, "WANDB_RESUME": "allow", "WANDB_RUN_GROUP": ident.group,
           "WANDB_JOB_TYPE": ident.job_type, "WANDB_NAME": ident.name,
           "WANDB_MODE": settings.mode, "WANDB_PROJECT": settings.project,
           "WANDB_DIR": str(rd.path)}
    if settings.entity:
        env["WANDB_ENTITY"] = settings.entity
    if settings.tags:
        env["WANDB_TAGS"] = ",".join(settings.tags)
    return env


@dataclass(frozen=True)
class VerlLogging:
    """What a verl run's command needs for W&B (nothing when it is off)."""

    loggers: tuple[str, ...]
    """``trainer.logger``."""
    env: dict[str, str]
    """Variables for the trainer and every Ray worker."""
    project: str | None
    """``trainer.project_name`` (W&B's project; None: the sweep's name, as without W&B)."""


def verl_logging(run: RunConfig, run_dir: Path) -> VerlLogging:
    """verl's loggers, the ``WANDB_*`` variables and the project of ``run`` in ``run_dir``,
    from its sweep's ``tracking.wandb``: ``[console,file]`` and nothing else when off."""
    rd = RunDir(Path(run_dir))
    settings = settings_for_run(rd)
    if settings is None:
        return VerlLogging(VERL_LOGGERS, {}, None)
    info = rd.read_run()
    ident = identity(rd, {"sweep": run.sweep, "arm": run.arm, "seed": run.seed,
                          "run_id": run.run_id, "created": info.get("created")})
    return VerlLogging((*VERL_LOGGERS, "wandb"), wandb_env(settings, ident, rd),
                       settings.project)


def clean(data: Mapping[str, Any]) -> dict[str, float]:
    """The values of a metrics row W&B can chart: finite numbers (booleans as 0/1)."""
    import math

    out = {}
    for k, v in data.items():
        if isinstance(v, int | float) and math.isfinite(v):  # booleans too
            out[str(k)] = float(v)
    return out


class LiveRun:
    """The W&B run of a CPU-backend run while it trains (:func:`open_live_run`).

    W&B failing never fails the training: a run that cannot be opened, or a ``log`` that
    raises, is said once on standard error (the job's log), recorded in
    ``run.json["wandb"]["error"]``, and the run goes on with its ``metrics.jsonl`` (``ccpo-lab
    sync --wandb`` sends it later).
    """

    def __init__(self, rd: RunDir, settings: WandbSettings, ident: WandbIdentity,
                 wb_run: Any) -> None:
        self.rd = rd
        self.settings = settings
        self.ident = ident
        self.run = wb_run
        self.first = int(getattr(wb_run, "starting_step", 0) or 0)
        """Steps below this are already in W&B (an online run resumed)."""
        self.last: int | None = None

    def log(self, step: int, data: Mapping[str, Any]) -> None:
        """Log one metrics row at its step (rows W&B already holds are skipped)."""
        if self.run is None or step < self.first:
            return
        try:
            self.run.log(clean(data), step=int(step))
            self.last = int(step)
        except Exception as e:  # noqa: BLE001 - W&B must not stop the training
            self._fail(f"log at step {step}", e)

    def finish(self, summary: Mapping[str, float] | None = None, exit_code: int = 0) -> None:
        """Set ``summary`` values, close the W&B run (``exit_code`` 1: the training failed)."""
        if self.run is None:
            return
        try:
            if summary:
                self.run.summary.update(dict(summary))
            self.run.finish(exit_code=exit_code)
        except Exception as e:  # noqa: BLE001
            self._fail("finish", e)
        self.run = None
        _record(self.rd, self.settings, self.ident, last_step=self.last)

    def _fail(self, what: str, e: BaseException) -> None:
        line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        print(f"ccpo-lab: W&B {what} failed ({line}); W&B logging stops for this run, "
              "its metrics.jsonl goes on (ccpo-lab sync --wandb sends it later)",
              file=sys.stderr, flush=True)
        _record(self.rd, self.settings, self.ident, error=f"{what}: {line}")
        run, self.run = self.run, None
        if run is not None:
            import contextlib

            with contextlib.suppress(Exception):
                run.finish(exit_code=1)


def init_run(rd: RunDir, settings: WandbSettings, ident: WandbIdentity,
             config: Mapping[str, Any]) -> Any:
    """``wandb.init`` of a ccpo-lab run: resumed if it exists, files in the run directory
    (``quiet``: W&B's closing summary is left out of the job's log)."""
    import wandb

    return wandb.init(id=ident.id, resume="allow", project=settings.project,
                      entity=settings.entity, group=ident.group, job_type=ident.job_type,
                      name=ident.name, tags=list(settings.tags), config=dict(config),
                      dir=str(rd.path), mode=settings.mode,  # type: ignore[arg-type]
                      settings=wandb.Settings(quiet=True))


FINAL_SUMMARY = "ccpo_lab.tracking.summary:final_summary"
"""The function giving a run's W&B summary at the end of its training (``summary/*``,
``cost/*``): the report's analysis of the run, so it is named here and imported when the
run closes (``tracking`` and ``report`` sit above the backends that close a live run)."""


def final_summary(rd: RunDir) -> dict[str, float]:
    """:data:`FINAL_SUMMARY` of ``rd``, imported now."""
    import importlib

    module, _, name = FINAL_SUMMARY.partition(":")
    out: dict[str, float] = getattr(importlib.import_module(module), name)(rd)
    return out


def open_live_run(run: RunConfig, rd: RunDir) -> LiveRun | None:
    """The W&B run of ``run`` when its sweep logs to W&B (None when off, or when it cannot
    be opened: said on standard error and in ``run.json``)."""
    settings = settings_for_run(rd)
    if settings is None:
        return None
    info = rd.read_run()
    ident = identity(rd, info)
    try:
        wb = init_run(rd, settings, ident, run_config(rd, info))
    except Exception as e:  # noqa: BLE001 - W&B must not stop the training
        line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        print(f"ccpo-lab: W&B run {ident.id} could not be opened ({line}); the run trains "
              "without it (ccpo-lab sync --wandb sends its metrics later)", file=sys.stderr,
              flush=True)
        _record(rd, settings, ident, error=f"init: {line}")
        return None
    _record(rd, settings, ident, url=getattr(wb, "url", None))
    return LiveRun(rd, settings, ident, wb)


def _record(rd: RunDir, settings: WandbSettings, ident: WandbIdentity, **fields: Any) -> None:
    """``run.json["wandb"]``: where the run is in W&B, and what happened last."""
    import contextlib

    old = rd.read_run().get("wandb")
    entry = dict(old) if isinstance(old, Mapping) else {}
    entry.update({"id": ident.id, "project": settings.project, "entity": settings.entity,
                  "mode": settings.mode, "group": ident.group, "job_type": ident.job_type,
                  "name": ident.name, "dir": OFFLINE_DIR})
    entry.update({k: v for k, v in fields.items() if v is not None})
    if "error" not in fields and "url" in fields:
        entry.pop("error", None)
    with contextlib.suppress(OSError):
        rd.update_run(wandb=entry)


# ----------------------------------------------------------------- reading runs back
def offline_runs(rd: RunDir, wid: str) -> list[Path]:
    """The offline run directories of W&B run ``wid`` in ``rd``, oldest first."""
    base = rd.path / OFFLINE_DIR
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob(f"offline-run-*-{wid}") if p.is_dir())


def inspect(run_dir: Path, *, summary: bool = False) -> Any:
    """One W&B run directory read with W&B's own reader, ``wandb leet inspect --json``:
    every record of its transaction log (a list), or with ``summary`` its state, config,
    summary and last step (a dict).

    Raises:
        RuntimeError: the reader failed (its message).
    """
    cmd = [sys.executable, "-m", "wandb", "leet", "inspect", "--json",
           *(["--summary"] if summary else []), str(run_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S,
                         check=False, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(f"wandb leet inspect {run_dir} exited with {out.returncode}: "
                           f"{(out.stderr or out.stdout).strip()[-500:]}")
    if summary:
        return json.loads(out.stdout)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
