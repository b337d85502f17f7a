"""The verl backend per environment: verl-agent's ``env.*`` keys of Sokoban and WebShop
(its ``run_sokoban.sh`` / ``run_webshop.sh``), the task draws re-seeded per (run seed,
step) on both, the shipped sweeps."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.backends.verl.agent import patches as P
from ccpo_lab.backends.verl.command import build_command
from ccpo_lab.config.schema import RunConfig
from tests.backends.verl.conftest import planned, run_dir, sweep_runs


def _ov(name: str, tmp: Path, overrides: list[str] | None = None) -> dict[str, str]:
    run = sweep_runs(name, overrides)[0]
    cmd = build_command(run, run_dir(tmp, run).path, placement=planned(name, overrides))
    out: dict[str, str] = {}
    for o in cmd.overrides:
        k, _, v = o.partition("=")
        assert k not in out, f"{k} set twice"
        out[k] = v
    return out


def _env_keys(ov: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in ov.items() if k.startswith("env.")}


def test_sokoban_command_is_verl_agents_text_sokoban(tmp_path: Path) -> None:
    ov = _ov("sokoban-verl", tmp_path)
    assert _env_keys(ov) == {
        "env.env_name": "Sokoban", "env.seed": "0", "env.max_steps": "15",
        "env.history_length": "2", "env.rollout.n": "8",
        "env.sokoban.dim_room": "[6,6]", "env.sokoban.num_boxes": "1",
        "env.sokoban.search_depth": "30", "env.sokoban.mode": "tiny_rgb_array",
        "env.resources_per_worker.num_cpus": "0.1"}
    assert ov["data.train_batch_size"] == "32" and ov["data.val_batch_size"] == "128"
    assert ov["data.max_response_length"] == "512"
    assert ov["actor_rollout_ref.actor.ppo_mini_batch_size"] == "64"
    assert not any(k.startswith(("env.alfworld", "env.webshop")) for k in ov)


def test_sokoban_settings_reach_the_command(tmp_path: Path) -> None:
    ov = _ov("sokoban-verl", tmp_path, ["env.sokoban.dim_room=[7,8]",
                                        "env.sokoban.num_boxes=2"])
    assert ov["env.sokoban.dim_room"] == "[7,8]" and ov["env.sokoban.num_boxes"] == "2"


def test_webshop_command_is_verl_agents_webshop(tmp_path: Path) -> None:
    ov = _ov("webshop-qwen7b-slurm", tmp_path)
    assert _env_keys(ov) == {
        "env.env_name": "Webshop", "env.seed": "0", "env.max_steps": "15",
        "env.history_length": "2", "env.rollout.n": "8",
        "env.webshop.use_small": "True", "env.webshop.human_goals": "False",
        "env.resources_per_worker.num_cpus": "0.1"}
    want = {"data.train_batch_size": "16", "data.val_batch_size": "128",
            "data.max_prompt_length": "4096", "data.max_response_length": "512",
            "actor_rollout_ref.actor.optim.lr": "1e-06",
            "actor_rollout_ref.actor.ppo_mini_batch_size": "64",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "8",
            "actor_rollout_ref.model.path": "Qwen/Qwen2.5-7B-Instruct",
            "trainer.total_epochs": "150", "trainer.test_freq": "5"}
    assert {k: ov[k] for k in want} == want
    ov = _ov("webshop-qwen7b-slurm", tmp_path, ["env.webshop.use_small=false",
                                                "env.webshop.human_goals=true"])
    assert ov["env.webshop.use_small"] == "False" and ov["env.webshop.human_goals"] == "True"


def test_every_environment_keeps_the_rest_of_the_command(tmp_path: Path) -> None:
    """Only ``env.*`` and the protocol's values differ from the ALFWorld command."""
    alf = sweep_runs("alfworld-qwen7b-slurm")[0]
    sok: RunConfig = sweep_runs("alfworld-qwen7b-slurm", ["environments=[sokoban]"])[0]
    rd = run_dir(tmp_path, alf).path
    a = dict(o.split("=", 1) for o in build_command(alf, rd).overrides)
    s = dict(o.split("=", 1) for o in build_command(sok, rd).overrides)
    keys = {k for k in a.keys() | s.keys() if a.get(k) != s.get(k)}
    assert keys and all(k.startswith("env.") for k in keys), keys


def _fake_sokoban_module() -> types.ModuleType:
    mod = types.ModuleType("fake_sokoban_envs")

    class SokobanMultiProcessEnv:
        def __init__(self) -> None:
            np.random.seed(123)
            self.env_num, self.group_n = 2, 4

        def reset(self) -> list[int]:
            return np.repeat(np.random.randint(0, 2**16 - 1, size=self.env_num),
                             self.group_n).tolist()

    mod.SokobanMultiProcessEnv = SokobanMultiProcessEnv  # type: ignore[attr-defined]
    return mod


