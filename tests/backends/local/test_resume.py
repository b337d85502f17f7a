"""A local run killed with SIGKILL and restarted ends identical to an uninterrupted one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ccpo_lab.backends.local.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    read_best,
    save_checkpoint,
)
from ccpo_lab.runs.cost import MEASURED_PREFIXES
from ccpo_lab.runs.metrics import read_metrics
from tests.backends.local.test_trainer import tiny_runs

STEPS = 8


def test_checkpoints_are_atomic_and_pruned(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, {"step": step, "w": torch.full((2,), float(step))})
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 3]
    (tmp_path / ".tmp-step-000004.pt.123").write_bytes(b"torn")
    newest = latest_checkpoint(tmp_path)
    assert newest is not None and newest.name == "step-000003.pt"
    state = load_checkpoint(newest)
    assert state["step"] == 3 and state["w"].tolist() == [3.0, 3.0]


def _trained(path: Path) -> list[tuple[int, dict]]:
    """The rows of a metrics file without the values that measure the machine."""
    return [(r["step"], {k: v for k, v in r["data"].items()
                         if not k.startswith(MEASURED_PREFIXES)}) for r in read_metrics(path)]


def test_a_checkpoint_whose_row_was_not_written_is_not_resumed_from(tmp_path: Path) -> None:
    """The local backend saves a step's checkpoint just before appending its row: a run
    killed in between resumes from the checkpoint before, so the row is not lost."""
    from ccpo_lab.backends.local.runner import resumable_checkpoint
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.runs.metrics import append_metrics

    rd = RunDir(tmp_path / "run")
    assert resumable_checkpoint(rd) is None
    for step in range(3):
        append_metrics(rd.metrics, step, {"x": float(step)})
    save_checkpoint(rd.checkpoints, 2, {"step": 2})
    save_checkpoint(rd.checkpoints, 4, {"step": 4})  # killed before row 4 was appended
    found = resumable_checkpoint(rd)
    assert found is not None and found.name == "step-000002.pt"
    append_metrics(rd.metrics, 3, {"x": 3.0})
    append_metrics(rd.metrics, 4, {"x": 4.0})
    found = resumable_checkpoint(rd)
    assert found is not None and found.name == "step-000004.pt"


# The killed run pauses where the test kills it, whatever the machine's load: before it
# saves step 4's checkpoint (so step 2's checkpoint and rows 0..3 are written), it writes
# ``paused`` beside the run and sleeps; the test waits for that file, not for a moment.
_PAUSE_AT_4 = """
import runpy, sys, time
from pathlib import Path
from ccpo_lab.backends.local import runner
save = runner.save_checkpoint
def pausing(folder, step, state, *args, **kwargs):
    if step >= 4 and Path(folder).name == "checkpoints":
        (Path(folder).parent / "paused").write_text(str(step))
        time.sleep(600)
    return save(folder, step, state, *args, **kwargs)
runner.save_checkpoint = pausing
sys.argv = ["ccpo_lab.runs.execute", *sys.argv[1:]]
runpy.run_module("ccpo_lab.runs.execute", run_name="__main__", alter_sys=True)
"""


def _execute(rd: Path, hash_seed: int, pause: bool = False) -> subprocess.Popen:
    # Each process gets its own str-hash seed, so nothing may depend on set/dict hash order.
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    head = ["-c", _PAUSE_AT_4] if pause else ["-m", "ccpo_lab.runs.execute"]
    return subprocess.Popen([sys.executable, *head, str(rd)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_sigkill_and_restart_reproduces_the_uninterrupted_run(tmp_path: Path,
                                                              workdir: Path) -> None:
    runs = tiny_runs(workdir, tmp_path / "games", steps=STEPS, save_freq=2)
    (_, whole), (_, killed) = runs[("gigpo", 0)], runs[("gigpo", 1)]
    # The same identity in a second directory: copy seed 0's config into seed 1's place.
    for name in ("config.yaml", "run.json", "state.json"):
        (killed.path / name).write_bytes((whole.path / name).read_bytes())

    ref = _execute(whole.path, 1)
    assert ref.wait(timeout=600) == 0, ref.stderr.read().decode()[-2000:] if ref.stderr else ""

    proc = _execute(killed.path, 2, pause=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if (killed.path / "paused").exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    assert [s for s, _ in list_checkpoints(killed.checkpoints)] == [2]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=300)
    rows_at_kill = read_metrics(killed.metrics)
    assert len(rows_at_kill) < STEPS + 1  # interrupted before the end
    assert killed.read_state()["state"] == "running"

    again = _execute(killed.path, 3)
    assert again.wait(timeout=600) == 0, again.stderr.read().decode()[-2000:] \
        if again.stderr else ""
    state = killed.read_state()
    assert state["state"] == "completed"
    assert state["summary"]["resumed_from"] is not None and state["summary"]["resumed_from"] >= 2

    # every value the training computes is identical; the timings and memory peaks
    # (timing_s/*, perf/*) measure the machine, and are there in every row
    assert _trained(killed.metrics) == _trained(whole.metrics)
    assert [r["step"] for r in read_metrics(killed.metrics)] == list(range(STEPS + 1))
    assert all(any(k.startswith(MEASURED_PREFIXES) for k in r["data"])
               for r in read_metrics(killed.metrics))
    a = (whole.rollouts / "step-000001.jsonl").read_bytes()
    assert (killed.rollouts / "step-000001.jsonl").read_bytes() == a
    best_a, best_b = read_best(whole.checkpoints), read_best(killed.checkpoints)
    assert best_a is not None and best_a == best_b  # the best checkpoint survives the kill
    kept_a = load_checkpoint(whole.checkpoints / "best" / best_a["file"])["trainer"]["policy"]
    kept_b = load_checkpoint(killed.checkpoints / "best" / best_b["file"])["trainer"]["policy"]
    assert all(torch.equal(kept_a[k], kept_b[k]) for k in kept_a)
    final_a = load_checkpoint(whole.checkpoints / f"step-{STEPS:06d}.pt")["trainer"]["policy"]
    final_b = load_checkpoint(killed.checkpoints / f"step-{STEPS:06d}.pt")["trainer"]["policy"]
    assert all(torch.equal(final_a[k], final_b[k]) for k in final_a)
