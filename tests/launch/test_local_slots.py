"""The local launcher's GPU slots: detection, slicing, and no slice shared at once."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
import time
from pathlib import Path

import cloudpickle
import pytest

from ccpo_lab.config.launchers.local import LocalSettings
from ccpo_lab.errors import UserError
from ccpo_lab.launch.slots import NUM_GPUS_ENV, SlotPool, detect_gpus, gpu_slots

# The job functions below run in submitit's subprocesses: pickle them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _local(**kw: object) -> LocalSettings:
    return dataclasses.replace(LocalSettings(), **kw)


def test_detect_gpus_reads_the_fake_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NUM_GPUS_ENV, "8")
    assert detect_gpus() == list(range(8))
    monkeypatch.setenv(NUM_GPUS_ENV, "eight")
    with pytest.raises(UserError) as e:
        detect_gpus()
    assert e.value.key == NUM_GPUS_ENV
    monkeypatch.delenv(NUM_GPUS_ENV)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert detect_gpus() == [4, 5, 6]


def test_slots_are_disjoint_slices() -> None:
    gpus = list(range(8))
    assert gpu_slots(_local(gpus_per_run=2, max_parallel=4), gpus) == [
        (0, 1), (2, 3), (4, 5), (6, 7)]
    assert gpu_slots(_local(gpus_per_run=2, max_parallel=16), gpus) == [
        (0, 1), (2, 3), (4, 5), (6, 7)]
    assert gpu_slots(_local(gpus_per_run=3, max_parallel=8), gpus) == [(0, 1, 2), (3, 4, 5)]
    assert gpu_slots(_local(gpus_per_run=8, max_parallel=2), gpus) == [tuple(range(8))]
    assert gpu_slots(_local(gpus_per_run=1, max_parallel=2), [4, 6]) == [(4,), (6,)]
    assert gpu_slots(_local(gpus_per_run=0, max_parallel=3), []) == [(), (), ()]


def test_too_few_gpus_is_a_user_error() -> None:
    with pytest.raises(UserError) as e:
        gpu_slots(_local(gpus_per_run=2, max_parallel=1), [0])
    assert e.value.key == "launcher.gpus_per_run" and "has 1" in str(e.value)


def _record(out: str, name: str, together: bool = True) -> str:
    """A job: note its CUDA_VISIBLE_DEVICES and when it ran. It ends only once another
    job has started (or after 30 s): a pool that runs jobs at once shows an overlap
    however slowly the machine starts processes, a serial pool shows none."""
    start = time.time()
    Path(out, f"{name}.started").write_text("")
    deadline = time.monotonic() + 30
    while together and len(list(Path(out).glob("*.started"))) < 2 \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    Path(out, f"{name}.json").write_text(json.dumps({
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start, "end": time.time()}))
    return name


@pytest.mark.slow
def test_parallel_runs_never_share_a_slice(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    monkeypatch.setenv(NUM_GPUS_ENV, "8")
    slots = gpu_slots(_local(gpus_per_run=2, max_parallel=4), detect_gpus())
    out = tmp_path / "out"
    out.mkdir()
    tasks = [(f"t{i}", functools.partial(_record, str(out), f"t{i}"), tmp_path / f"t{i}" / "%j")
             for i in range(8)]
    started: list[tuple[str, tuple[int, ...]]] = []
    jobs = SlotPool(slots, poll_s=0.05).run(
        tasks, on_start=lambda key, _job, slot: started.append((key, slot)))
    assert sorted(j.result() for j in jobs.values()) == sorted(t[0] for t in tasks)
    seen = {k: json.loads((out / f"{k}.json").read_text()) for k, _, _ in tasks}
    allowed = {",".join(map(str, s)) for s in slots}
    assert {v["cuda"] for v in seen.values()} <= allowed
    assert dict(started) == {k: tuple(int(x) for x in v["cuda"].split(","))
                             for k, v in seen.items()}
    overlapping = 0
    for (a, ra), (b, rb) in itertools.combinations(seen.items(), 2):
        if ra["start"] < rb["end"] and rb["start"] < ra["end"]:
            overlapping += 1
            assert ra["cuda"] != rb["cuda"], f"{a} and {b} ran at once on GPUs {ra['cuda']}"
    assert overlapping > 0, "the pool ran nothing in parallel"
    # never more runs at once than slots
    events = sorted([(v["start"], 1) for v in seen.values()]
                    + [(v["end"], -1) for v in seen.values()])
    assert max(itertools.accumulate(d for _, d in events)) <= len(slots)


@pytest.mark.slow
def test_cpu_slots_hide_the_gpus(tmp_path: Path) -> None:
    import functools

    out = tmp_path / "out"
    out.mkdir()
    jobs = SlotPool(gpu_slots(_local(gpus_per_run=0, max_parallel=2), [0, 1])).run(
        [("a", functools.partial(_record, str(out), "a", together=False),
          tmp_path / "a" / "%j")])
    assert jobs["a"].result() == "a"
    assert json.loads((out / "a.json").read_text())["cuda"] == ""


@pytest.mark.slow
def test_a_slice_held_by_another_sweep_waits(tmp_path: Path) -> None:
    import functools
    import threading

    from ccpo_lab.runs.gpulock import try_lock

    other = try_lock((0,))              # another sweep's pool runs on GPU 0
    assert other is not None
    released: list[float] = []

    def release() -> None:
        released.append(time.time())
        other.release()

    threading.Timer(1.0, release).start()
    out = tmp_path / "out"
    out.mkdir()
    t0 = time.time()
    jobs = SlotPool([(0,)], poll_s=0.05).run(
        [("a", functools.partial(_record, str(out), "a", together=False),
          tmp_path / "a" / "%j")])
    assert jobs["a"].result() == "a"
    rec = json.loads((out / "a.json").read_text())
    assert rec["cuda"] == "0"
    assert released and rec["start"] >= released[0] > t0
    again = try_lock((0,))              # the pool let go of GPU 0 when its run ended
    assert again is not None
    again.release()


@pytest.mark.slow
def test_the_pool_runs_its_jobs_with_the_runs_interpreter(tmp_path: Path) -> None:
    """``Needs.python`` (a verl run's ``backend.verl.python``): the local launcher's jobs
    run it, as Slurm's do, not the interpreter of the pool."""
    import functools
    import shlex

    used = tmp_path / "used"
    py = tmp_path / "trainer env" / "python"          # a space: the command is shell-quoted
    py.parent.mkdir()
    py.write_text(f"#!/bin/sh\necho \"$@\" >> {shlex.quote(str(used))}\n"
                  f"exec {shlex.quote(sys.executable)} \"$@\"\n")
    py.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    jobs = SlotPool([()], python=shlex.quote(str(py))).run(
        [("a", functools.partial(_record, str(out), "a", together=False),
          tmp_path / "a" / "%j")])
    assert jobs["a"].result() == "a"
    assert "-m submitit.core._submit" in used.read_text()
