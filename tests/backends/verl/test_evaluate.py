"""The verl backend's evaluation: verl-agent's validation loop, eval-only, on a checkpoint.

Without GPUs, the trainer itself cannot run here: the command is checked against
verl-agent's key list (every plain key exists in its ``ppo_trainer.yaml``, every ``++`` key
does not) and, where ``CCPO_LAB_VERL_AGENT`` names the pinned checkout, composed with
Hydra against that checkout's own ``ppo_trainer.yaml``; the checkpoint hand-over, the
episode records hook and the repeat's orchestration are run on files shaped as
verl-agent writes them.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

from ccpo_lab.backends.verl import eval_hooks
from ccpo_lab.backends.verl import evaluate as V
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.evaluation.spec import EvalSetting, EvalTarget
from ccpo_lab.runs.evals import job_dir
from ccpo_lab.runs.layout import RunDir, init_run_dir
from tests.backends.verl.conftest import run_dir, sweep_runs
from tests.backends.verl.test_compose import _split, verl_agent_keys

CHECKOUT = os.environ.get("CCPO_LAB_VERL_AGENT")
RANKS = 8


def _fake_run(tmp: Path, run: RunConfig, *, best: int = 70, final: bool = True) -> RunDir:
    """A completed run with verl-agent's checkpoint layout (shards of 8 ranks)."""
    rd = run_dir(tmp, run)
    init_run_dir(rd, run)
    actor = rd.checkpoints / "global_step_150" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for kind in ("model", "optim", "extra_state"):
        for r in range(RANKS):
            (actor / f"{kind}_world_size_{RANKS}_rank_{r}.pt").write_bytes(f"{kind}{r}".encode())
    (actor / "huggingface" / "config.json").write_text("{}")
    (rd.checkpoints / "latest_checkpointed_iteration.txt").write_text("150")
    (rd.checkpoints / "best").mkdir(parents=True)
    (rd.checkpoints / "best" / "best.json").write_text(json.dumps(
        {"step": best, "value": 0.8, "metric": "val/success_rate"}))
    if best > 0:
        (rd.path / "hf_model" / "best").mkdir(parents=True)
        (rd.path / "hf_model" / "best" / "config.json").write_text("{}")
    if final:
        rd.write_state("completed", step=150)
    return rd


def _target(run: RunConfig, rd: RunDir, step: int, split: str = "in", n: int = 128,
            repeats: int = 1, temp: float = 0.4) -> EvalTarget:
    s = EvalSetting(split, n, repeats, temp)
    return EvalTarget(step, s, V.draw(run, rd, s))


def _ov(cmd: object) -> dict[str, str]:
    out = {}
    for o in cmd.overrides:  # type: ignore[attr-defined]
        key, _, value = o.partition("=")
        assert key not in out, f"{key} set twice"
        out[key] = value
    return out


def test_checkpoints_final_best_and_how_each_is_loaded(tmp_path: Path) -> None:
    run = sweep_runs("alfworld-qwen7b-slurm")[0]
    rd = _fake_run(tmp_path, run)
    cps = V.checkpoints(run, rd)
    assert cps.final == 150 and cps.best == 70 and sorted(cps.steps) == [70, 150]
    assert V.weights(run, rd, 150)[0] == "resume" and V.weights(run, rd, 70) == (
        "model", None, str(rd.path / "hf_model" / "best"))
    rd.write_state("running", step=120)
    assert V.checkpoints(run, rd).final is None
    assert "not finished (state running)" in V.checkpoints(run, rd).final_why
    base = _fake_run(tmp_path / "b", run, best=0)
    assert V.checkpoints(run, base).best == 0 and V.weights(run, base, 0)[0] == "base"


