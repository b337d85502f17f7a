"""Issue 35, shared storage: every file honours the umask, a sweep directory moved
mid-study reads, resumes, reports and syncs as before, and a dry run's printed command
runs as printed (absolute paths)."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.layout import RunDir, stored_path, sweep_path
from tests.conftest import REPO

QUICK = ("seeds=[0]", "protocol.total_steps=2")


def _ccpo(cwd: Path, umask: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``ccpo-lab ARGS`` in a child whose umask is ``umask``."""
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=900, preexec_fn=lambda: os.umask(umask))


def _modes(root: Path) -> dict[str, set[str]]:
    """``{"files": {modes}, "dirs": {modes}}`` of everything under ``root``, as octal."""
    out: dict[str, set[str]] = {"files": set(), "dirs": set()}
    for p in [root, *root.rglob("*")]:
        st = p.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        out["dirs" if stat.S_ISDIR(st.st_mode) else "files"].add(oct(st.st_mode & 0o777))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, "0o644", "0o755"),
                                                               (0o027, "0o640", "0o750")])
def test_every_file_of_a_study_honours_the_umask(workdir: Path, umask: int, file_mode: str,
                                                 dir_mode: str) -> None:
    """A sweep (games generated, runs trained, checkpoints kept), its report folder and its
    MLflow store: every file and folder has the mode the umask gives (0600 before: the
    atomic writes' temporary files kept mkstemp's mode)."""
    results = workdir / "results"
    r = _ccpo(workdir, umask, "sweep", "sweeps/smoke.yaml", *QUICK, "launcher=inline",
              "--results", str(results))
    assert r.returncode == 0, r.stderr[-2000:]
    r = _ccpo(workdir, umask, "report", str(results / "smoke"), "--out",
              str(results / "smoke" / "report"))
    assert r.returncode == 0, r.stderr[-2000:]
    modes = _modes(results)
    assert modes == {"files": {file_mode}, "dirs": {dir_mode}}, modes


def test_job_paths_are_stored_relative_and_read_absolute(tmp_path: Path) -> None:
    sweep = tmp_path / "s"
    rd = RunDir(sweep / "grpo" / "seed-0")
    rd.path.mkdir(parents=True)
    log = rd.logs / "7" / "7_0_log.out"
    rd.record_job(launcher="local", job_id="7", stdout=str(log),
                  pool_queue=str(sweep / "_jobs" / "q.json"))
    raw = (rd.job_json).read_text()
    assert str(tmp_path) not in raw and '"grpo/seed-0/logs/7/7_0_log.out"' in raw
    assert rd.read_job()["stdout"] == str(log)
    moved = tmp_path / "elsewhere"
    shutil.move(sweep, moved)
    job = RunDir(moved / "grpo" / "seed-0").read_job()
    assert job["stdout"] == str(moved / "grpo" / "seed-0" / "logs" / "7" / "7_0_log.out")
    assert job["pool_queue"] == str(moved / "_jobs" / "q.json")


def test_absolute_paths_of_older_sweeps_are_re_rooted(tmp_path: Path) -> None:
    root = tmp_path / "now"
    old = "/old/place/results/demo/grpo/seed-1/logs/12/12_0_log.err"
    assert sweep_path(old, root, ("grpo", "seed-1")) == str(
        root / "grpo" / "seed-1" / "logs" / "12" / "12_0_log.err")
    assert sweep_path("/old/results/demo/_jobs/local-pool-1.json", root, ("grpo", "seed-1")) \
        == str(root / "_jobs" / "local-pool-1.json")
    assert sweep_path("/etc/passwd", root, ("grpo", "seed-1")) == "/etc/passwd"  # refused later
    assert stored_path("/elsewhere/x.log", root) == "/elsewhere/x.log"
    assert stored_path(str(root / "a" / "b"), root) == "a/b"


