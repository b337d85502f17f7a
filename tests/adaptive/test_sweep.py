"""An adaptive design driven by the sweep command, from the files alone (no training).

The runs are real run directories launched through a real launcher object that only
queues them (``tests/adaptive/studies.py``); a test completes them as a backend would.
What is checked: the listed seeds are the first look; a look is decided only when its
runs are complete, written before its seeds are launched, and never decided again; a
command killed between the decision and the launch loses nothing (the next one launches
the seeds, the look stays as it was); two commands never decide at once (the lock goes
with its holder's process); a changed design is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ccpo_lab.adaptive.launch import launch_adaptive
from ccpo_lab.adaptive.store import DesignLock, read_record
from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch import registry
from ccpo_lab.runs.layout import SweepDir
from tests.adaptive.studies import ARMS, adaptive_sweep, complete, queued, register
from tests.conftest import REPO, snapshot


@pytest.fixture(autouse=True)
def queue_launcher() -> Iterator[None]:
    register()
    yield
    registry.unregister("queue")


def _looks(sweep_dir: Path) -> int:
    record = read_record(SweepDir(sweep_dir))
    assert record is not None
    return len(record.state.looks)


def _first_look(tmp_path: Path) -> tuple[Path, Path]:
    """The sweep file and its directory after look 1 was decided and launched."""
    path = adaptive_sweep(tmp_path)
    results = tmp_path / "results"
    assert launch_adaptive(load_sweep(path), results) == 0
    sweep_dir = results / "adapt"
    for arm in ARMS:
        for seed in (0, 1, 2):
            complete(sweep_dir, arm, seed)
    assert launch_adaptive(load_sweep(path), results) == 0
    return path, sweep_dir


def test_looks_are_decided_from_the_files_and_launched(tmp_path: Path) -> None:
    path = adaptive_sweep(tmp_path)
    results = tmp_path / "results"
    sweep_dir = results / "adapt"
    # the first call launches the listed seeds; nothing can be decided yet
    assert launch_adaptive(load_sweep(path), results) == 0
    assert queued(sweep_dir) == {(a, s) for a in ARMS for s in (0, 1, 2)}
    assert _looks(sweep_dir) == 0
    complete(sweep_dir, "grpo", 0)
    assert launch_adaptive(load_sweep(path), results) == 0  # look 1 not complete yet
    assert _looks(sweep_dir) == 0
    for arm in ARMS:
        for seed in (0, 1, 2):
            if (arm, seed) != ("grpo", 0):
                complete(sweep_dir, arm, seed)
    assert launch_adaptive(load_sweep(path), results) == 0
    record = read_record(SweepDir(sweep_dir))
    assert record is not None
    (look,) = record.state.looks
    actions = {d.arm: d.action for d in look.decisions}
    assert actions == {"gigpo": "better", "ccpo-return-hard": "continue"}
    assert look.add == {"grpo": (3, 4, 5), "ccpo-return-hard": (3, 4, 5)}
    assert record.inputs[0]["gigpo"] == pytest.approx({0: 0.701, 1: 0.749, 2: 0.8})
    assert queued(sweep_dir) == {(a, s) for a in ARMS for s in (0, 1, 2)} | {
        (a, s) for a in ("grpo", "ccpo-return-hard") for s in (3, 4, 5)}
    # look 2: the open comparison reaches the maximum
    for arm in ("grpo", "ccpo-return-hard"):
        for seed in (3, 4, 5):
            complete(sweep_dir, arm, seed)
    assert launch_adaptive(load_sweep(path), results) == 0
    record = read_record(SweepDir(sweep_dir))
    assert record is not None and record.state.finished and len(record.state.looks) == 2
    (last,) = record.state.looks[1].decisions
    assert (last.arm, last.action, last.n_x, last.final) == ("ccpo-return-hard", "unresolved",
                                                             6, True)
    # finished: a rerun changes nothing and launches nothing
    before = snapshot(sweep_dir)
    assert launch_adaptive(load_sweep(path), results) == 0
    after = snapshot(sweep_dir)
    assert {k: v for k, v in after.items() if k != "adaptive.lock"} == \
        {k: v for k, v in before.items() if k != "adaptive.lock"}


def test_killed_between_decision_and_launch_loses_nothing(tmp_path: Path) -> None:
    path = adaptive_sweep(tmp_path)
    results = tmp_path / "results"
    sweep_dir = results / "adapt"
    assert launch_adaptive(load_sweep(path), results) == 0
    for arm in ARMS:
        for seed in (0, 1, 2):
            complete(sweep_dir, arm, seed)
    # a real process, killed (SIGKILL: no cleanup) right after look 1 is written
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.adaptive.studies import register
        register()
        import ccpo_lab.adaptive.launch as A
        from ccpo_lab.config.sweep import load_sweep
        real = A._launch
        def launch(sw, results, record, runs, **kw):
            if record.state.looks:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(sw, results, record, runs, **kw)
        A._launch = launch
        sys.exit(A.launch_adaptive(load_sweep({str(path)!r}), {str(results)!r}))
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    state = (sweep_dir / "adaptive.json").read_bytes()
    assert _looks(sweep_dir) == 1
    assert (sweep_dir / "ccpo-return-hard" / "seed-3").exists() is False  # not launched
    # the next command: the look is not decided again, its seeds are launched
    assert launch_adaptive(load_sweep(path), results) == 0
    assert (sweep_dir / "adaptive.json").read_bytes() == state
    assert {(a, s) for a in ("grpo", "ccpo-return-hard") for s in (3, 4, 5)} <= \
        queued(sweep_dir)
    assert ("gigpo", 3) not in queued(sweep_dir)


def test_a_second_command_waits_for_the_lock_then_refuses(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    path, sweep_dir = _first_look(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from ccpo_lab.adaptive.store import DesignLock
        from ccpo_lab.runs.layout import SweepDir
        with DesignLock(SweepDir(__import__("pathlib").Path({str(sweep_dir)!r}))):
            print("held", flush=True)
            time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setattr("ccpo_lab.adaptive.store.LOCK_WAIT_S", 0.5)
        before = snapshot(sweep_dir)
        with pytest.raises(UserError) as e:
            launch_adaptive(load_sweep(path), tmp_path / "results")
        assert "another ccpo-lab command" in str(e.value)
        assert f"pid {holder.pid}" in str(e.value)
        assert snapshot(sweep_dir) == before
    finally:
        holder.kill()  # the kernel frees its lock
        holder.wait()
    t0 = time.monotonic()
    with DesignLock(SweepDir(sweep_dir), wait_s=5.0):
        assert time.monotonic() - t0 < 2.0


def test_a_changed_design_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path, sweep_dir = _first_look(tmp_path)
    before = snapshot(sweep_dir)
    with pytest.raises(UserError) as e:
        launch_adaptive(load_sweep(path, ["analysis.adaptive.max_seeds=9"]),
                        tmp_path / "results")
    assert "another adaptive design" in str(e.value) and "design.max_seeds" in str(e.value)
    with pytest.raises(UserError) as e:
        launch_adaptive(load_sweep(path, ["analysis.window_start=25"]), tmp_path / "results")
    assert "scores.window_start" in str(e.value)
    assert snapshot(sweep_dir) == before


def test_a_failed_run_holds_the_look_until_it_is_retried(tmp_path: Path) -> None:
    path = adaptive_sweep(tmp_path)
    results = tmp_path / "results"
    sweep_dir = results / "adapt"
    assert launch_adaptive(load_sweep(path), results) == 0
    for arm in ARMS:
        for seed in (0, 1, 2):
            complete(sweep_dir, arm, seed)
    SweepDir(sweep_dir).run_dir("gigpo", 2).write_state("failed", error="RuntimeError: x")
    assert launch_adaptive(load_sweep(path), results) == 1
    assert _looks(sweep_dir) == 0
    job = SweepDir(sweep_dir).run_dir("gigpo", 2).read_job()
    assert launch_adaptive(load_sweep(path), results, retry_failed=True) == 0
    assert SweepDir(sweep_dir).run_dir("gigpo", 2).read_job()["submitted"] >= job["submitted"]
    assert len(SweepDir(sweep_dir).run_dir("gigpo", 2).read_job()["history"]) == 1
    assert _looks(sweep_dir) == 0


def test_unreadable_state_is_named_and_left_alone(tmp_path: Path) -> None:
    path, sweep_dir = _first_look(tmp_path)
    (sweep_dir / "adaptive.json").write_text("{not json")
    with pytest.raises(UserError) as e:
        launch_adaptive(load_sweep(path), tmp_path / "results")
    assert "adaptive.json" in str(e.value) and "cannot be read" in str(e.value)
    assert (sweep_dir / "adaptive.json").read_text() == "{not json"


def test_the_sweep_command_and_its_dry_run(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = adaptive_sweep(tmp_path)
    results = tmp_path / "results"
    assert main(["sweep", str(path), "--results", str(results), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "adaptive design: gigpo vs grpo, ccpo-return-hard vs grpo; 3 seeds first, +3 " \
           "per look up to 6 per arm" in out and "not started" in out
    assert "paired test, joint family (mean, own variance)" in out
    assert not results.exists()
    assert main(["sweep", str(path), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "adaptive look 1: 9 run(s) to finish first" in out
    sweep_dir = results / "adapt"
    for arm in ARMS:
        for seed in (0, 1, 2):
            complete(sweep_dir, arm, seed)
    assert main(["sweep", str(path), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "adaptive look 1 (seeds per arm: gigpo 3, grpo 3, ccpo-return-hard 3)" in out
    assert "gigpo vs grpo: better" in out
    assert main(["sweep", str(path), "--results", str(results), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "1 looks decided" in out and "seed-5" in out and "gigpo/seed-3" not in out
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    assert manifest["config"]["analysis"]["adaptive"]["max_seeds"] == 6


def test_the_lock_file_names_its_holder_only_while_held(tmp_path: Path) -> None:
    sweep = SweepDir(tmp_path / "s")
    with DesignLock(sweep):
        assert f"pid {os.getpid()}" in sweep.adaptive_lock.read_text()
    assert sweep.adaptive_lock.read_text() == ""


def test_a_bad_launcher_setting_writes_nothing(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = adaptive_sweep(tmp_path, launcher="local")
    monkeypatch.setenv("CCPO_LAB_NUM_GPUS", "2")
    with pytest.raises(UserError) as e:
        launch_adaptive(load_sweep(path, ["launcher.gpus_per_run=4"]), tmp_path / "results")
    assert e.value.key == "launcher.gpus_per_run"
    assert not (tmp_path / "results").exists()
