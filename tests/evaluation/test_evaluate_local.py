"""``ccpo-lab evaluate`` end to end on the CPU backend: the real engine, real launchers.

The smoke sweep (2 arms x 2 seeds, 4 steps, checkpoints at steps 2 and 4 and the best
evaluation's) is trained once per module, inline; every test evaluates it (or a copy).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.runs.evals import eval_files, job_dirs, read_eval_file
from ccpo_lab.runs.layout import RunDir
from tests.conftest import snapshot, wait_until

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RUNS = [(a, s) for a in ("grpo", "ccpo-global-successor") for s in (0, 1)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke sweep, trained inline (its launcher kept: local)."""
    root = tmp_path_factory.mktemp("eval")
    sw = load_sweep(REPO / "sweeps" / "smoke.yaml", ["launcher=inline"])
    assert launch_sweep(sw, root / "results") == 0
    sweep = sw.sweep_dir(root / "results")
    manifest = json.loads((sweep / "sweep.json").read_text())
    manifest["launcher"] = {"kind": "local", "max_parallel": 2, "gpus_per_run": None}
    (sweep / "sweep.json").write_text(json.dumps(manifest))  # evaluate through local
    return sweep


@pytest.fixture
def sweep(trained: Path, tmp_path: Path) -> Path:
    """A fresh copy of the trained sweep (and its game cache) for one test."""
    dest = tmp_path / "results"
    shutil.copytree(trained.parent / ".games", dest / ".games")
    shutil.copytree(trained, dest / trained.name)
    return dest / trained.name


def rd(sweep: Path, arm: str, seed: int) -> RunDir:
    return RunDir(sweep / arm / f"seed-{seed}")


def evaluate(sweep: Path, *args: str) -> int:
    return main(["evaluate", str(sweep), "--launcher", "inline", *args])


def files(sweep: Path) -> dict[tuple[str, int], dict[str, object]]:
    return {(a, s): {p.stem: read_eval_file(p) for p in eval_files(rd(sweep, a, s))}
            for a, s in RUNS}


