"""The ``ray-jobs`` launcher: each run one job of an existing Ray cluster (its Jobs API).

Each run is submitted with ``ray.job_submission.JobSubmissionClient`` as the shell command
``cd <run>/logs && exec PYTHON -u -m ccpo_lab.runs.execute RUN_DIR >>stdout 2>>stderr``
(the generic entry point; the cluster sees the results directory at the same path). Its
``submission_id`` is derived from the run id, ``ccpo-<first 16 hex digits>-<attempt>``: a
submission of the run that is pending or running is adopted, never doubled; a new attempt
is submitted only when every earlier one stopped, failed or ended and the run is not
completed (the relaunch rules of :mod:`ccpo_lab.launch.submit` decide which runs), and a
race with another launch is lost cleanly (Ray refuses the second submission of one id). Its
``runtime_env`` carries the run's environment (``launcher.env``, a marker variable
``CCPO_LAB_RAY_JOB``, SIGINT as Ray's stop signal so a stopped job records ``cancelled``)
and, when the run's backend declares one (``RAY_WORKER_SETUP_HOOK`` of its runner: the
verl backend's hooks), ccpo-lab's ``worker_process_setup_hook``. The entry point reserves
``entrypoint_num_cpus`` and ``entrypoint_resources``, never GPUs: a verl trainer started
inside the job joins the cluster (``RAY_ADDRESS`` is set there) and places its GPU workers
itself, on as many nodes as ``backend.verl.nnodes`` says.

Status, cancel and logs go through the Jobs API (one ``GET /api/jobs/`` per cluster, with
a short timeout), recorded in each run's ``job.json`` (``address``, ``job_id``).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ccpo_lab.config.launchers.rayjobs import RayJobsSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import TERMINAL, Launcher, Reconciled, Submission, gone, parallel
from ccpo_lab.launch.environment import JobEnvironment
from ccpo_lab.placement import Placement
from ccpo_lab.runs.layout import RunDir

if TYPE_CHECKING:
    from ccpo_lab.launch.status import RunStatus

MARKER = "CCPO_LAB_RAY_JOB"
"""Set (to the submission id) in every job this launcher submits."""
RAY_JOBS = JobEnvironment("ray-jobs", marker=(MARKER, None))
"""A job of this launcher: this machine, one task (a verl trainer joins the cluster)."""
QUERY_TIMEOUT_S = 5.0
"""Seconds a status query may take before it is abandoned."""
CONNECT_TIMEOUT_S = 10.0
"""Seconds the cluster has to answer before a launch is refused."""
AGENT_WAIT_S = 300.0
"""Seconds a submission waits for a freshly started cluster's job agent."""
STOP_WAIT_S = 30
"""Seconds a stopped job has after SIGINT before Ray kills it."""
ACTIVE = ("PENDING", "RUNNING")
"""Job states in which a job holds (or waits for) the cluster."""


def http_address(address: str) -> str:
    """``127.0.0.1:8265`` -> ``http://127.0.0.1:8265`` (no trailing slash)."""
    address = address.rstrip("/")
    return address if "://" in address else f"http://{address}"


def submission_prefix(run_id: str) -> str:
    """``ccpo-<16 hex digits of the run id>-``: every submission of one run starts so."""
    return f"ccpo-{run_id[:16]}-"


def next_submission(run_id: str, known: Mapping[str, str]) -> tuple[str | None, str]:
    """``(id to adopt, id to submit)`` for the run: an earlier submission still pending or
    running is adopted (the first), else the next attempt's id (``known``: submission id
    -> status of the cluster's jobs)."""
    prefix = submission_prefix(run_id)
    mine = sorted((int(s[len(prefix):]), s) for s in known
                  if s.startswith(prefix) and s[len(prefix):].isdigit())
    live = [s for _, s in mine if known[s] in ACTIVE]
    return (live[0] if live else None), f"{prefix}{(mine[-1][0] + 1) if mine else 1}"


def list_jobs(address: str, timeout: float = QUERY_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """Every job of the cluster by submission id (the Jobs API's ``GET /api/jobs/``);
    raises ``OSError`` when it does not answer within ``timeout``."""
    import requests

    try:
        r = requests.get(f"{http_address(address)}/api/jobs/", timeout=timeout)
        r.raise_for_status()
        rows = r.json()
    except (requests.RequestException, ValueError) as e:
        raise OSError(f"the Ray Jobs API at {address} did not answer: "
                      f"{type(e).__name__}") from None
    return {str(j.get("submission_id")): j for j in rows if j.get("submission_id")}


def job_logs(address: str, submission_id: str) -> str:
    """The entry point's own output as Ray kept it (the shell's; the run writes its own
    log files), through ``JobSubmissionClient.get_job_logs``."""
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(http_address(address)).get_job_logs(submission_id))


