"""The ``skypilot`` launcher: each run one SkyPilot managed job (spot, recovered on
preemption), its task generated from the run (:mod:`ccpo_lab.launch.skytask`).

Before anything is written, every run's task goes through SkyPilot's own parser
(``sky.Task.from_yaml_config``): an accelerator name SkyPilot rejects is one line naming
``launcher.accelerator``; without the ``skypilot`` extra, one line saying what to install.
Submitting (``sky.jobs.launch``), status (``sky.jobs.queue``) and cancel
(``sky.jobs.cancel``) go through SkyPilot's SDK; no cloud can be reached where ccpo-lab is
tested, so those three calls are the untested part (docs/launcher-skypilot.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.launchers.skypilot import SkyPilotSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled, Submission
from ccpo_lab.launch.environment import JobEnvironment
from ccpo_lab.launch.skytask import task_config
from ccpo_lab.placement import Placement
from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus

SKYPILOT = JobEnvironment("skypilot", marker=("SKYPILOT_TASK_ID", None))
"""A SkyPilot job: this node (node 0 executes the run)."""
ACTIVE = {"PENDING", "SUBMITTED", "STARTING", "RUNNING", "RECOVERING", "CANCELLING"}
"""Managed-job states in which a job holds (or waits for) machines."""
FAILED = {"FAILED", "FAILED_SETUP", "FAILED_PRECHECKS", "FAILED_NO_RESOURCE",
          "FAILED_CONTROLLER"}
"""Managed-job states of a job that failed."""
EXTRA = "pip install 'ccpo-lab[skypilot]' (docs/launcher-skypilot.md)"


def import_sky() -> Any:
    """SkyPilot's SDK; :class:`UserError` naming the extra when it is not installed."""
    try:
        import sky  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise UserError(f"the skypilot launcher needs SkyPilot: {EXTRA}; nothing was "
                        "launched", key="launcher.kind", value="skypilot") from None
    return sky


def parse_task(config: Mapping[str, Any], accelerator: str) -> Any:
    """``sky.Task.from_yaml_config(config)``; what SkyPilot rejects is one line (an
    accelerator it does not know names ``launcher.accelerator``)."""
    sky = import_sky()
    try:
        return sky.Task.from_yaml_config(dict(config))
    except Exception as e:  # noqa: BLE001 - SkyPilot raises ValueError and its own errors
        text = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        key = "launcher.accelerator" if accelerator.lower() in text.lower() or \
            "accelerator" in text.lower() else "launcher"
        raise UserError(f"SkyPilot rejects the run's task: {text}", key=key,
                        value=accelerator if key == "launcher.accelerator" else None) from None