def test_the_command_validates_the_checkpoint_with_every_key_verl_agent_has(
        tmp_path: Path) -> None:
    keys = verl_agent_keys()
    runs = sweep_runs("alfworld-qwen7b-slurm")
    commands = []
    for run in [r for r in runs if r.seed in (0, 1)][:4]:
        rd = _fake_run(tmp_path, run)
        job = job_dir(rd, "0123456789ab")
        for step, split in ((150, "in"), (70, "out")):
            t = _target(run, rd, step, split, n=64, temp=0.6)
            cmd = V.eval_command(run, rd, t, 1, V.work_dir(job, t, 1))
            commands.append((run, step, split, cmd))
            for o in cmd.overrides:
                prefix, key, _ = _split(o)
                if prefix:
                    assert prefix == "++" and key not in keys, key
                else:
                    assert key in keys, f"{key} is not a key of verl-agent's ppo_trainer.yaml"
    for run, step, split, cmd in commands:
        ov = _ov(cmd)
        work = Path(cmd.cwd).parent
        assert ov["trainer.val_only"] == "True" and ov["trainer.val_before_train"] == "True"
        assert ov["env.alfworld.eval_dataset"] == ("eval_in_distribution" if split == "in"
                                                   else "eval_out_of_distribution")
        assert ov["data.val_batch_size"] == "64"
        assert ov["actor_rollout_ref.rollout.val_kwargs.temperature"] == "0.6"
        assert ov["actor_rollout_ref.rollout.val_kwargs.do_sample"] == "True"
        assert ov["actor_rollout_ref.rollout.val_kwargs.n"] == "1"
        assert ov["env.seed"] == str(run.protocol.env_seed + V.EVAL_ENV_SEED)  # every run
        assert ov["trainer.default_local_dir"] == str(work / "checkpoints")
        assert ov["++ray_init.runtime_env.worker_process_setup_hook"] == V.SETUP_HOOK
        env = "++ray_init.runtime_env.env_vars."
        assert ov[env + "CCPO_LAB_EVAL_EPISODES"] == f"'{work / V.EPISODES_FILE}'"
        assert ov[env + "CCPO_LAB_SEED"] == f"'{V.repeat_seed(run.seed, 1)}'"
        assert ov[env + "VERL_FILE_LOGGER_PATH"] == f"'{work / 'metrics.jsonl'}'"
        assert cmd.env["CCPO_LAB_SEED"] == str(V.repeat_seed(run.seed, 1)) != str(run.seed)
        if step == 150:
            assert ov["trainer.resume_mode"] == "resume_path"
            assert ov["trainer.resume_from_path"] == str(work / "resume" / "global_step_0")
            assert "actor_rollout_ref.model.path" in ov  # the base model, overwritten
        else:
            assert ov["trainer.resume_mode"] == "disable"
            assert "trainer.resume_from_path" not in ov
            assert ov["actor_rollout_ref.model.path"].endswith("hf_model/best")
    assert V.repeat_seed(3, 0) == 3
    assert len({V.repeat_seed(3, r) for r in range(50)}) == 50


def test_the_draw_is_the_same_for_every_arm_and_seed(tmp_path: Path) -> None:
    runs = sweep_runs("alfworld-qwen7b-slurm")
    targets = {_target(r, run_dir(tmp_path, r), 150).key.split("-", 2)[2] for r in runs}
    assert len(targets) == 1
    other = _target(runs[0], run_dir(tmp_path, runs[0]), 150, split="out")
    assert other.draw_id != _target(runs[0], run_dir(tmp_path, runs[0]), 150).draw_id


@pytest.mark.skipif(not CHECKOUT, reason="CCPO_LAB_VERL_AGENT is unset: no verl-agent "
                    "checkout to compose against")
def test_the_command_composes_against_the_pinned_checkouts_config(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    cfg_dir = str(Path(str(CHECKOUT)) / "verl" / "trainer" / "config")
    run = sweep_runs("alfworld-qwen7b-node")[0]
    rd = _fake_run(tmp_path, run)
    job = job_dir(rd, "0123456789ab")
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        for step, split in ((150, "in"), (70, "out")):
            t = _target(run, rd, step, split, n=32, repeats=2, temp=0.0)
            cmd = V.eval_command(run, rd, t, 0, V.work_dir(job, t, 0))
            cfg = compose(config_name="ppo_trainer", overrides=list(cmd.overrides))
            assert cfg.trainer.val_only is True and cfg.trainer.val_before_train is True
            assert cfg.data.val_batch_size == 32
            assert cfg.env.alfworld.eval_dataset == V.EVAL_DATASETS[split]
            assert cfg.actor_rollout_ref.rollout.val_kwargs.temperature == 0.0
            assert cfg.actor_rollout_ref.rollout.val_kwargs.do_sample is False
            assert cfg.actor_rollout_ref.rollout.val_kwargs.n == 1
            assert cfg.env.seed == V.EVAL_ENV_SEED
            assert cfg.ray_init.runtime_env.worker_process_setup_hook == V.SETUP_HOOK
            if step == 150:
                # what ray_trainer._load_checkpoint reads with resume_mode=resume_path
                assert cfg.trainer.resume_mode == "resume_path"
                assert "global_step_" in cfg.trainer.resume_from_path
                assert int(cfg.trainer.resume_from_path.split("global_step_")[-1]) == 0
            else:
                assert cfg.trainer.resume_mode == "disable"
                assert cfg.actor_rollout_ref.model.path == str(rd.path / "hf_model" / "best")


def _verl_batch() -> dict[str, object]:
    """``success_evaluator``'s arguments for 3 environments (as verl-agent passes them)."""
    game = "/data/json_2.1.1/valid_seen/{}/trial_T{}/game.tw-pddl"
    infos = [[{"won": False, "extra.gamefile": game.format("pick_and_place_simple-Book-None-"
                                                           "Desk-308", 1)},
              {"won": True, "extra.gamefile": game.format("pick_and_place_simple-Book-None-"
                                                          "Desk-308", 1)},
              {"won": True}],
             [{"won": False, "extra.gamefile": game.format("look_at_obj_in_light-CD-None-"
                                                           "DeskLamp-308", 2)}] * 3,
             [{"won": False, "extra.gamefile": game.format("pick_two_obj_and_place-Pen-"
                                                           "None-Drawer-301", 3)}] * 3]
    items = [[{"active_masks": True, "is_action_valid": False},
              {"active_masks": True, "is_action_valid": True},
              {"active_masks": False, "is_action_valid": True}],
             [{"active_masks": True, "is_action_valid": True}] * 3,
             [{"active_masks": True, "is_action_valid": False}] * 3]
    return {"total_infos": infos, "total_batch_list": items,
            "episode_rewards": [10.0, 0.0, -0.3], "episode_lengths": [2.0, 3.0, 3.0]}


def test_the_episode_records_of_a_validation_batch() -> None:
    rows = eval_hooks.episode_records(**_verl_batch())  # type: ignore[arg-type]
    assert [r["success"] for r in rows] == [True, False, False]  # the last active step's
    assert [r["invalid"] for r in rows] == [1, 0, 3]
    assert [r["turns"] for r in rows] == [2, 3, 3] and rows[2]["reward"] == -0.3
    assert rows[0]["game"] == "valid_seen/pick_and_place_simple-Book-None-Desk-308/trial_T1"
    assert [r["task_type"] for r in rows] == ["pick_and_place_simple", "look_at_obj_in_light",
                                              "pick_two_obj_and_place"]


def test_the_hook_wraps_the_alfworld_manager_once_and_writes_each_episode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Manager:
        def success_evaluator(self, *args: object, **kwargs: object) -> dict[str, object]:
            calls.append(kwargs)
            return {"success_rate": [1.0, 0.0, 0.0]}

    mod = types.ModuleType(eval_hooks.TARGET)
    mod.AlfWorldEnvironmentManager = Manager  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, eval_hooks.TARGET, mod)
    from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

    installed = []
    monkeypatch.setattr(verl_agent_hooks, "setup", lambda: installed.append(1))
    out = tmp_path / "episodes.jsonl"
    monkeypatch.setenv(eval_hooks.ENV_EVAL_EPISODES, str(out))
    eval_hooks.setup()
    eval_hooks.setup()  # idempotent: patched once
    result = Manager().success_evaluator(**_verl_batch())
    assert installed == [1, 1]  # the run's own hooks first, every time
    assert result == {"success_rate": [1.0, 0.0, 0.0]} and len(calls) == 1
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["worker"] for r in rows] == [0, 1, 2] and rows[0]["success"] is True


