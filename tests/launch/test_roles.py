"""Launcher roles (issue 25): job environments as tables, the watch loop's query back-off,
and the built-in launchers satisfying the role protocols."""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from ccpo_lab.launch.environment import INLINE, LOCAL, SLURM
from ccpo_lab.launch.inline import InlineLauncher
from ccpo_lab.launch.local import LocalLauncher
from ccpo_lab.launch.roles import Tracker
from ccpo_lab.launch.slurm import SlurmLauncher
from ccpo_lab.launch.watcher import QueryWatcher
from ccpo_lab.placement import Placement, this_host


def test_each_launcher_declares_its_job_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("SLURM_JOB_ID", "SUBMITIT_EXECUTOR"):
        monkeypatch.delenv(k, raising=False)
    assert [c.environment for c in (InlineLauncher, LocalLauncher, SlurmLauncher)] == [
        INLINE, LOCAL, SLURM]
    assert not any(e.active() for e in (INLINE, LOCAL, SLURM))
    assert INLINE() == this_host()
    assert SLURM.active({"SLURM_JOB_ID": "7"}) and not LOCAL.active({"SUBMITIT_EXECUTOR": "x"})
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "not-a-count")
    assert SLURM().cpus is None and SLURM().restarts == 0 and SLURM().job_id == "7"
    assert pickle.loads(pickle.dumps(SLURM)) == SLURM  # a RunJob carries it to the node


class _Flaky:
    scheduled = True

    def __init__(self) -> None:
        self.answers: list[dict[str, str] | None] = []
        self.asked = 0

    def query(self, jobs: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
        self.asked += 1
        return self.answers.pop(0)

    def reconcile(self, file_state: str, job: Mapping[str, Any], sched: str | None,
                  state: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def job_label(self, job: Mapping[str, Any], state: Mapping[str, Any]) -> str | None:
        return None

    def cancel(self, rows: Sequence[Any]) -> tuple[list[tuple[Any, str]], list[str]]:
        return [], []


def test_a_scheduler_that_does_not_answer_is_asked_less_often() -> None:
    now = [0.0]
    watcher = QueryWatcher(first_s=5, max_s=20, clock=lambda: now[0])
    flaky = _Flaky()
    tracker: Tracker = flaky
    flaky.answers = [None, None, None, None, {"1": "RUNNING"}, {"1": "COMPLETED"}]
    asked_at = []
    for t in range(0, 80):
        now[0] = float(t)
        before = flaky.asked
        got = watcher.query("slurm", tracker, [{"job_id": "1"}])
        if flaky.asked > before:
            asked_at.append((t, got))
        if len(asked_at) == 6:
            break
    # 5, 10, 20, then capped at 20; an answer resets the delay (asked again next time)
    assert [t for t, _ in asked_at] == [0, 5, 15, 35, 55, 56]
    assert asked_at[-2][1] == {"1": "RUNNING"}


def test_the_builtin_launchers_are_trackers() -> None:
    trackers: list[Tracker] = [InlineLauncher, LocalLauncher, SlurmLauncher]
    assert [t.scheduled for t in trackers] == [False, False, True]
    assert isinstance(Placement(), Placement)
