"""The launcher seams: a toy launcher added from a test (one class plus one registry entry),
typed per-kind settings, the placement each launcher gives a job, runs added later.

The toy launcher keeps its "scheduler" in a JSON file of the sweep directory: submitting
queues the runs there, :meth:`wait` executes them here through :class:`RunJob` with its
own placement, and status and cancel work from the sweep directory alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.launcher import LauncherSettings, Where
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch import registry
from ccpo_lab.launch.base import TERMINAL, Launcher, Monitor, Reconciled, Submission
from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.job import RunJob
from ccpo_lab.launch.local import LocalSettings
from ccpo_lab.launch.slurm import SlurmSettings
from ccpo_lab.launch.status import RunStatus, collect_status
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.placement import Needs, Placement
from ccpo_lab.runs.layout import RunDir, SweepDir, init_run_dir
from ccpo_lab.runs.metrics import read_metrics

SEEN: list[Placement] = []
"""Placements the toy's jobs were given (what the backend received)."""


# ------------------------------------------------------------------ the toy launcher
@dataclass(frozen=True)
class ToySettings(LauncherSettings):
    """``launcher.kind: toy``: a queue in a file of the sweep directory."""

    kind: str = field(default="toy", init=False)
    queue: str = "default"
    """Queue name."""
    cpus: int = 3
    """CPUs each job is given."""

    def validate(self, where: Where) -> None:
        if self.cpus < 1:
            raise UserError("must be >= 1", file=where("launcher.cpus"), key="launcher.cpus",
                            value=self.cpus)


def toy_placement() -> Placement:
    """Inside a toy job: the job environment the toy 'scheduler' set."""
    where = Placement(hosts=("toy-node",), cpus=int(os.environ["TOY_CPUS"]),
                      job_id=os.environ["TOY_JOB_ID"])
    SEEN.append(where)
    return where


def _queue(path: Any) -> dict[str, Any]:
    p = Path(str(path))
    return json.loads(p.read_text()) if p.is_file() else {}


