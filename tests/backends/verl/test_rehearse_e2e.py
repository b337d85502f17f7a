"""End to end: ``ccpo-lab rehearse`` drives verl-agent's real trainer (CPU, the pinned
checkout) through the local Slurm, then every fact the rehearsal checks is asserted here
again from the files, independently of its own verdict.

Needs ``CCPO_LAB_VERL_AGENT`` (the pinned checkout) and ``CCPO_LAB_TRAINER_PYTHON`` (the
trainer environment ``scripts/verl-agent-contract.sh`` builds); ``make test`` sets both
when the checkout is given (``.ci/run`` gives ``../shared/verl-agent-796ed31``). What is
real: verl-agent's ``main_ppo`` -> ``TaskRunner`` -> ``RayPPOTrainer.fit`` with FSDP actor
and reference workers, the Hugging Face rollout, ALFWorld's engine on generated games,
``_validate``, ``Tracking``, checkpoints, ``model_merger``; ccpo-lab's launcher (Slurm),
executor, hooks, CPU adapter, ``verify``, ``report`` and ``sync``. Stand-ins: the model (a
tiny Qwen2 built and fitted on the spot) and torchvision (the CPU adapter's).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHECKOUT = os.environ.get("CCPO_LAB_VERL_AGENT")
TRAINER = os.environ.get("CCPO_LAB_TRAINER_PYTHON")
REPO = Path(__file__).resolve().parents[3]
ARMS = ("grpo", "ccpo-global-successor")
"""GRPO, and a CCPO arm whose baseline uses the reference pass's features (the global
gate's kernel baseline; ccpo-return-hard, with rho 0, captures them and discards them)."""

pytestmark = [
    pytest.mark.verl_agent, pytest.mark.rehearsal, pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT or not TRAINER, reason="needs CCPO_LAB_VERL_AGENT (a "
                       "verl-agent checkout) and CCPO_LAB_TRAINER_PYTHON (its trainer "
                       "environment): make test sets both when CCPO_LAB_VERL_AGENT is given"),
    pytest.mark.skipif(os.environ.get("CCPO_LAB_IN_TRAINER_ENV") == "1",
                       reason="runs in ccpo-lab's environment, not the trainer's"),
]


def _slurm_up() -> None:
    if shutil.which("sinfo") is None:
        pytest.skip("sinfo is not on PATH: no Slurm here (run `make slurm-up`)")
    r = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"the local Slurm is not up (run `make slurm-up`): {r.stderr.strip()}")