def test_a_repeat_links_the_checkpoint_runs_the_trainer_and_reads_its_episodes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.backends.verl import runner

    run = sweep_runs("alfworld-qwen7b-slurm")[0]
    rd = _fake_run(tmp_path, run)
    job = job_dir(rd, "0123456789ab")
    t = _target(run, rd, 150, n=3)
    seen = {}

    def fake_trainer(cmd: object, log: Path) -> tuple[int, list[str]]:
        work = Path(cmd.cwd).parent  # type: ignore[attr-defined]
        seen["cmd"] = cmd
        actor = work / "resume" / "global_step_0" / "actor"
        seen["linked"] = sorted(p.name for p in actor.iterdir())
        seen["inode"] = (actor / "optim_world_size_8_rank_3.pt").stat().st_ino
        rows = eval_hooks.episode_records(**_verl_batch())  # type: ignore[arg-type]
        (work / V.EPISODES_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows[::-1]))
        (work / "metrics.jsonl").write_text(json.dumps(
            {"step": 0, "data": {"val/success_rate": 1 / 3}}) + "\n")
        return 0, ["done"]

    monkeypatch.setattr(runner, "_run_trainer", fake_trainer)
    res = V.evaluate(run, rd, t, 0, job)
    src = rd.checkpoints / "global_step_150" / "actor" / "optim_world_size_8_rank_3.pt"
    assert seen["inode"] == src.stat().st_ino  # hard links, not copies
    assert "huggingface" in seen["linked"] and len(seen["linked"]) == 3 * RANKS + 1
    assert res.games[0].endswith("trial_T1") and [e["success"] for e in res.episodes] == \
        [True, False, False]
    assert res.info["weights"] == "resume" and res.info["trainer_success_rate"] == 1 / 3

    def lying_trainer(cmd: object, log: Path) -> tuple[int, list[str]]:
        fake_trainer(cmd, log)
        work = Path(cmd.cwd).parent  # type: ignore[attr-defined]
        (work / "metrics.jsonl").write_text(json.dumps(
            {"step": 0, "data": {"val/success_rate": 0.9}}) + "\n")
        return 0, []

    monkeypatch.setattr(runner, "_run_trainer", lying_trainer)
    with pytest.raises(RuntimeError, match="is not the trainer's val/success_rate"):
        V.evaluate(run, rd, t, 0, job)
    monkeypatch.setattr(runner, "_run_trainer", lambda cmd, log: (3, ["boom"]))
    with pytest.raises(RuntimeError, match="exited with code 3"):
        V.evaluate(run, rd, t, 0, job)