@pytest.mark.slow
def test_a_sweep_moved_mid_study_resumes_reports_and_syncs(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One arm done under the local launcher, the folder moved (rsync-like: cp -a, old
    one removed), then the rest of the study launched at the new place: status is clean
    (no 'outside the sweep directory', no unexplained marker), verify, report and sync
    work, and nothing in the moved folder names its old place."""
    first, second = workdir / "first", workdir / "second"
    args = ["sweep", str(workdir / "sweeps" / "smoke.yaml"), *QUICK]
    assert main([*args, "arms=[grpo]", "--results", str(first), "--wait"]) == 0
    second.mkdir()
    subprocess.run(["cp", "-a", str(first / "smoke"), str(second / "smoke")], check=True)
    shutil.rmtree(first)
    capsys.readouterr()
    assert main(["status", str(second / "smoke")]) == 0
    out = capsys.readouterr()
    assert "outside" not in out.out + out.err and "*" not in out.out, out.out
    assert main([*args, "--results", str(second), "--wait"]) == 0  # the other arm
    capsys.readouterr()
    assert main(["status", str(second / "smoke")]) == 0
    out = capsys.readouterr().out
    assert "2 runs: 2 completed" in out and "outside" not in out
    assert main(["verify", str(second / "smoke")]) == 0
    assert main(["report", str(second / "smoke")]) == 0
    assert main(["sync", str(second / "smoke")]) == 0
    for p in (second / "smoke").rglob("*.json"):  # (the games cache is outside the sweep)
        assert str(first / "smoke") not in p.read_text(errors="replace"), p


def test_the_dry_runs_printed_command_uses_absolute_paths(
        workdir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The verl command cds into the run's logs: every path after it must be absolute
    (before: results/... relative to the folder the dry run was typed in)."""
    monkeypatch.chdir(workdir)
    assert main(["sweep", "sweeps/alfworld-qwen7b-node.yaml", "--dry-run"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("cd "))
    words = shlex.split(line)
    assert words[0] == "cd" and Path(words[1]).is_absolute() and words[2] == "&&"
    for w in words[3:]:
        value = w.split("=", 1)[-1].strip("'")  # Hydra quotes the env_vars values
        if "results/" in value:
            assert Path(value).is_absolute(), w


def test_a_noted_run_s_marker_has_a_legend() -> None:
    from rich.console import Console

    from ccpo_lab.launch.display import status_table
    from ccpo_lab.launch.status import RunStatus

    row = RunStatus(path=Path("x"), arm="grpo", seed=0, state="completed",
                    file_state="completed", launcher="local", job_id=None, scheduler=None,
                    step=4, total=4, last_val=None, elapsed_s=None, stdout=None,
                    stderr=None, error=None, traceback=None, note="job.json unreadable")
    console = Console(width=100, record=True)
    console.print(status_table([row], "t"))
    text = console.export_text()
    assert "completed*" in text and "* a note on the run, below:" in text


def test_an_evaluation_jobs_paths_are_relative_to_the_sweep(tmp_path: Path) -> None:
    """An evaluation job lives deeper (``<run>/evals/jobs/<id>``): its paths are stored
    relative to the sweep too, and its pool's queue (in ``<sweep>/_jobs``) reads back
    where it is (re-rooted under ``<run>/evals`` before the fix: its pool looked dead and
    ``evaluate --wait`` gave up at once)."""
    import json

    from ccpo_lab.runs.evals import EvalJobDir

    sweep = tmp_path / "s"
    job = EvalJobDir(sweep / "grpo" / "seed-0" / "evals" / "jobs" / "abc")
    job.path.mkdir(parents=True)
    queue = sweep / "_jobs" / "local-pool-1.json"
    job.record_job(launcher="local", pool_queue=str(queue))
    job.update_job(pid=1, stdout=str(job.logs / "1" / "1_0_log.out"))
    job.update_job(started=1.0)
    raw = json.loads(job.job_json.read_text())
    assert raw["pool_queue"] == "_jobs/local-pool-1.json"
    assert raw["stdout"] == "grpo/seed-0/evals/jobs/abc/logs/1/1_0_log.out"
    assert job.read_job()["pool_queue"] == str(queue)
    moved = tmp_path / "t"
    shutil.move(sweep, moved)
    again = EvalJobDir(moved / "grpo" / "seed-0" / "evals" / "jobs" / "abc").read_job()
    assert again["pool_queue"] == str(moved / "_jobs" / "local-pool-1.json")
    old = "/old/s/grpo/seed-0/evals/jobs/abc/logs/1/1_0_log.err"
    assert sweep_path(old, moved, ("grpo", "seed-0", "evals", "jobs", "abc")) == str(
        moved / "grpo" / "seed-0" / "evals" / "jobs" / "abc" / "logs" / "1" / "1_0_log.err")