def _rows(path: Path) -> dict[int, dict[str, float]]:
    return {int(r["step"]): r["data"] for r in
            (json.loads(x) for x in path.read_text().splitlines() if x.strip())}


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    _slurm_up()
    results = tmp_path_factory.mktemp("rehearsal")
    argv = [sys.executable, "-m", "ccpo_lab.cli.main", "rehearse",
            str(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml"), f"arms=[{','.join(ARMS)}]",
            f"backend.verl.verl_agent_path={CHECKOUT}", f"backend.verl.python={TRAINER}",
            "launcher.partition=debug", "launcher.cpus_per_task=2", "launcher.mem_gb=10",
            "launcher.array_parallelism=1", "launcher.time_min=120",
            "--results", str(results)]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3 * 3600,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seconds = time.monotonic() - t0
    print(f"\nccpo-lab rehearse: exit {r.returncode} in {seconds:.0f} s\n{r.stdout}")
    (results / "rehearse.log").write_text(r.stdout + "\n---- stderr\n" + r.stderr)
    return {"rc": r.returncode, "out": r.stdout, "err": r.stderr, "results": results,
            "dir": results / "alfworld-qwen7b-rehearsal",
            "resume": results / "alfworld-qwen7b-rehearsal-resume", "seconds": seconds}


def test_rehearse_exits_0_with_every_check_passed(rehearsal: dict[str, object]) -> None:
    out = str(rehearsal["out"])
    assert rehearsal["rc"] == 0, out[-3000:] + str(rehearsal["err"])[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith(("PASS", "FAIL"))]
    names = [ln.split()[1] for ln in lines]
    assert names == ["trainer", "metrics", "advantages", "verify", "resume", "weights",
                     "report", "sync"], out
    assert all(ln.startswith("PASS") for ln in lines), out


def test_every_run_went_through_slurm_and_verl_agents_trainer(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    for arm in ARMS:
        for seed in (0, 1):
            rd = d / arm / f"seed-{seed}"
            state = json.loads((rd / "state.json").read_text())
            assert state["state"] == "completed", (rd, state)
            job = json.loads((rd / "job.json").read_text())
            assert job.get("launcher") == "slurm" and job.get("job_id"), job
            run = json.loads((rd / "run.json").read_text())
            assert run["cpu_adapter"]["active"] is True
            assert Path(run["verl_agent"]["path"]).resolve() == Path(str(CHECKOUT)).resolve()
            assert run["verl_agent"]["hooks_written_for"] == \
                "796ed310287fa605c9292a0fce07a86d79fde05e"
            assert "-m ccpo_lab.backends.verl.agent.trainer" in " ".join(run["trainer"]["argv"])
            log = (rd / "logs" / "trainer.log").read_text(errors="replace")
            assert "Training Progress: 100%" in log
            assert run["estimator_instantiated"]["name"] == ("ccpo" if "ccpo" in arm else arm)


def test_metrics_are_complete_finite_and_the_estimators_had_signal(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    step1 = {}
    for arm in ARMS:
        for seed in (0, 1):
            rows = _rows(d / arm / f"seed-{seed}" / "metrics.jsonl")
            assert sorted(rows) == [0, 1, 2]
            for t in (1, 2):
                row = rows[t]
                assert all(math.isfinite(float(v)) for v in row.values())
                assert float(row["actor/grad_norm"]) > 0
                assert 0 < float(row["episode/valid_action_ratio"]) < 1   # valid and invalid
            assert max(abs(float(rows[t]["critic/advantages/max"])) +
                       abs(float(rows[t]["critic/advantages/min"])) for t in (1, 2)) > 0
            if "ccpo" in arm:
                # CCPO's step term used the features captured in the real reference pass:
                # one vector of the tiny model's hidden size per row
                hidden = json.loads((d / "rehearsal.json").read_text())["model"]["spec"][
                    "hidden_size"]
                assert any(float(rows[t].get("adv/adv_step_absmean", 0)) > 0 for t in (1, 2))
                for t in (1, 2):
                    assert rows[t]["adv/phi_dim"] == hidden
                    assert rows[t]["adv/phi_norm_mean"] > 0
                    assert rows[t]["adv/phi_rows"] > 0
            else:
                assert "adv/phi_dim" not in rows[1]
            step1[(arm, seed)] = (rows[1]["critic/advantages/max"],
                                  rows[1]["critic/advantages/min"])
    for seed in (0, 1):   # identical rollouts, different estimators: different advantages
        assert step1[(ARMS[0], seed)] != step1[(ARMS[1], seed)]


def test_step1_identical_across_arms_distinct_within_groups_seeds_disjoint(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    fps = {(a, k): json.loads((d / a / f"seed-{k}" / "run.json").read_text())["step1"]
           ["fingerprint"] for a in ARMS for k in (0, 1)}
    for seed in (0, 1):
        assert fps[(ARMS[0], seed)] == fps[(ARMS[1], seed)]
    assert fps[(ARMS[0], 0)] != fps[(ARMS[0], 1)]
    for seed in (0, 1):
        eps = _jsonl(d / ARMS[0] / f"seed-{seed}" / "rollouts" / "step-000001.jsonl")
        by_task: dict[str, set[str]] = {}
        for e in eps:
            by_task.setdefault(str(e["task_id"]), set()).add(json.dumps(e["turns"]))
        assert all(len(v) > 1 for v in by_task.values())      # no group collapsed
    streams = [json.loads((d / ARMS[0] / f"seed-{k}" / "run.json").read_text())
               ["determinism"]["seeding"]["env_seed"] for k in (0, 1)]
    assert streams[0]["train_streams"][1] < streams[1]["train_streams"][0]
    verify = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "verify", str(d)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_run_stopped_after_its_checkpoint_resumes_and_logs_the_same(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    copy = Path(str(rehearsal["resume"])) / ARMS[0] / "seed-0"
    run = json.loads((copy / "run.json").read_text())
    assert run["trainer"]["resume_from_step"] == 1
    a, b = _rows(d / ARMS[0] / "seed-0" / "metrics.jsonl"), _rows(copy / "metrics.jsonl")
    assert sorted(a) == sorted(b) == [0, 1, 2]
    skip = ("timing_s/", "timing_per_token_ms/", "perf/")
    for t in a:
        x = {k: v for k, v in a[t].items() if not k.startswith(skip)}
        y = {k: v for k, v in b[t].items() if not k.startswith(skip)}
        assert set(x) == set(y)
        assert all(abs(float(x[k]) - float(y[k])) <= 1e-6 for k in x), t
    for t in (1, 2):
        ea = _jsonl(d / ARMS[0] / "seed-0" / "rollouts" / f"step-{t:06d}.jsonl")
        eb = _jsonl(copy / "rollouts" / f"step-{t:06d}.jsonl")
        assert [[u["action"] for u in e["turns"]] for e in ea] == \
            [[u["action"] for u in e["turns"]] for e in eb]


def test_the_merged_weights_load_and_generate(rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    paths = []
    for arm in ARMS:
        hf = json.loads((d / arm / "seed-0" / "run.json").read_text())["hf_model"]
        assert "error" not in hf["final"] and hf["final"]["step"] == 2
        paths += [hf["final"]["path"], hf["best"]["path"]]
    code = ("import sys, torch; from transformers import AutoModelForCausalLM, AutoTokenizer\n"
            "for p in sys.argv[1:]:\n"
            "    m = AutoModelForCausalLM.from_pretrained(p).eval()\n"
            "    t = AutoTokenizer.from_pretrained(p)\n"
            "    ids = t('look', return_tensors='pt', add_special_tokens=False)['input_ids']\n"
            "    out = m.generate(ids, max_new_tokens=4, do_sample=False, "
            "pad_token_id=t.pad_token_id)\n"
            "    assert out.shape[1] > ids.shape[1]\n"
            "print('loaded', len(sys.argv) - 1)")
    r = subprocess.run([str(TRAINER), "-c", code, *paths], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and f"loaded {len(paths)}" in r.stdout, r.stderr[-2000:]


def test_report_and_sync_read_the_rehearsal_like_any_sweep(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    assert (d / "report" / "report.md").is_file()
    assert (d / "mlflow.db").is_file()
    status = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "status", str(d)],
                            capture_output=True, text=True, timeout=300)
    assert status.returncode == 0 and "4 completed" in status.stdout, status.stdout


@pytest.fixture(scope="module")
def evaluated(rehearsal: dict[str, object]) -> dict[str, object]:
    """``ccpo-lab evaluate`` on the rehearsal: verl-agent's own validation loop with the
    final checkpoint loaded, in distribution for both arms of seed 0 (one common draw) and
    out of distribution for the first."""
    d = Path(str(rehearsal["dir"]))
    runs = []
    for args in (["--split", "in", "--seed", "0"],
                 ["--split", "out", "--seed", "0", "--arm", ARMS[0]]):
        argv = [sys.executable, "-m", "ccpo_lab.cli.main", "evaluate", str(d),
                "--checkpoint", "final", "--episodes", "4", *args, "--wait"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        runs.append(r)
    return {"dir": d, "runs": runs}


def test_evaluate_rescores_the_checkpoints_on_one_common_draw(
        evaluated: dict[str, object]) -> None:
    d = Path(str(evaluated["dir"]))
    for r in evaluated["runs"]:  # type: ignore[attr-defined]
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    files = {arm: sorted((d / arm / "seed-0" / "evals").glob("in-step000002-*.jsonl"))
             for arm in ARMS}
    heads = {arm: _jsonl(fs[0])[0] for arm, fs in files.items()}
    draws = {arm: h["draw"] for arm, h in heads.items()}
    assert draws[ARMS[0]] == draws[ARMS[1]]                   # one common draw
    assert len(draws[ARMS[0]]["games"]) == 4                  # type: ignore[index]
    for arm in ARMS:
        eps = _jsonl(files[arm][0])[1:]
        assert len(eps) == 4 and all(str(e["game"]).startswith("valid_seen/") for e in eps)
        assert heads[arm]["checkpoint"]["step"] == 2          # type: ignore[index]
    out = sorted((d / ARMS[0] / "seed-0" / "evals").glob("out-step000002-*.jsonl"))
    assert out and all(str(e["game"]).startswith("valid_unseen/") for e in _jsonl(out[0])[1:])
    rep = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "report", str(d),
                          "--format", "md"], capture_output=True, text=True, timeout=600)
    assert rep.returncode == 0 and "checkpoint evaluation" in rep.stdout.lower(), \
        rep.stdout[-2000:] + rep.stderr[-1000:]
