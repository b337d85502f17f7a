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


def _execute(rd: Path, hash_seed: int) -> subprocess.Popen:
    # Each process gets its own str-hash seed, so nothing may depend on set/dict hash order.
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    return subprocess.Popen([sys.executable, "-m", "ccpo_lab.runs.execute", str(rd)], env=env,
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

    proc = _execute(killed.path, 2)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if any(step >= 2 for step, _ in list_checkpoints(killed.checkpoints)):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    rows_at_kill = read_metrics(killed.metrics)
    assert len(rows_at_kill) < STEPS + 1  # interrupted before the end
    assert killed.read_state()["state"] == "running"

    again = _execute(killed.path, 3)
    assert again.wait(timeout=600) == 0, again.stderr.read().decode()[-2000:] \
        if again.stderr else ""
    state = killed.read_state()
    assert state["state"] == "completed"
    assert state["summary"]["resumed_from"] is not None and state["summary"]["resumed_from"] >= 2

    assert killed.metrics.read_text() == whole.metrics.read_text()
    assert [r["step"] for r in read_metrics(killed.metrics)] == list(range(STEPS + 1))
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