def test_every_run_plays_the_same_games_in_the_same_order(sweep: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert evaluate(sweep, "--checkpoint", "all", "--split", "both", "--wait") == 0
    out = capsys.readouterr().out
    assert "evaluations done; report: ccpo-lab report" in out
    found = files(sweep)
    for (arm, seed), evs in found.items():
        steps = {e.step for e in evs.values()}
        best = json.loads((rd(sweep, arm, seed).checkpoints / "best" / "best.json")
                          .read_text())["step"]
        assert steps == {2, 4, best}
        assert {e.split for e in evs.values()} == {"in", "out"}
        for e in evs.values():
            assert e.header["run_id"] == rd(sweep, arm, seed).read_run()["run_id"]
            assert e.success.shape == (1, 4) and e.header["temperature"] == 0.4
    for split, prefix in (("in", "valid_seen/"), ("out", "valid_unseen/")):
        draws = {(e.draw_id, e.games) for evs in found.values() for e in evs.values()
                 if e.split == split}
        assert len(draws) == 1  # one draw for every arm, seed and checkpoint
        (_, games), = draws
        assert games == tuple(f"{prefix}{i:05d}" for i in range(4))
    # one key per (step, setting): the same file name in every run directory
    finals = {k for evs in found.values() for k in evs if "-step000004-" in k}
    assert len(finals) == 2 and all(sum(k in evs for evs in found.values()) == 4
                                    for k in finals)


def _same_weights(src: RunDir, dst: RunDir, step: int) -> None:
    """Give ``dst``'s checkpoint of ``step`` the weights of ``src``'s (its own run id kept)."""
    theirs = torch.load(src.checkpoints / f"step-{step:06d}.pt", weights_only=True)
    mine = torch.load(dst.checkpoints / f"step-{step:06d}.pt", weights_only=True)
    mine["trainer"] = theirs["trainer"]
    torch.save(mine, dst.checkpoints / f"step-{step:06d}.pt")


def test_two_arms_of_a_seed_sample_with_the_same_seeds(sweep: Path) -> None:
    # With the same weights, two arms' episodes are identical game by game and repeat by
    # repeat: the games, their order and every sampling seed depend on (seed, game, repeat)
    # only, whatever the arm.
    a, b = rd(sweep, "grpo", 0), rd(sweep, "ccpo-global-successor", 0)
    _same_weights(a, b, 4)
    _same_weights(a, rd(sweep, "grpo", 1), 4)
    assert evaluate(sweep, "--checkpoint", "4", "--split", "both", "--repeats", "3",
                    "--temperature", "1.0", "--seed", "0", "--wait") == 0
    assert evaluate(sweep, "--checkpoint", "4", "--split", "in", "--repeats", "3",
                    "--temperature", "1.0", "--arm", "grpo", "--seed", "1", "--wait") == 0
    for fa in eval_files(a):
        fb = b.path / "evals" / fa.name
        ea, eb = read_eval_file(fa), read_eval_file(fb)
        assert ea.games == eb.games and ea.success.shape == (3, 4)
        for field in ("success", "reward", "turns", "invalid"):
            assert (getattr(ea, field) == getattr(eb, field)).all(), field
        lines_a = fa.read_text().splitlines()[1:]
        assert lines_a == fb.read_text().splitlines()[1:]
    other = read_eval_file(eval_files(rd(sweep, "grpo", 1))[0])
    same_in = read_eval_file(next(p for p in eval_files(a) if p.name.startswith("in-")))
    assert other.games == same_in.games  # another seed: the same draw of games


def test_sampling_seeds_are_per_seed_game_and_repeat() -> None:
    from ccpo_lab.backends.local.evaluate import episode_generators

    def draws(*args: object) -> list[float]:
        return [float(g.random()) for g in episode_generators(*args)]  # type: ignore[arg-type]

    base = draws(0, "in", [0, 1, 2], 0)
    assert base == draws(0, "in", [0, 1, 2], 0)
    assert draws(0, "in", [2, 1], 0) == base[:0:-1]  # a game's generator is its own
    for other in (draws(1, "in", [0, 1, 2], 0), draws(0, "in", [0, 1, 2], 1),
                  draws(0, "out", [0, 1, 2], 0)):
        assert all(a != b for a, b in zip(base, other, strict=True))


def test_a_finished_evaluation_is_never_redone(sweep: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate(sweep, "--split", "in", "--wait") == 0
    before = {p: p.read_bytes() for a, s in RUNS for p in eval_files(rd(sweep, a, s))}
    jobs = {j.path for a, s in RUNS for j in job_dirs(rd(sweep, a, s))}
    capsys.readouterr()
    assert evaluate(sweep, "--split", "in", "--wait") == 0
    out = capsys.readouterr().out
    assert out.count("done (its file exists)") == 4 and "0 evaluation job(s) to submit" in out
    assert {p: p.read_bytes() for p in before} == before
    assert {j.path for a, s in RUNS for j in job_dirs(rd(sweep, a, s))} == jobs
    # a changed setting gets its own file
    assert evaluate(sweep, "--split", "in", "--temperature", "1.0", "--arm", "grpo",
                    "--seed", "0", "--wait") == 0
    names = sorted(p.name for p in eval_files(rd(sweep, "grpo", 0)))
    assert len(names) == 2 and any("-t1.0-" in n for n in names)


@pytest.mark.parametrize(("args", "message"), [
    (["--checkpoint", "3"], "grpo seed 0: no checkpoint at this step (got 3); valid: steps"),
    (["--checkpoint", "later"], "--checkpoint: not a checkpoint (got 'later')"),
    (["--split", "sideways"], "--split: unknown split (got 'sideways'); valid: in, out, both"),
    (["--split", "in", "--episodes", "5"], "grpo seed 0: 5 games is out of range for split "
     "'in' (the run's 4 held-out games, backend.local.n_eval_games) (got 5); valid: 1..4"),
    (["--episodes", "0"], "--episodes: must be an integer >= 1"),
    (["--repeats", "0"], "--repeats: must be an integer in 1..1000"),
    (["--temperature", "-1"], "--temperature: must be in [0, 100]"),
    (["--arm", "nope"], "--arm: no such arm in this sweep (got 'nope')"),
    (["--seed", "7"], "--seed: no such seed in this sweep (got 7)"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
        sweep: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(sweep)
    assert evaluate(sweep, *args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert snapshot(sweep) == before


def test_a_run_that_is_not_finished_has_no_final_checkpoint(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = rd(sweep, "ccpo-global-successor", 1)
    r.write_state("interrupted", step=2)
    before = snapshot(sweep)
    assert evaluate(sweep, "--checkpoint", "final") == 2
    err = capsys.readouterr().err
    assert "ccpo-global-successor seed 1: no final checkpoint: the run is not finished " \
           "(state interrupted, step 2 of 4)" in err and str(r.path) in err
    assert snapshot(sweep) == before
    assert evaluate(sweep, "--checkpoint", "best", "--arm", "ccpo-global-successor",
                    "--seed", "1", "--wait") == 0  # its best checkpoint is there


def _job_process(job: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ccpo_lab.runs.execute", str(job)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_a_killed_job_resumes_at_its_next_repeat_and_ends_identical(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.evaluation.launch import _write_jobs
    from ccpo_lab.evaluation.plan import decide, plan_evaluations
    from ccpo_lab.evaluation.spec import parse_request
    from ccpo_lab.launch.display import make_console

    req = parse_request("final", "in", None, 6, 1.0, "grpo", 0)
    (plan,) = decide(sweep, plan_evaluations(sweep, req)[0])
    (job,) = _write_jobs([plan], make_console())
    (target,) = plan.to_run
    proc = _job_process(job.path)
    wait_until(lambda: job.partial_file(target.key, 1).is_file() or proc.poll() is not None,
               120, "two repeats", every=0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=300)
    kept = sorted(p.name for p in (job.partial / target.key).iterdir())
    assert kept and len(kept) < 6, kept  # killed mid-way, its finished repeats kept
    first = job.partial_file(target.key, 0).read_bytes()
    capsys.readouterr()
    assert main(["status", str(sweep)]) == 0
    assert "interrupted" in capsys.readouterr().out
    assert evaluate(sweep, "--checkpoint", "final", "--split", "in", "--repeats", "6",
                    "--temperature", "1.0", "--arm", "grpo", "--seed", "0", "--wait") == 0
    assert f"job {job.job_id}: resume" in capsys.readouterr().out
    resumed = read_eval_file(eval_files(rd(sweep, "grpo", 0))[0])
    assert not (job.partial / target.key).exists()
    # the same evaluation, uninterrupted, in another job: identical episodes
    again = json.loads(first)
    shutil.rmtree(job.path)
    for p in eval_files(rd(sweep, "grpo", 0)):
        p.rename(p.with_suffix(".kept"))
    assert evaluate(sweep, "--checkpoint", "final", "--split", "in", "--repeats", "6",
                    "--temperature", "1.0", "--arm", "grpo", "--seed", "0", "--wait") == 0
    whole = read_eval_file(eval_files(rd(sweep, "grpo", 0))[0])
    for field in ("success", "reward", "turns", "invalid"):
        assert (getattr(resumed, field) == getattr(whole, field)).all(), field
    assert [e["success"] for e in again["episodes"]] == whole.success[0].tolist()


def test_status_and_cancel_cover_evaluation_jobs(sweep: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.evaluation.launch import _write_jobs
    from ccpo_lab.evaluation.plan import decide, plan_evaluations
    from ccpo_lab.evaluation.spec import parse_request
    from ccpo_lab.evaluation.track import eval_status
    from ccpo_lab.launch.display import make_console

    req = parse_request("final", "both", None, 200, 1.0, "grpo", None)
    plans = decide(sweep, plan_evaluations(sweep, req)[0])
    jobs = _write_jobs(plans, make_console())
    assert len(jobs) == 2
    for j in jobs:
        j.record_job(launcher="local", pool_queue=str(sweep / "_jobs" / "gone.json"))
    proc = _job_process(jobs[0].path)
    wait_until(lambda: any(r.state == "running" for r in eval_status(sweep)), 60,
               "the job to start")
    capsys.readouterr()
    assert main(["status", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "evaluation jobs of smoke (step: episodes played)" in out
    assert "running" in out and "pending" in out
    status = json.loads((lambda: (main(["status", str(sweep), "--json"]),
                                  capsys.readouterr().out)[1])())
    evals = [r for r in status if "evaluation" in r]
    assert {r["evaluation"]["job"] for r in evals} == {j.job_id for j in jobs}
    assert main(["cancel", str(sweep), "--arm", "grpo", "--grace", "20"]) == 0
    out = capsys.readouterr().out
    assert out.count("cancelled the evaluation job of grpo seed") == 2
    assert proc.wait(timeout=300) == 130
    assert {r.state for r in eval_status(sweep)} == {"cancelled"}
    # a relaunch resumes them
    assert evaluate(sweep, "--checkpoint", "final", "--split", "both", "--repeats", "200",
                    "--temperature", "1.0", "--arm", "grpo", "--seed", "1", "--dry-run") == 0
    assert "resume" in capsys.readouterr().out


def test_the_report_shows_the_tables_and_refuses_another_draw(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.runs.evals import write_eval_file

    assert evaluate(sweep, "--checkpoint", "final", "--split", "both", "--wait") == 0
    assert evaluate(sweep, "--checkpoint", "best", "--split", "both", "--wait") == 0
    capsys.readouterr()
    assert main(["report", str(sweep)]) == 0
    out = capsys.readouterr().out
    assert "checkpoint evaluation 1: the final checkpoint, in distribution" in out
    assert "the final checkpoint, out of distribution" in out
    assert "the best checkpoint: training-time score against its re-score" in out
    assert "where the uncertainty comes from: seeds or episodes" in out
    ev = build_report(sweep).model.evaluation
    assert ev is not None
    final_in = next(g for g in ev.groups if (g.checkpoint, g.split) == ("final", "in"))
    assert [a.n_seeds for a in final_in.arms] == [2, 2] and not final_in.left_out
    assert final_in.comparisons[0].n_pairs == 2
    # one run's file, rewritten on another game order: a valid file, another draw
    victim = next(p for p in eval_files(rd(sweep, "grpo", 1)) if p.name.startswith("in-")
                  and "step000004" in p.name)
    lines = [json.loads(x) for x in victim.read_text().splitlines()]
    head, eps = lines[0], lines[1:]
    head["draw"]["games"] = head["draw"]["games"][::-1]
    head["draw"]["id"] = "f" * 12
    for e in eps:
        e["game"] = head["draw"]["games"][e["i"]]
    write_eval_file(victim, head, eps)
    rep = build_report(sweep).model
    assert rep.evaluation is not None
    final_in = next(g for g in rep.evaluation.groups if (g.checkpoint, g.split) == ("final",
                                                                                  "in"))
    assert [a.n_seeds for a in final_in.arms] == [1, 2]
    assert any("grpo seed 1: its game list differs from its siblings'" in n.text
               for n in rep.notes)


def test_the_local_launcher_runs_the_jobs_in_its_pool(sweep: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert main(["evaluate", str(sweep), "--split", "out", "--wait"]) == 0
    out = capsys.readouterr().out
    assert "started a local pool" in out and "4 of 4 evaluations done" in out
    for a, s in RUNS:
        (job,) = job_dirs(rd(sweep, a, s))
        assert job.read_job()["launcher"] == "local" and job.read_state()["state"] == \
            "completed"
        assert any((job.logs).rglob("*_log.out"))


@pytest.mark.slurm
def test_slurm_runs_the_jobs_as_an_array(sweep: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("sinfo") is None or subprocess.run(
            ["scontrol", "ping"], capture_output=True, timeout=15).returncode != 0:
        pytest.skip("no local Slurm (make slurm-up)")
    assert main(["evaluate", str(sweep), "--split", "in", "--launcher", "slurm",
                 "--wait"]) == 0
    out = capsys.readouterr().out
    assert "submitted 4 runs as 1 Slurm job array" in out
    assert "4 of 4 evaluations done" in out
    for a, s in RUNS:
        (job,) = job_dirs(rd(sweep, a, s))
        assert job.read_job()["launcher"] == "slurm" and job.read_job()["array_job_id"]
        assert job.read_state()["state"] == "completed"


@pytest.mark.slurm
def test_a_requeued_slurm_job_resumes_and_ends_identical(sweep: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    if shutil.which("sinfo") is None or subprocess.run(
            ["scontrol", "ping"], capture_output=True, timeout=15).returncode != 0:
        pytest.skip("no local Slurm (make slurm-up)")
    args = ["--checkpoint", "final", "--split", "in", "--repeats", "150", "--temperature",
            "1.0", "--arm", "grpo", "--seed", "0"]
    assert main(["evaluate", str(sweep), *args, "--launcher", "slurm"]) == 0
    (job,) = job_dirs(rd(sweep, "grpo", 0))
    request = json.loads(job.request_json.read_text())
    key = request["keys"][0]
    wait_until(lambda: job.partial_file(key, 5).is_file(), 120, "five repeats", every=0.05)
    # timeout/preemption: Slurm's USR2 -> submitit checkpoints the job and requeues it
    subprocess.run(["scancel", "--signal=USR2", str(job.read_job()["job_id"])], check=True)
    wait_until(lambda: job.read_state().get("state") == "requeued" or
               job.read_state().get("restarts", 0) >= 1, 60, "the requeue")
    wait_until(lambda: job.read_state().get("state") == "completed", 300, "completion")
    assert job.read_state()["restarts"] >= 1
    slurm = read_eval_file(eval_files(rd(sweep, "grpo", 0))[0])
    # the same evaluation inline, uninterrupted
    for p in eval_files(rd(sweep, "grpo", 0)):
        p.rename(p.with_suffix(".slurm"))
    shutil.rmtree(job.path)
    assert evaluate(sweep, *args, "--wait") == 0
    whole = read_eval_file(eval_files(rd(sweep, "grpo", 0))[0])
    for field in ("success", "reward", "turns", "invalid"):
        assert (getattr(slurm, field) == getattr(whole, field)).all(), field


def test_a_dry_run_prints_the_plan_and_the_command_and_writes_nothing(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(sweep)
    assert main(["evaluate", str(sweep), "--checkpoint", "best", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("best]") == 8 and "python -m ccpo_lab.runs.execute" in out
    assert "4 evaluation job(s) to submit; launcher local: 1 CPU slot, 2 at once (dry run, " \
           "nothing written)" in out
    assert snapshot(sweep) == before
