"""A launcher added from outside ccpo-lab (issue 25): one module and one entry point of group
``ccpo_lab.launchers``, no edit of ccpo-lab's files.

The toy package is a temporary directory on ``PYTHONPATH``: its module and a
``toy_launcher-0.dist-info`` whose ``entry_points.txt`` names the launcher, as ``pip install``
would leave them. Fresh ``ccpo-lab`` processes then validate its settings, plan with it,
submit through it and track its runs from ``job.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOY = '''"""A toy launcher from outside ccpo-lab: it queues runs in job.json, starts nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

from ccpo_lab.config.launcher import LauncherSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.base import Launcher, Reconciled, Submission
from ccpo_lab.placement import Placement


@dataclass(frozen=True)
class ToySettings(LauncherSettings):
    kind: str = field(default="toy", init=False)
    queue: str = "default"
    cpus: int = 3

    def validate(self, where):
        if self.cpus < 1:
            raise UserError("must be >= 1", file=where("launcher.cpus"),
                            key="launcher.cpus", value=self.cpus)


class ToyLauncher(Launcher):
    kind = "toy"
    settings_class = ToySettings
    scheduled = True

    def placement(self):
        return Placement(cpus=self.settings.cpus)

    def resources(self):
        return f"toy queue {self.settings.queue}, {self.settings.cpus} CPUs"

    def submit(self, runs, *, wait):
        for rd in runs:
            rd.record_job(launcher=self.kind, job_id=f"toy-{rd.arm}-{rd.seed}",
                          queue=self.settings.queue)
        return Submission(runs=tuple(runs), detached=True,
                          message=f"toy queued {len(runs)} runs")

    @classmethod
    def query(cls, jobs):
        return {str(j["job_id"]): f"QUEUED@{j['queue']}" for j in jobs}

    @classmethod
    def reconcile(cls, file_state, job, sched, state):
        return Reconciled("pending", f"toy: {sched}", True)
'''


@pytest.fixture
def toy_path(tmp_path: Path) -> Path:
    """A directory holding the toy module and its distribution's metadata."""
    pkg = tmp_path / "site"
    (pkg / "toy_launcher-0.dist-info").mkdir(parents=True)
    (pkg / "toy_launcher.py").write_text(TOY)
    (pkg / "toy_launcher-0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-launcher\nVersion: 0\n")
    (pkg / "toy_launcher-0.dist-info" / "entry_points.txt").write_text(
        "[ccpo_lab.launchers]\ntoy = toy_launcher:ToyLauncher\n")
    return pkg


def _ccpo(args: list[str], toy_path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(toy_path), "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, check=False, timeout=120)


def test_a_launcher_from_an_entry_point_needs_no_edit_of_ccpo_lab(
        toy_path: Path, workdir: Path) -> None:
    smoke = str(workdir / "sweeps" / "smoke.yaml")
    results = str(workdir / "results")
    common = [smoke, "launcher=toy", "arms=[grpo]", "seeds=[0,1]", "--results", results]
    # its settings are validated when the sweep is loaded, with the file/key/value message
    bad = _ccpo(["sweep", *common, "launcher.cpus=0", "--dry-run"], toy_path, workdir)
    assert bad.returncode == 2 and "must be >= 1" in bad.stderr + bad.stdout
    assert "launcher.cpus" in bad.stderr + bad.stdout
    other = _ccpo(["sweep", *common, "launcher.partition=gpu", "--dry-run"], toy_path, workdir)
    assert other.returncode == 2
    assert "a setting of launcher slurm, not of toy" in other.stderr + other.stdout
    # the plan is its own
    plan = _ccpo(["sweep", *common, "launcher.queue=fast", "--dry-run"], toy_path, workdir)
    assert plan.returncode == 0, plan.stderr
    assert "toy queue fast, 3 CPUs" in plan.stdout
    assert not Path(results).exists()
    # it is the one that submits, and status asks its tracker from job.json alone
    sub = _ccpo(["sweep", *common, "launcher.queue=fast"], toy_path, workdir)
    assert sub.returncode == 0, sub.stderr
    assert "toy queued 2 runs" in sub.stdout
    status = _ccpo(["status", str(Path(results) / "smoke"), "--json"], toy_path, workdir)
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    rows = rows["runs"] if isinstance(rows, dict) else rows
    assert {(r["launcher"], r["job_id"], r["scheduler"]) for r in rows} == {
        ("toy", "toy-grpo-0", "QUEUED@fast"), ("toy", "toy-grpo-1", "QUEUED@fast")}


def test_without_its_package_the_kind_is_unknown(workdir: Path, tmp_path: Path) -> None:
    out = _ccpo(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "launcher=toy",
                 "--dry-run"], tmp_path, workdir)
    assert out.returncode == 2 and "unknown launcher" in out.stderr + out.stdout