class ToyLauncher(Launcher):
    kind = "toy"
    settings_class = ToySettings
    scheduled = True

    @property
    def file(self) -> Path:
        return self.sweep.jobs / "toy-queue.json"

    def placement(self) -> Placement:
        assert isinstance(self.settings, ToySettings)
        return Placement(cpus=self.settings.cpus)

    def resources(self) -> str:
        assert isinstance(self.settings, ToySettings)
        return f"queue {self.settings.queue}, {self.settings.cpus} CPUs"

    def submit(self, runs: Sequence[RunDir], *, wait: bool) -> Submission:
        queue = _queue(self.file)
        ids = []
        for rd in runs:
            job_id = f"toy-{len(queue)}"
            queue[job_id] = {"state": "QUEUED", "dir": str(rd.path)}
            rd.record_job(launcher=self.kind, job_id=job_id, queue=str(self.file))
            ids.append(job_id)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps(queue))
        return Submission(runs=tuple(runs), job_ids=tuple(ids), detached=True,
                          message=f"queued {len(ids)} toy jobs")

    def wait(self, submission: Submission, monitor: Monitor) -> None:
        assert isinstance(self.settings, ToySettings)
        for job_id in submission.job_ids:
            queue = _queue(self.file)
            if queue[job_id]["state"] != "QUEUED":
                continue
            queue[job_id]["state"] = "RUNNING"
            self.file.write_text(json.dumps(queue))
            os.environ.update(TOY_JOB_ID=job_id, TOY_CPUS=str(self.settings.cpus))
            try:
                RunJob(queue[job_id]["dir"], toy_placement)()
            finally:
                queue[job_id]["state"] = "DONE"
                self.file.write_text(json.dumps(queue))
        monitor.refresh()

    @classmethod
    def query(cls, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        out: dict[str, str] = {}
        for j in jobs:
            out.update({k: v["state"] for k, v in _queue(j.get("queue")).items()})
        return out

    @classmethod
    def reconcile(cls, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Reconciled:
        if file_state in TERMINAL:
            return Reconciled(file_state)
        if sched == "QUEUED":
            return Reconciled("pending", "", True)
        if sched == "RUNNING":
            return Reconciled("running", "", True)
        return Reconciled(file_state, f"toy: {sched}")

    @classmethod
    def cancel(cls, rows: Sequence[RunStatus]) -> tuple[list[tuple[RunStatus, str]], list[str]]:
        out = []
        for r in rows:
            job = RunDir(r.path).read_job()
            queue = _queue(job["queue"])
            queue[job["job_id"]]["state"] = "CANCELLED"
            Path(job["queue"]).write_text(json.dumps(queue))
            out.append((r, f"dequeued {job['job_id']}"))
        return out, []


@pytest.fixture
def toy() -> Iterator[type[ToyLauncher]]:
    """The toy launcher, registered for one test."""
    registry.register(ToyLauncher)
    SEEN.clear()
    yield ToyLauncher
    registry.unregister("toy")


# ------------------------------------------------------------------ tests
def test_a_toy_launcher_is_one_class_and_one_registry_entry(
        toy: type[ToyLauncher], workdir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the plan table on one line per run
    smoke = workdir / "sweeps" / "smoke.yaml"
    sw = load_sweep(smoke, ["launcher=toy", "launcher.queue=fast", "arms=[grpo]"])
    assert sw.config.launcher == ToySettings(queue="fast")
    # its settings are typed and validated on their own
    with pytest.raises(UserError, match="must be >= 1") as e:
        load_sweep(smoke, ["launcher=toy", "launcher.cpus=0"])
    assert e.value.key == "launcher.cpus" and e.value.file == "command line"
    with pytest.raises(UserError, match="a setting of launcher slurm, not of toy"):
        load_sweep(smoke, ["launcher=toy", "launcher.partition=gpu"])
    # the dry run shows its resources; nothing is written
    assert main(["sweep", str(smoke), "launcher=toy", "launcher.queue=fast", "arms=[grpo]",
                 "--dry-run", "--results", str(workdir / "results")]) == 0
    assert "queue fast, 3 CPUs" in capsys.readouterr().out
    assert not (workdir / "results").exists()
    # submit: queued, and status / cancel know it from the sweep directory alone
    assert launch_sweep(sw, workdir / "results") == 0
    sweep_dir = sw.sweep_dir(workdir / "results")
    rows = collect_status(sweep_dir)
    assert [(r.state, r.live, r.scheduler) for r in rows] == [("pending", True, "QUEUED")] * 2
    assert {r.job_id for r in rows} == {"toy-0", "toy-1"}
    assert SweepDir(sweep_dir).read_manifest()["submissions"][-1]["launcher"] == "toy"
    done, problems = cancel_runs(sweep_dir, seed=1)
    assert [c.how for c in done] == ["dequeued toy-1"] and not problems
    assert {r.seed: r.state for r in collect_status(sweep_dir)} == {0: "pending", 1: "cancelled"}


@pytest.mark.slow
def test_a_toy_launcher_runs_a_run_where_it_places_it(
        toy: type[ToyLauncher], workdir: Path) -> None:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    ["launcher=toy", "arms=[grpo]", "seeds=[0]", "protocol.total_steps=2"])
    assert launch_sweep(sw, workdir / "results", wait=True) == 0
    (row,) = collect_status(sw.sweep_dir(workdir / "results"))
    assert row.state == "completed" and row.job_id == "toy-0"
    assert [m["step"] for m in read_metrics(row.path / "metrics.jsonl")] == [0, 1, 2]
    assert [Placement(hosts=("toy-node",), cpus=3, job_id="toy-0")] == SEEN


def test_a_slurm_key_under_local_is_refused_naming_the_valid_keys(workdir: Path) -> None:
    smoke = workdir / "sweeps" / "smoke.yaml"
    with pytest.raises(UserError) as e:
        load_sweep(smoke, ["launcher.partition=gpu"])  # smoke.yaml: launcher local
    assert e.value.key == "launcher.partition" and e.value.file == "command line"
    assert "a setting of launcher slurm, not of local" in str(e.value)
    assert e.value.valid == ["kind", "seconds_per_step", "price_per_device_hour", "currency",
                             "max_parallel", "gpus_per_run"]
    text = smoke.read_text().replace("max_parallel: 2", "max_parallel: 2\n  time_min: 5")
    smoke.write_text(text)
    with pytest.raises(UserError) as e:
        load_sweep(smoke)
    assert e.value.key == "launcher.time_min" and e.value.file == str(smoke)
    # ... while selecting Slurm on the command line keeps working, from its defaults
    ok = load_sweep(workdir / "sweeps" / "demo.yaml", ["launcher=slurm",
                                                      "launcher.partition=gpu"])
    assert ok.config.launcher == SlurmSettings(partition="gpu")
    local = load_sweep(workdir / "sweeps" / "demo.yaml")
    assert local.config.launcher == LocalSettings(max_parallel=2)


def test_resources_moved_to_the_backend_say_where(workdir: Path) -> None:
    slurm = workdir / "sweeps" / "alfworld-qwen7b-slurm.yaml"
    slurm.write_text(slurm.read_text().replace("cpus_per_task: 64", "cpus_per_task: 64\n"
                                               "  gpus_per_node: 8"))
    with pytest.raises(UserError, match="backend.verl.n_gpus_per_node") as e:
        load_sweep(slurm)
    assert e.value.key == "launcher.gpus_per_node"


def test_every_backend_section_is_validated_when_the_sweep_is_loaded(workdir: Path) -> None:
    smoke = workdir / "sweeps" / "smoke.yaml"
    with pytest.raises(UserError, match="3..12") as e:
        load_sweep(smoke, ["backend.local.n_receptacles=2"])
    assert (e.value.key, e.value.file) == ("backend.local.n_receptacles", "command line")
    with pytest.raises(UserError) as e:
        load_sweep(smoke, ["backend.local.closed_fraction=1.5"])
    assert e.value.key == "backend.local.closed_fraction"
    # the inactive section too (a verl sweep's backend.local)
    with pytest.raises(UserError) as e:
        load_sweep(workdir / "sweeps" / "alfworld-qwen7b-slurm.yaml",
                   ["backend.local.num_threads=0"])
    assert e.value.key == "backend.local.num_threads"


def test_slurm_placement_comes_from_its_job_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.launch.slurm import placement_here

    for k, v in {"SLURM_JOB_ID": "130", "SLURM_ARRAY_JOB_ID": "123",
                 "SLURM_ARRAY_TASK_ID": "4", "SLURM_JOB_NODELIST": "gpu-[7-8]",
                 "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "64",
                 "SLURM_RESTART_COUNT": "2", "CUDA_VISIBLE_DEVICES": "0,1"}.items():
        monkeypatch.setenv(k, v)
    want = Placement(hosts=("gpu-7", "gpu-8"), rank=1, ntasks=2, gpus=(0, 1), cpus=64,
                     job_id="123_4", restarts=2)
    assert placement_here() == want
    assert registry.placement_here() == want  # detected: this is a Slurm job
    assert want.is_worker


def test_local_placement_comes_from_submitit_local_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.launch.local import placement_here

    for k in ("SLURM_JOB_ID", "SUBMITIT_EXECUTOR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert registry.placement_here().rank == 0  # outside any job: this machine
    for k, v in {"SUBMITIT_EXECUTOR": "local", "SUBMITIT_LOCAL_JOB_ID": "4242",
                 "SUBMITIT_LOCAL_GLOBALID": "0", "SUBMITIT_LOCAL_NTASKS": "1"}.items():
        monkeypatch.setenv(k, v)
    where = registry.placement_here()
    assert where == placement_here()
    assert (where.rank, where.ntasks, where.gpus, where.job_id) == (0, 1, (3,), "4242")


def test_the_launcher_plans_what_the_backend_needs(workdir: Path) -> None:
    from ccpo_lab.launch.plan import launcher_for, sweep_needs

    slurm = load_sweep(workdir / "sweeps" / "alfworld-qwen7b-slurm.yaml")
    assert sweep_needs(slurm) == Needs(nodes=1, gpus_per_node=8, python="python3")
    launcher = launcher_for(slurm, workdir / "results")
    assert launcher.placement() == Placement(ntasks=1, cpus=64)
    assert launcher.resources() == ("partition=gpu nodes=1 gpus/node=8 cpus=64 time=2880m "
                                    "mem=900G")
    smoke = load_sweep(workdir / "sweeps" / "smoke.yaml",
                       ["launcher=slurm", "backend.local.num_threads=2"])
    assert sweep_needs(smoke) == Needs(cpus=2)
    params = launcher_for(smoke, workdir / "results").parameters()  # type: ignore[attr-defined]
    assert params["cpus_per_task"] == 2 and "gpus_per_node" not in params


def test_a_worker_task_serves_the_run_and_leaves_its_state(workdir: Path) -> None:
    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["arms=[grpo]", "seeds=[0]"])
    (run,) = sw.runs
    rd = RunDir(sw.sweep_dir(workdir / "results") / "grpo" / "seed-0")
    init_run_dir(rd, run)
    out = RunJob(rd.path, _rank_one)()
    assert out == {"rank": 1}
    assert rd.read_state()["state"] == "pending"


def _rank_one() -> Placement:
    return Placement(hosts=("a", "b"), rank=1, ntasks=2)


def test_runs_added_later_are_submitted_alone(toy: type[ToyLauncher], workdir: Path) -> None:
    smoke = workdir / "sweeps" / "smoke.yaml"
    first = load_sweep(smoke, ["launcher=toy", "arms=[grpo]", "seeds=[0]"])
    assert launch_sweep(first, workdir / "results") == 0
    sweep_dir = first.sweep_dir(workdir / "results")
    before = RunDir(sweep_dir / "grpo" / "seed-0").read_job()
    more = load_sweep(smoke, ["launcher=toy", "arms=[grpo]", "seeds=[0,1,2]"])
    assert launch_sweep(more, workdir / "results", only={("grpo", 2)}) == 0
    assert RunDir(sweep_dir / "grpo" / "seed-0").read_job() == before
    assert not (sweep_dir / "grpo" / "seed-1").exists()
    assert RunDir(sweep_dir / "grpo" / "seed-2").read_job()["job_id"] == "toy-1"
    assert [r.seed for r in collect_status(sweep_dir)] == [0, 2]


def test_a_launcher_refuses_settings_of_another_kind() -> None:
    with pytest.raises(TypeError):
        ToyLauncher(LocalSettings(), "/tmp/x", name="x", needs=Needs())
