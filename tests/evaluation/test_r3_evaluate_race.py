"""Reliability round 3 (issue 36), item 10: two ``evaluate --wait`` at once both end with
every evaluation done. A job another launch starts executing between this launch's
decision and its write (or an evaluation another job holds) is waited for, not counted
missing ("12 of 24 evaluations done; missing ...", exit 1, while the other completed)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.evaluation import launch as L
from ccpo_lab.runs.owner import lock_holders
from tests.conftest import wait_until
from tests.evaluation.test_evaluate_local import (  # noqa: F401 - sweep, trained: fixtures
    _job_process,
    rd,
    sweep,
    trained,
)

pytestmark = pytest.mark.slow


def _other_launch_starts(started: list[subprocess.Popen[bytes]], which: str
                         ) -> Any:
    """``decide``, after which "another launch" writes and starts the job of the first run
    to evaluate (``which``: this launch's job, or one of another request's keys)."""
    from ccpo_lab.evaluation.plan import decide
    from ccpo_lab.launch.display import make_console

    def hooked(root: Path, runs: Any, **kw: Any) -> Any:
        plans = decide(root, runs, **kw)
        first = next(p for p in plans if p.submit)
        if which == "same job":
            other = first
        else:  # another request (its final checkpoint only): another job id, shared keys
            final = max(t.target.step for t in first.decisions)
            runs_final = [type(first.evals)(first.evals.run, first.evals.rd,
                                            tuple(t for t in first.evals.targets
                                                  if t.step == final), first.evals.labels)]
            (other,) = decide(root, runs_final, **kw)
            assert other.job is not None and first.job is not None
            assert other.job.job_id != first.job.job_id
        (job,) = L._write_jobs([other], make_console())
        started.append(_job_process(job.path))
        wait_until(lambda: lock_holders(job) or started[-1].poll() is not None,
                   60, "the other launch's job to start", every=0.01)
        return plans

    return hooked


@pytest.mark.parametrize("which", ["same job", "shared keys"])
def test_a_job_another_launch_started_meanwhile_is_waited_for(
        sweep: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        capsys: pytest.CaptureFixture[str], which: str) -> None:
    started: list[subprocess.Popen[bytes]] = []
    monkeypatch.setattr(L, "decide", _other_launch_starts(started, which))
    try:
        code = main(["evaluate", str(sweep), "--checkpoint", "all", "--split", "in",
                     "--repeats", "3", "--arm", "grpo", "--seed", "0", "--launcher",
                     "inline", "--wait"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "missing" not in out and "3 of 3 evaluations done" in out
        assert len(list((rd(sweep, "grpo", 0).path / "evals").glob("in-*.jsonl"))) == 3
        assert started[0].wait(timeout=120) == 0
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=300)


def test_another_runs_job_with_the_same_keys_computes_nothing_for_this_run(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """Keys name an evaluation within its run: every run of a request has the same ones.
    A live job of grpo seed 0 made the other runs' evaluations "being evaluated by job
    ...": none was submitted, and the launch ended with them missing."""
    from ccpo_lab.evaluation.plan import decide, plan_evaluations
    from ccpo_lab.evaluation.spec import parse_request
    from ccpo_lab.launch.display import make_console

    args = ["--checkpoint", "all", "--split", "in", "--repeats", "3"]
    req = parse_request("all", "in", None, 3, None, "grpo", 0)
    (job,) = L._write_jobs(decide(sweep, plan_evaluations(sweep, req)[0]), make_console())
    proc = _job_process(job.path)
    try:
        wait_until(lambda: lock_holders(job) or proc.poll() is not None, 60,
                   "grpo seed 0's job to start", every=0.01)
        code = main(["evaluate", str(sweep), *args, "--launcher", "inline", "--wait"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "12 of 12 evaluations done" in out
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=300)
