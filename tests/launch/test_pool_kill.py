"""A ``kill -9`` of the local pool: its runs go on holding their GPUs and slots.

A run's GPU locks (and its sweep's slot) last exactly as long as the processes executing
it, not as long as the pool that started it: after the pool is killed with SIGKILL, its
runs go on and keep their GPUs, a second sweep waits for them, and a relaunch of the same
sweep does not start more runs beside the orphans than ``max_parallel``. Real ``ccpo-lab``
pools on the CPU backend with a faked GPU count (``CCPO_LAB_NUM_GPUS``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.launch.cancel import cancel_runs
from ccpo_lab.launch.pool import pool_alive
from ccpo_lab.launch.slots import NUM_GPUS_ENV
from ccpo_lab.runs.gpulock import try_lock
from ccpo_lab.runs.layout import RunDir, SweepDir
from ccpo_lab.runs.owner import current_owner
from tests.conftest import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def results(workdir: Path) -> Iterator[Path]:
    """``<workdir>/results``; whatever still runs there is cancelled afterwards."""
    d = workdir / "results"
    yield d
    for sweep in sorted(d.glob("*/sweep.json")):
        cancel_runs(sweep.parent, grace_s=2)


def _sweep(workdir: Path, name: str, *overrides: str) -> list[str]:
    return ["sweep", str(workdir / "sweeps" / "smoke.yaml"), f"name={name}", "arms=[grpo]",
            "protocol.total_steps=400", "launcher.max_parallel=2", *overrides,
            "--results", str(workdir / "results")]


def _executing(rds: list[RunDir]) -> list[RunDir]:
    """The runs a live process executes (it holds the run's ownership lock)."""
    return [rd for rd in rds if current_owner(rd) is not None]


def _started(rds: list[RunDir]) -> list[RunDir]:
    """The runs a pool has started (their ``job.json`` names a job)."""
    return [rd for rd in rds if rd.read_job().get("pid") is not None]


def _kill_pool(sweep: Path) -> int:
    pool = int(SweepDir(sweep).read_manifest()["submissions"][-1]["pool_pid"])
    os.kill(pool, signal.SIGKILL)
    wait_until(lambda: not pool_alive(pool), 120, "the pool to die")
    return pool


def _gpu_free(g: int) -> bool:
    lock = try_lock((g,))
    if lock is None:
        return False
    lock.release()
    return True


@pytest.mark.parametrize("gpus", ["1", "0"], ids=["gpu-slots", "cpu-slots"])
def test_a_killed_pool_keeps_its_runs_slots_and_a_relaunch_waits_for_them(
        workdir: Path, results: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], gpus: str) -> None:
    monkeypatch.setenv(NUM_GPUS_ENV, "2")
    args = _sweep(workdir, f"kill{gpus}", "seeds=[0,1,2,3]", f"launcher.gpus_per_run={gpus}")
    sweep = results / f"kill{gpus}"
    assert main(args) == 0
    rds = [RunDir(sweep / "grpo" / f"seed-{k}") for k in range(4)]
    first = wait_until(lambda: len(r := _executing(rds)) == 2 and r, 120, "two runs to start")
    _kill_pool(sweep)
    time.sleep(1)
    # the runs go on, and so do their GPU locks
    assert _executing(rds) == first
    if gpus == "1":
        assert not _gpu_free(0) and not _gpu_free(1)
    # a relaunch submits the two queued runs, but starts none beside the orphans
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "started a local pool" in out
    queued = [rd for rd in rds if rd not in first]
    time.sleep(6)
    assert _started(queued) == [] and _executing(rds) == first
    # the orphans end (cancelled): their slots go to the queued runs
    for rd in first:
        assert main(["cancel", str(sweep), "--seed", rd.path.name.split("-")[1]]) == 0
    wait_until(lambda: len(_executing(queued)) == 2, 120, "the queued runs to start")
    assert not set(_executing(rds)) & set(first)


def test_a_killed_pools_runs_keep_their_gpus_from_another_sweep(
        workdir: Path, results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NUM_GPUS_ENV, "2")
    assert main(_sweep(workdir, "one", "seeds=[0,1]", "launcher.gpus_per_run=1")) == 0
    one = [RunDir(results / "one" / "grpo" / f"seed-{k}") for k in range(2)]
    wait_until(lambda: len(_executing(one)) == 2, 120, "sweep one's runs to start")
    _kill_pool(results / "one")
    assert main(_sweep(workdir, "two", "seeds=[0]", "launcher.gpus_per_run=1")) == 0
    two = [RunDir(results / "two" / "grpo" / "seed-0")]
    time.sleep(6)
    assert _started(two) == [] and len(_executing(one)) == 2
    queue = SweepDir(results / "two").read_manifest()["submissions"][-1]["queue"]
    log = results / "two" / str(queue)  # stored relative to the sweep directory
    assert "waiting:" in log.with_suffix(".log").read_text()
    assert main(["cancel", str(results / "one"), "--seed", "0"]) == 0
    wait_until(lambda: _started(two), 60, "sweep two's run to start on the freed GPU")
    assert RunDir(two[0].path).read_job()["gpus"] == RunDir(one[0].path).read_job()["gpus"]


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(x) for x in text.split()]


def test_the_run_alone_holds_its_gpu_once_every_wrapper_is_killed(
        workdir: Path, results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NUM_GPUS_ENV, "1")
    assert main(_sweep(workdir, "alone", "seeds=[0]", "launcher.gpus_per_run=1")) == 0
    rd = RunDir(results / "alone" / "grpo" / "seed-0")
    # the run holds its lock a moment before it records its pid (and the pool its job's):
    # wait for what the product guarantees, both records (issue 36, item 13)
    wait_until(lambda: _executing([rd]) and rd.read_state().get("pid")
               and rd.read_job().get("pid"), 120, "the run to start and record its pid")
    run = int(rd.read_state()["pid"])
    controller = int(rd.read_job()["pid"])
    (task,) = _children(controller)        # submitit's task: the job wrapper (supervise)
    assert _children(task) == [run]
    _kill_pool(results / "alone")
    for pid in (controller, task):
        os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert _executing([rd]) == [rd] and not _gpu_free(0)
    # the lock ends with the run
    assert main(["cancel", str(results / "alone")]) == 0
    wait_until(lambda: _gpu_free(0), 120, "GPU 0 to be free once the run stopped")