def test_sokoban_rooms_depend_on_the_key_alone() -> None:
    mod = _fake_sokoban_module()
    P.patch_sokoban_envs(mod)
    a, b = mod.SokobanMultiProcessEnv(), mod.SokobanMultiProcessEnv()
    np.random.random()   # other draws of the process do not move the rooms
    a.ccpo_lab_seed([5, 0, 1, 3, 0])
    b.ccpo_lab_seed([5, 0, 1, 3, 0])
    before = np.random.get_state(legacy=True)[1].copy()  # type: ignore[index]
    ra, rb = a.reset(), b.reset()
    assert ra == rb and ra[:4] == [ra[0]] * 4          # one room per group
    after = np.random.get_state(legacy=True)[1]  # type: ignore[index]
    assert (after == before).all()                      # the global generator untouched
    b.ccpo_lab_seed([5, 0, 1, 4, 0])
    assert b.reset() != ra                              # another step, other rooms
    assert a.reset() != ra                              # no key: verl-agent's own draw


def test_reseed_envs_uses_the_driver_side_hook() -> None:
    mod = _fake_sokoban_module()
    P.patch_sokoban_envs(mod)
    inner = mod.SokobanMultiProcessEnv()
    inner.workers = ["not an actor"]     # the ALFWorld path would call .remote on these
    manager = types.SimpleNamespace(envs=inner)
    assert P.reseed_envs(manager, "train", 1)
    first = inner.reset()
    assert P.reseed_envs(manager, "train", 1)
    assert inner.reset() == first


def test_webshop_goals_depend_on_the_key_alone() -> None:
    mod = types.ModuleType("fake_webshop_envs")

    class WebshopMultiProcessEnv:
        def __init__(self) -> None:
            self._rng = np.random.RandomState(0)
            self.goal_idxs = range(500, 6000)

        def reset(self) -> list[int]:
            return list(self._rng.choice(self.goal_idxs, size=4, replace=False))

    mod.WebshopMultiProcessEnv = WebshopMultiProcessEnv  # type: ignore[attr-defined]
    P.patch_webshop_envs(mod)
    a: Any = WebshopMultiProcessEnv()
    b: Any = WebshopMultiProcessEnv()
    a.reset()
    a.ccpo_lab_seed([0, 0, 1, 2, 0])
    b.ccpo_lab_seed([0, 0, 1, 2, 0])
    assert a.reset() == b.reset()


# ------------------------------------------------------------------- the rehearsal
def test_sokoban_rooms_of_the_rehearsal_are_the_ones_the_hooks_draw() -> None:
    """:func:`room_seeds` computes the seeds the patched reset draws at each step."""
    from ccpo_lab.backends.verl.agent import seeds as S
    from ccpo_lab.backends.verl.tiny_sokoban import room_seeds

    mod = _fake_sokoban_module()
    P.patch_sokoban_envs(mod)
    env = mod.SokobanMultiProcessEnv()
    e = S.env_seed(0, 1)
    env.ccpo_lab_seed(S.task_seed(e, "train", 1, 0))
    drawn = set(env.reset())
    assert drawn <= set(room_seeds([e], steps=2, tasks=2, val_episodes=4))
    assert len(set(room_seeds([0], 2, 2, 4)) & set(room_seeds([e], 2, 2, 4))) == 0


def test_a_sokoban_rehearsal_needs_no_alfworld_data(tmp_path: Path) -> None:
    import sys

    from ccpo_lab.backends.verl import rehearsal as R
    from ccpo_lab.config.sweep import load_sweep

    machine = R.Machine(python=sys.executable, gpus=0, torch="2.13.0", transformers="4.57.3")
    sw = load_sweep(Path(__file__).resolve().parents[3] / "sweeps" / "sokoban-verl.yaml", [])
    rooms = R.ensure_sokoban_rooms(tmp_path, sw, "cpu", machine, R.RehearsalSettings())
    data = json.loads(rooms.read_text())
    assert data["dim_room"] == [6, 6] and data["max_steps"] == 6 and data["room_seeds"]
    ov = R.rehearsal_overrides(sw, "cpu", machine, rooms, tmp_path / "model",
                               {"longest_prompt_tokens": 300}, R.RehearsalSettings())
    assert not any("ALFWORLD_DATA" in o for o in ov)
    assert "protocol.train_batch_size=2" in ov and "protocol.val_batch_size=4" in ov


def test_a_webshop_rehearsal_is_refused_in_one_line(tmp_path: Path) -> None:
    import pytest

    from ccpo_lab.backends.verl import rehearsal as R
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.errors import UserError

    sw = load_sweep(Path(__file__).resolve().parents[3] / "sweeps" /
                    "webshop-qwen7b-slurm.yaml", [])
    with pytest.raises(UserError) as e:
        R.check_inputs(sw)
    assert e.value.key == "environments" and "WebShop" in str(e.value)


def test_rollouts_record_the_environment_as_their_task_type() -> None:
    from ccpo_lab.backends.verl.agent.io import step1_episodes

    assert [P.task_type_of(n) for n in ("alfworld/AlfredTWEnv", "alfworld/AlfredThorEnv",
                                        "Sokoban", "Webshop", None)] == \
        ["alfworld", "alfworld", "sokoban", "webshop", "alfworld"]
    eps = step1_episodes(traj_uid=["a"], turn=[0], anchor_obs=["o"], actions=["x"],
                         prompt_ids=[[1]], valid=[True], rewards=[0.0], group_size=1,
                         task_type="sokoban")
    assert eps[0]["task_type"] == "sokoban"
