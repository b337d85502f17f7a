"""``ccpo-lab rehearse`` without the trainer: its input checks (one line, exit 2, nothing
written), the rehearsal sweep it derives, and its checks on run directories written here.
The whole rehearsal, with verl-agent's trainer, is ``test_rehearse_e2e.py``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ccpo_lab.backends.verl import rehearsal as R
from ccpo_lab.backends.verl import rehearsal_checks as C
from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.runs.rollouts import write_rollouts
from tests.conftest import snapshot

REPO = Path(__file__).resolve().parents[3]
SLURM = REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml"
NODE = REPO / "sweeps" / "alfworld-qwen7b-node.yaml"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The smallest tree ``inspect_checkout`` takes for a verl-agent checkout."""
    root = tmp_path / "verl-agent"
    (root / "verl" / "trainer").mkdir(parents=True)
    (root / "verl" / "trainer" / "main_ppo.py").write_text("")
    return root


def _bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    work = tmp_path / "results"
    work.mkdir(exist_ok=True)
    before = snapshot(tmp_path)
    code = main(["rehearse", *args, "--results", str(work)])
    out = capsys.readouterr()
    assert code == 2, out
    assert snapshot(tmp_path) == before, "a bad input wrote something"
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.err
    return lines[0]


def test_a_local_backend_sweep_is_refused(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    line = _bad(tmp_path, capsys, [str(REPO / "sweeps" / "demo.yaml")])
    assert "demo.yaml: backend.kind: rehearse runs verl-agent's trainer" in line
    assert "'local'" in line and "valid: verl" in line


def test_a_missing_checkout_is_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    line = _bad(tmp_path, capsys, [str(SLURM), f"backend.verl.verl_agent_path={tmp_path}/no"])
    assert "backend.verl.verl_agent_path: verl-agent checkout not found" in line
    assert f"{tmp_path}/no" in line


def test_a_missing_trainer_interpreter_is_refused(tmp_path: Path, checkout: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    line = _bad(tmp_path, capsys, [str(SLURM), f"backend.verl.verl_agent_path={checkout}",
                                   "backend.verl.python=/nowhere/python3"])
    assert "backend.verl.python: trainer interpreter not found" in line
    assert "/nowhere/python3" in line


def test_a_local_model_path_that_does_not_exist_is_refused(
        tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _bad(tmp_path, capsys, [str(SLURM), f"backend.verl.verl_agent_path={checkout}",
                                   f"backend.verl.python={sys.executable}",
                                   "backend.verl.model_path=/data/models/qwen7b"])
    assert "backend.verl.model_path: model path does not exist" in line
    assert "/data/models/qwen7b" in line


def test_bad_rehearsal_sizes_are_usage_errors(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    line = _bad(tmp_path, capsys, [str(SLURM), "--steps", "1"])
    assert "--steps: must be in 2..20" in line and "1" in line
    line = _bad(tmp_path, capsys, [str(SLURM), "--device", "tpu"])
    assert "--device: unknown device" in line


def test_hub_ids_and_local_paths() -> None:
    assert not R._looks_local("Qwen/Qwen2.5-7B-Instruct")
    assert R._looks_local("/models/qwen") and R._looks_local("./qwen")
    assert R._looks_local("~/qwen") and R._looks_local("a/b/c")


CPU = R.Machine(python=sys.executable, gpus=0, torch="2.13.0", transformers="4.57.3")
ONE_GPU = R.Machine(python=sys.executable, gpus=1, torch="2.13.0", transformers="4.57.3")
INFO = {"longest_prompt_tokens": 300}


@pytest.mark.parametrize("sweep", [SLURM, NODE])
@pytest.mark.parametrize("machine,device", [(CPU, "cpu"), (ONE_GPU, "cuda")])
def test_the_rehearsal_sweep_is_the_sweeps_own_shrunk(sweep: Path, machine: R.Machine,
                                                      device: str, tmp_path: Path) -> None:
    """Every arm, the first two seeds, the sweep's estimator settings and the rest of its
    protocol; the layout fitted to the machine; its own name (so its own run ids)."""
    user = load_sweep(sweep)
    ov = R.rehearsal_overrides(user, device, machine, tmp_path / "games", tmp_path / "m",
                               INFO, R.RehearsalSettings())
    sw = load_sweep(sweep, ov)
    assert sw.name == f"{user.name}-rehearsal"
    assert [a.name for a in sw.arms] == [a.name for a in user.arms]
    assert sw.config.seeds == user.config.seeds[:2]
    run, orig = sw.runs[0], user.runs[0]
    assert run.estimator == orig.estimator
    assert {r.run_id for r in sw.runs}.isdisjoint({r.run_id for r in user.runs})
    p, q = run.protocol, orig.protocol
    assert p.total_steps == 2 and p.save_freq == 1 and p.test_freq == 1
    assert p.group_size == 4 and p.max_steps == 6 and p.max_prompt_length == 640
    for same in ("lr", "clip_ratio", "entropy_coeff", "kl_loss_coef", "invalid_action_penalty",
                 "train_temperature", "val_temperature", "history_length"):
        assert getattr(p, same) == getattr(q, same), same
    s = run.backend.verl
    assert s.model_path == str(tmp_path / "m")
    assert s.env["ALFWORLD_DATA"] == str(tmp_path / "games")
    assert s.env["CCPO_LAB_DUMP_ROLLOUTS"] == "all"
    if device == "cpu":
        assert (s.device, s.rollout_name, s.rollout_tp, s.n_gpus_per_node) == ("cpu", "hf", 1, 1)
    else:
        assert (s.device, s.rollout_name, s.rollout_tp, s.n_gpus_per_node) == \
            ("cuda", "vllm", 1, 1)
    assert sw.config.launcher.kind == user.config.launcher.kind


def test_the_rehearsal_keeps_a_launcher_override(tmp_path: Path) -> None:
    user = load_sweep(SLURM, ["launcher=inline"])
    ov = R.rehearsal_overrides(user, "cpu", CPU, tmp_path, tmp_path, INFO,
                               R.RehearsalSettings())
    assert load_sweep(SLURM, ["launcher=inline", *ov]).config.launcher.kind == "inline"


def test_the_resume_copy_drops_the_sweeps_launcher_keys(tmp_path: Path) -> None:
    """The resume check's copy runs inline: ``launcher.partition=...`` (a Slurm key the
    inline launcher lacks) would make its sweep a usage error (as it did in CI)."""
    mine = ["launcher.partition=debug", "launcher.cpus_per_task=2", "++launcher.mem_gb=10"]
    user = load_sweep(SLURM, mine)
    ov = R.rehearsal_overrides(user, "cpu", CPU, tmp_path, tmp_path, INFO,
                               R.RehearsalSettings())
    every = (*mine, *ov)
    sw = load_sweep(SLURM, list(every))
    reh = R.Rehearsal(sweep_file=str(SLURM), overrides=every, results=tmp_path, sweep=sw,
                      machine=CPU, device="cpu", settings=R.RehearsalSettings(),
                      model_info=INFO)
    copy = load_sweep(SLURM, reh.resume_overrides())
    assert copy.config.launcher.kind == "inline"
    assert [a.name for a in copy.arms] == [sw.arms[0].name]
    assert copy.config.seeds == sw.config.seeds[:1]
    assert {"launcher.partition=debug", "++launcher.mem_gb=10"}.isdisjoint(
        reh.resume_overrides())


def test_cuda_is_refused_where_the_trainer_sees_no_gpu() -> None:
    from ccpo_lab.errors import UserError

    with pytest.raises(UserError, match="--device: the trainer environment sees no CUDA"):
        R.choose_device(R.RehearsalSettings(device="cuda"), CPU)
    assert R.choose_device(R.RehearsalSettings(), CPU) == "cpu"
    assert R.choose_device(R.RehearsalSettings(), ONE_GPU) == "cuda"


# ----------------------------------------------------------------------- the checks
def _episodes(task_obs: list[str], actions: list[str], group: int = 2) -> list[dict[str, Any]]:
    eps = []
    for t, obs in enumerate(task_obs):
        for r in range(group):
            eps.append({"task_id": f"task-{t:04d}", "rollout": r, "task_type": "alfworld",
                        "turns": [{"t": 0, "obs": obs, "action": actions[r % len(actions)],
                                   "input_hash": "h", "valid": True, "reward": 0.0}]})
    return eps


def _run(root: Path, arm: str, seed: int, *, adv: float = 0.5, grad: float = 1.0,
         games: tuple[str, str] = ("g1", "g2"), state: str = "completed",
         streams: tuple[int, int] = (0, 1)) -> Path:
    d = root / arm / f"seed-{seed}"
    (d / "logs").mkdir(parents=True)
    (d / "logs" / "trainer.log").write_text("step:2 done\n")
    fp = write_rollouts(d / "rollouts", _episodes(list(games), ["go", "look"]))
    write_rollouts(d / "rollouts", _episodes(list(games), ["take", "look"]), step=2)
    (d / "run.json").write_text(json.dumps({
        "run_id": f"{arm}{seed}", "arm": arm, "seed": seed, "sweep": root.name,
        "trainer": {"argv": ["python"], "resume_from_step": None},
        "step1": {"fingerprint": fp},
        "determinism": {"seeding": {"env_seed": {"train_streams": list(streams),
                                                 "val_streams": [s + 1000 for s in streams]}}},
    }))
    (d / "state.json").write_text(json.dumps({"state": state, "step": 2}))
    rows = [{"step": 0, "data": {"val/success_rate": 0.0}}]
    for t in (1, 2):
        rows.append({"step": t, "data": {"actor/grad_norm": grad, "actor/pg_loss": 0.1,
                                         "critic/advantages/max": adv,
                                         "critic/advantages/min": -adv,
                                         "critic/advantages/mean": 0.0,
                                         "episode/valid_action_ratio": 0.7,
                                         "adv/adv_ep_absmean": adv, "timing_s/step": 9.0 + t,
                                         "val/success_rate": 0.25}})
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "config.yaml").write_text("{}\n")
    return d


def test_checks_pass_on_a_healthy_rehearsal_and_name_what_fails(tmp_path: Path) -> None:
    root = tmp_path / "s-rehearsal"
    _run(root, "grpo", 0, adv=0.5)
    _run(root, "ccpo", 0, adv=0.7)
    _run(root, "grpo", 1, adv=0.5, games=("g3", "g4"), streams=(10000, 10001))
    _run(root, "ccpo", 1, adv=0.7, games=("g3", "g4"), streams=(10000, 10001))
    runs = C.load_runs(root)
    est = {"grpo": ("grpo", []), "ccpo": ("ccpo", [])}
    assert C.check_trainer(runs, ["grpo", "ccpo"], [0, 1]).ok
    assert C.check_metrics(runs, 2).ok
    assert C.check_advantages(runs, est).ok
    assert C.check_verify(root, runs).ok, C.check_verify(root, runs).line()
    missing = C.check_trainer(runs, ["grpo", "ccpo", "gigpo"], [0, 1])
    assert not missing.ok and "gigpo seed 0" in missing.line()
    assert not C.check_metrics(runs, 3).ok and "step 3 missing" in C.check_metrics(runs, 3).detail
    same = C.check_advantages([r for r in runs if r.seed == 0] +
                              [C.RunView("gigpo", 0, runs[0].path, {}, {}, runs[0].rows)],
                              {**est, "gigpo": ("gigpo", [])})
    assert not same.ok and "identical step-1 advantages" in same.detail


def test_checks_catch_zero_gradients_zero_advantages_and_shared_streams(tmp_path: Path) -> None:
    root = tmp_path / "s-rehearsal"
    _run(root, "grpo", 0, adv=0.0, grad=0.0)
    _run(root, "grpo", 1, adv=0.0, streams=(1, 2))
    runs = C.load_runs(root)
    m = C.check_metrics(runs, 2)
    assert not m.ok and "actor/grad_norm is 0" in m.detail and "metrics.jsonl" in m.where
    a = C.check_advantages(runs, {"grpo": ("grpo", [])})
    assert not a.ok and "every advantage is 0" in a.detail
    v = C.check_verify(root, runs)
    assert not v.ok and "share environment stream seeds [1, 1001]" in v.detail


def test_resume_comparison_ignores_timing_and_finds_a_difference(tmp_path: Path) -> None:
    a = C.load_runs(_run(tmp_path / "a", "grpo", 0).parent.parent)[0]
    b_dir = _run(tmp_path / "b", "grpo", 0)
    rows = [json.loads(x) for x in (b_dir / "metrics.jsonl").read_text().splitlines()]
    rows[1]["data"]["timing_s/step"] = 99.0          # the machine's, not the run's
    (b_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    b = C.load_runs(b_dir.parent.parent)[0]
    assert C.compare_runs(a, b, 2) is None
    rows[2]["data"]["actor/pg_loss"] = 0.1 + 1e-5
    (b_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    b = C.load_runs(b_dir.parent.parent)[0]
    assert "step 2: actor/pg_loss" in str(C.compare_runs(a, b, 2))
    write_rollouts(b_dir / "rollouts", _episodes(["g1", "g2"], ["open", "look"]), step=2)
    rows[2]["data"]["actor/pg_loss"] = 0.1
    (b_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    b = C.load_runs(b_dir.parent.parent)[0]
    assert "step 2: episode 0 differs" in str(C.compare_runs(a, b, 2))


def test_the_resume_copy_of_a_paired_study_loads(tmp_path: Path) -> None:
    """The as-run study compares pairs of arms: its one-arm resume copy must not keep
    pairs (or a reference) naming arms it does not run."""
    study = REPO / "sweeps" / "alfworld-qwen7b-as-run.yaml"
    user = load_sweep(study, [])
    assert user.config.analysis.pairs
    ov = R.rehearsal_overrides(user, "cpu", CPU, tmp_path, tmp_path, INFO,
                               R.RehearsalSettings())
    sw = load_sweep(study, list(ov))
    reh = R.Rehearsal(sweep_file=str(study), overrides=tuple(ov), results=tmp_path, sweep=sw,
                      machine=CPU, device="cpu", settings=R.RehearsalSettings(),
                      model_info=INFO)
    copy = load_sweep(study, reh.resume_overrides())
    assert [a.name for a in copy.arms] == [sw.arms[0].name]
    assert copy.config.analysis.pairs == [] and copy.config.analysis.reference == \
        sw.arms[0].name