def _submit_when_ready(client: Any, job: Mapping[str, Any]) -> None:
    """``client.submit_job(**job)``, retried while the cluster's job agent is not up yet
    (a head that just started answers "No available agent ... try again later"), for at
    most :data:`AGENT_WAIT_S` seconds."""
    import time

    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            client.submit_job(**job)
            return
        except RuntimeError as e:
            if "No available agent" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(2.0)


def worker_setup_hook(backend: str) -> str | None:
    """The Ray worker setup hook a run of ``backend`` needs (``RAY_WORKER_SETUP_HOOK`` of
    its runner), None when it declares none."""
    from ccpo_lab.config.backends import backend_runner

    hook = getattr(backend_runner(backend), "RAY_WORKER_SETUP_HOOK", None)
    return str(hook) if hook else None


class RayJobsLauncher(Launcher):
    """One Ray job per run on an existing cluster (see the module docstring)."""

    kind = "ray-jobs"
    settings_class = RayJobsSettings
    environment = RAY_JOBS
    max_nodes = None
    scheduled = True

    @property
    def ray(self) -> RayJobsSettings:
        """The settings, typed."""
        assert isinstance(self.settings, RayJobsSettings)
        return self.settings

    def address(self) -> str:
        """The dashboard address (``launcher.address``, else ``$RAY_ADDRESS``)."""
        address = self.ray.address or os.environ.get("RAY_ADDRESS")
        if not address:
            raise UserError("no Ray cluster to submit to: set launcher.address (the "
                            "dashboard, http://HEAD:8265) or RAY_ADDRESS",
                            key="launcher.address", value=None)
        return http_address(address)

    def prepare(self) -> None:
        """The cluster's Jobs API answers (nothing is written before)."""
        address = self.address()
        try:
            list_jobs(address, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            raise UserError("the Ray cluster does not answer (its dashboard's Jobs API); "
                            "nothing was submitted", key="launcher.address",
                            value=address) from None

    def placement(self) -> Placement:
        """One task; the run's GPU workers are the cluster's."""
        return Placement()

    def resources(self) -> str:
        """``cluster http://head:8265; run: 2 nodes x 8 GPUs (the trainer's workers)``."""
        where = self.ray.address or os.environ.get("RAY_ADDRESS") or "(RAY_ADDRESS)"
        return (f"Ray cluster {where}; each run one job ({self.needs.describe()}, "
                f"entry point {self.ray.entrypoint_num_cpus:g} CPU)")

    def python(self) -> str:
        """The interpreter command a job runs (shell-quoted)."""
        return shlex.quote(self.ray.python or self.needs.python or sys.executable)

    def entrypoint(self, rd: RunDir) -> str:
        """The shell command of the run's job (its output into the run's log files)."""
        path = rd.path.resolve()
        logs = path / "logs"
        return (f"mkdir -p {shlex.quote(str(logs))} && cd {shlex.quote(str(logs))} && "
                f"exec {self.python()} -u -m ccpo_lab.runs.execute {shlex.quote(str(path))}"
                f" >>{shlex.quote(str(logs / 'ray-job.out'))}"
                f" 2>>{shlex.quote(str(logs / 'ray-job.err'))}")

    def runtime_env(self, submission_id: str, backend: str | None = None) -> dict[str, Any]:
        """The job's ``runtime_env``: the run's environment and the worker setup hook of
        its backend (``backend``: its kind)."""
        env = {k: str(v) for k, v in self.ray.env.items()}
        env.update({MARKER: submission_id, "RAY_JOB_STOP_SIGNAL": "SIGINT",
                    "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S), "PYTHONUNBUFFERED": "1"})
        out: dict[str, Any] = {"env_vars": env}
        hook = worker_setup_hook(backend) if backend else None
        if hook:
            out["worker_process_setup_hook"] = hook
        return out

    def preview(self, n_runs: int) -> list[str]:
        """The jobs that would be submitted: the first one's entry point and runtime env."""
        return [f"{n_runs} Ray job(s) on {self.ray.address or '$RAY_ADDRESS'}, submission ids "
                "ccpo-<run id[:16]>-<attempt>; each runs:",
                "  cd <run>/logs && exec " + self.python() +
                " -u -m ccpo_lab.runs.execute <run> >>ray-job.out 2>>ray-job.err",
                f"  runtime_env: {self.runtime_env('<submission id>')}"]

    def machine_checks(self) -> list[tuple[str, str, str]]:
        """The cluster's Jobs API answers."""
        try:
            self.prepare()
        except UserError as e:
            return [("Ray Jobs", "FIX", str(e))]
        return [("Ray Jobs", "ok", self.resources())]

    def runs_execute_here(self) -> bool:
        """Only inside one of this launcher's jobs."""
        return RAY_JOBS.active()

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        """One job per run; a run with a live job adopts it (nothing is submitted twice)."""
        from ray.job_submission import JobSubmissionClient

        address = self.address()
        client = JobSubmissionClient(address)
        known = {s: str(j.get("status")) for s, j in list_jobs(address).items()}
        ids = [self._submit_one(client, address, rd, known) for rd in runs]
        new = [s for s, fresh in ids if fresh]
        return Submission(runs=tuple(runs), job_ids=tuple(s for s, _ in ids), detached=True,
                          record={"address": address},
                          message=f"submitted {len(new)} Ray job(s) to {address}"
                                  + (f" ({len(ids) - len(new)} already there, adopted)"
                                     if len(new) < len(ids) else ""))

    def _submit_one(self, client: Any, address: str, rd: RunDir,
                    known: Mapping[str, str]) -> tuple[str, bool]:
        """Submit the run (or adopt its live job); record its ``job.json``. Returns (the
        submission id, whether it was submitted now)."""
        run_id = str(rd.read_run().get("run_id") or "")
        if not run_id:
            raise UserError("the run has no run id (run.json); nothing more was submitted",
                            file=rd.run_json)
        backend = (rd.read_config().get("backend") or {}).get("kind")
        adopt, sid = next_submission(run_id, known)
        fresh = adopt is None
        if adopt is None:
            try:
                _submit_when_ready(client, dict(
                    entrypoint=self.entrypoint(rd), submission_id=sid,
                    runtime_env=self.runtime_env(sid, backend),
                    entrypoint_num_cpus=self.ray.entrypoint_num_cpus,
                    entrypoint_resources=dict(self.ray.entrypoint_resources) or None,
                    metadata={"ccpo_lab_run": str(rd.path.resolve())}))
            except RuntimeError as e:
                if "already exists" not in str(e):
                    raise UserError(f"Ray refused the job of {rd.path}: "
                                    f"{str(e).strip().splitlines()[0][:300]}",
                                    key="launcher.address", value=address) from None
                fresh = False  # another launch submitted this attempt first: it is the run's
        else:
            sid = adopt
        logs = rd.path.resolve() / "logs"
        rd.record_job(launcher=self.kind, job_id=sid, address=address,
                      stdout=str(logs / "ray-job.out"), stderr=str(logs / "ray-job.err"))
        return sid, fresh

    # ------------------------------------------------------------ tracking, from job.json
    @classmethod
    def query(cls, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        """One ``GET /api/jobs/`` per cluster; a job the cluster no longer knows is
        ``GONE``; None when a cluster does not answer."""
        by_address: dict[str, list[str]] = {}
        for j in jobs:
            if j.get("job_id") and j.get("address"):
                by_address.setdefault(str(j["address"]), []).append(str(j["job_id"]))
        out: dict[str, str] = {}
        for address, ids in by_address.items():
            try:
                known = list_jobs(address)
            except OSError:
                return None
            out.update({i: str(known[i].get("status")) if i in known else "GONE"
                        for i in ids})
        return out

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        """Ray's view wins where the run could not record what happened to it."""
        if file_state in TERMINAL:
            return Reconciled(file_state, "", sched in ACTIVE)
        if sched is None:
            return Reconciled(file_state, "the Ray cluster does not answer", True)
        if sched in ACTIVE:
            return Reconciled("running" if file_state == "running" else "pending", "", True)
        if sched == "STOPPED":
            return Reconciled("cancelled", "stopped through the Ray Jobs API")
        if file_state in ("running", "requeued"):
            return Reconciled("interrupted", f"Ray job {sched}: " + gone(state))
        if sched == "FAILED":
            return Reconciled("failed", "its Ray job failed before the run started (ccpo-lab "
                                        "log: ray-job.err; Ray's: ray job logs "
                                        f"{job.get('job_id')})")
        if sched == "GONE":
            return Reconciled("pending", "not known to the Ray cluster: a relaunch submits it")
        return Reconciled("interrupted", f"its Ray job ended ({sched}) without the run "
                                         "recording an outcome; a relaunch resumes it")

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        """``stop_job`` for every live job (Ray sends SIGINT: the run records cancelled)."""
        problems: list[str] = []

        def stop(r: RunStatus) -> str:
            job = RunDir(r.path).read_job()
            address, sid = job.get("address"), job.get("job_id")
            if not (r.live and address and sid):
                return "marked cancelled"
            from ray.job_submission import JobSubmissionClient

            try:
                JobSubmissionClient(http_address(str(address))).stop_job(str(sid))
            except (ConnectionError, RuntimeError, OSError) as e:
                problems.append(f"{r.arm} seed {r.seed}: ray job stop {sid} failed: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
                return "marked cancelled"
            return f"ray job stop {sid}"

        return list(zip(rows, parallel(stop, list(rows)), strict=True)), problems