class SkyPilotLauncher(Launcher):
    """One managed job per run (see the module docstring)."""

    kind = "skypilot"
    settings_class = SkyPilotSettings
    environment = SKYPILOT
    max_nodes = None
    scheduled = True

    @property
    def sky(self) -> SkyPilotSettings:
        """The settings, typed."""
        assert isinstance(self.settings, SkyPilotSettings)
        return self.settings

    def python(self) -> str:
        """The interpreter a node runs (the run's: ``backend.verl.python``; else
        ``python``)."""
        return self.needs.python or "python"

    def task(self, rd: RunDir) -> dict[str, Any]:
        """The run's task as a YAML mapping."""
        doc = rd.read_config()
        backend = (doc.get("backend") or {}).get("kind")
        return task_config(self.sky, self.needs, run_dir=rd.path, sweep_dir=self.sweep.path,
                           run_id=str(rd.read_run().get("run_id") or doc.get("run_id")),
                           backend=backend, python=self.python())

    def prepare(self) -> None:
        """SkyPilot is installed and a bucket is set (each task is parsed at submit,
        before anything is launched)."""
        import_sky()
        if not self.sky.bucket:
            raise UserError("the skypilot launcher needs a bucket for the results",
                            key="launcher.bucket", value=None,
                            valid="s3://NAME[/PREFIX], gs://..., r2://...")

    def placement(self) -> Placement:
        """Node 0 executes the run; its placement is read on the node."""
        return Placement(ntasks=self.needs.nodes)

    def resources(self) -> str:
        """``aws: 2 nodes x H200:8, spot, bucket s3://b``."""
        n = self.needs
        what = f"{self.sky.accelerator}:{n.gpus_per_node}" if n.gpus_per_node else "CPU"
        return (f"{self.sky.infra or 'any infra'}: {n.nodes} node(s) x {what}, "
                f"{'spot' if self.sky.use_spot else 'on-demand'}, "
                f"results in {self.sky.bucket or '(launcher.bucket)'}")

    def preview(self, n_runs: int) -> list[str]:
        """What would be launched (each task is printed by ``ccpo-lab sweep --dry-run
        --commands``' run directories once they exist)."""
        return [f"{n_runs} SkyPilot managed job(s) (sky.jobs.launch), one per run, named "
                "ccpo-<run id[:16]>; each task's resources: " + self.resources()]

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """Parse every task first (nothing launched on a rejection), then launch each."""
        tasks = [(rd, parse_task(self.task(rd), self.sky.accelerator)) for rd in runs]
        sky = import_sky()
        ids: list[str] = []
        for rd, task in tasks:
            job_ids = self._launch(sky, task, len(ids))
            jid = str(job_ids[0] if isinstance(job_ids, list | tuple) else job_ids)
            rd.record_job(launcher=self.kind, job_id=jid, name=task.name,
                          bucket=self.sky.bucket)
            ids.append(jid)
        return Submission(runs=tuple(runs), job_ids=tuple(ids), detached=True,
                          message=f"launched {len(ids)} SkyPilot managed job(s); results in "
                                  f"{self.sky.bucket} (sync them back to follow the runs)")

    def _launch(self, sky: Any, task: Any, done: int) -> Any:
        """``sky.jobs.launch(task)``; what SkyPilot refuses (no machine with that
        accelerator, no cloud enabled) is one line, naming the runs launched before."""
        try:
            job_ids, _ = sky.get(sky.jobs.launch(task, name=task.name))
        except Exception as e:  # noqa: BLE001 - SkyPilot's own exception classes
            text = str(e).strip().splitlines()[0][:300] if str(e).strip() else \
                type(e).__name__
            before = f" ({done} runs were launched before it)" if done else ""
            raise UserError(f"SkyPilot refused the job: {text}{before}",
                            key="launcher.accelerator", value=self.sky.accelerator) from None
        return job_ids

    @classmethod
    def query(cls, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        """One ``sky.jobs.queue`` call; None when SkyPilot cannot be asked."""
        if not any(j.get("job_id") for j in jobs):
            return {}
        try:
            import sky

            rows = sky.get(sky.jobs.queue(refresh=False, skip_finished=False))
        except Exception:  # noqa: BLE001 - no SkyPilot, no API server: cannot be asked
            return None
        out = {}
        for r in rows:
            status = r.get("status")
            out[str(r.get("job_id"))] = str(getattr(status, "value", status))
        return out

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """SkyPilot's view where the run's own files (in the bucket) are not synced."""
        if file_state in TERMINAL:
            return Reconciled(file_state, "", sched in ACTIVE)
        if sched is None:
            return Reconciled(file_state, "SkyPilot cannot be asked", True)
        if sched in ACTIVE:
            return Reconciled("running" if sched in ("RUNNING", "RECOVERING") else "pending",
                              f"SkyPilot: {sched}; the run's files are in the bucket", True)
        if sched == "SUCCEEDED":
            return Reconciled(file_state, "its job ended: sync the bucket to see the outcome")
        if sched == "CANCELLED":
            return Reconciled("cancelled", "cancelled in SkyPilot")
        if sched in FAILED:
            return Reconciled("failed", f"SkyPilot: {sched}")
        return Reconciled(file_state, f"SkyPilot: {sched}", True)

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """One ``sky.jobs.cancel`` for every live job."""
        live = [r for r in rows if r.live and r.job_id and str(r.job_id).isdigit()]
        problems = []
        if live:
            try:
                import sky

                sky.get(sky.jobs.cancel(job_ids=[int(str(r.job_id)) for r in live]))
            except Exception as e:  # noqa: BLE001 - one line for the user
                problems.append(f"sky.jobs.cancel failed: {str(e).splitlines()[0][:200]}")
        return [(r, f"sky jobs cancel {r.job_id}" if r in live else "marked cancelled")
                for r in rows], problems
