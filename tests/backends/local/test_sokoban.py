"""Sokoban on the CPU backend: rooms, solver, text, engine, splits, training, resume,
re-scoring."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.backends.local.envs.sokoban.engine import ACTIONS, SokobanEngine, render_text
from ccpo_lab.backends.local.envs.sokoban.rooms import Room, generate_rooms, load_rooms
from ccpo_lab.backends.local.envs.sokoban.solver import solve
from ccpo_lab.backends.local.envs.sokoban.view import describe, render_segments
from ccpo_lab.config.environments import SokobanSettings
from ccpo_lab.runs.cost import MEASURED_PREFIXES
from ccpo_lab.runs.metrics import read_metrics

SMALL = SokobanSettings(n_train_rooms=6, n_eval_rooms=4, min_plan_len=2)

# walls 0, floor 1, target 2; state: box 4, player 5
FIXED = ((0, 0, 0, 0, 0),
         (0, 1, 1, 1, 0),
         (0, 1, 1, 2, 0),
         (0, 1, 1, 1, 0),
         (0, 0, 0, 0, 0))
STATE = ((0, 0, 0, 0, 0),
         (0, 1, 1, 1, 0),
         (0, 5, 4, 2, 0),
         (0, 1, 1, 1, 0),
         (0, 0, 0, 0, 0))


def _room(fixed: tuple = FIXED, state: tuple = STATE) -> Room:
    return Room("train", 0, fixed, state, solve(fixed, state) or (), "hand-made#0")


def _keys(rooms: tuple[Room, ...]) -> set[tuple]:
    return {(r.fixed, r.state) for r in rooms}


def test_generation_is_seeded_and_leaves_the_global_generators_alone(tmp_path: Path) -> None:
    np.random.seed(123)
    random.seed(123)
    before = (np.random.get_state()[1].copy(), random.getstate())
    a = generate_rooms(tmp_path, SMALL)
    assert np.array_equal(np.random.get_state()[1], before[0])
    assert random.getstate() == before[1]
    b = generate_rooms(tmp_path, SMALL)
    assert a == b
    more = generate_rooms(tmp_path, dataclasses.replace(SMALL, n_train_rooms=8))
    assert more.train[:6] == a.train  # room i does not depend on how many are made
    other = generate_rooms(tmp_path, dataclasses.replace(SMALL, rooms_seed=1))
    assert _keys(other.train) != _keys(a.train)


def test_every_room_is_solvable_and_its_plan_wins_on_the_engine(tmp_path: Path) -> None:
    rooms = generate_rooms(tmp_path, SMALL)
    for room in (*rooms.train, *rooms.eval, *rooms.ood):
        assert len(room.expert_plan) >= SMALL.min_plan_len
        engine = SokobanEngine(room, max_steps=len(room.expert_plan))
        engine.reset(0)
        for action in room.expert_plan:
            result = engine.step(action)
        assert result.won and result.done


def test_splits_are_disjoint_and_ood_is_bigger(tmp_path: Path) -> None:
    rooms = generate_rooms(tmp_path, SMALL)
    assert len(rooms.train) == 6 and len(rooms.eval) == 4 and len(rooms.ood) == 4
    train, held, ood = _keys(rooms.train), _keys(rooms.eval), _keys(rooms.ood)
    assert not train & held and not train & ood and not held & ood
    assert all(len(r.fixed) == SMALL.ood_dim_room[0] and r.num_boxes == SMALL.ood_num_boxes
               for r in rooms.ood)
    assert all(r.num_boxes == SMALL.num_boxes for r in rooms.train)


def test_the_cached_set_reads_back_the_same(tmp_path: Path) -> None:
    from ccpo_lab.backends.local.envs.sokoban.rooms import ensure_rooms

    made = ensure_rooms(tmp_path, SMALL)
    again = load_rooms(made.root)
    assert again == made and made.root.parent == tmp_path.resolve()
    assert json.loads((made.root / "rooms.json").read_text())["settings"]["n_train"] == 6


def test_the_solver_finds_the_shortest_plan_and_refuses_a_dead_room() -> None:
    assert solve(FIXED, STATE) == ("right",)
    far = tuple(tuple(1 if c == 5 else c for c in row) for row in STATE)
    far = tuple(tuple(5 if (r, c) == (3, 1) else v for c, v in enumerate(row))
                for r, row in enumerate(far))
    assert solve(FIXED, far) == ("up", "right")
    cornered = ((0, 0, 0, 0, 0), (0, 4, 1, 1, 0), (0, 5, 1, 2, 0), (0, 1, 1, 1, 0),
                (0, 0, 0, 0, 0))
    assert solve(FIXED, cornered) is None


def test_the_room_as_text_uses_verl_agents_symbols() -> None:
    text = render_text(np.array(STATE), np.array(FIXED))
    rows = [line.split() for line in text.split("\n")]
    assert rows[2] == ["#", "P", "X", "O", "#"] and rows[0] == ["#"] * 5
    assert text.split("\n")[0] == " # \t" * 5
    on_target = np.array(STATE)
    on_target[2, 1], on_target[2, 3] = 1, 5
    assert render_text(on_target, np.array(FIXED)).split("\n")[2].split()[3] == "S"


def test_a_step_gives_gym_sokobans_rewards() -> None:
    engine = SokobanEngine(_room(), max_steps=3)
    start = engine.reset(0)
    assert start.admissible == ACTIONS and start.goal
    moved = engine.step("up")  # a move: the step penalty only
    assert moved.reward == pytest.approx(-0.1) and not moved.done and moved.valid
    engine.step("down")
    won = engine.step("right")  # the push onto the target: -0.1 + 1 + 10
    assert won.reward == pytest.approx(10.9) and won.won and won.done
    assert "√" in won.observation
    engine.reset(0)
    assert engine.step("dance").valid is False
    engine.step("left")
    last = engine.step("left")
    assert last.done and not last.won  # max_steps


def test_the_same_state_gives_the_same_text_and_view() -> None:
    a, b = SokobanEngine(_room(), 5), SokobanEngine(_room(), 5)
    a.reset(0)
    b.reset(0)
    ra, rb = a.step("up"), b.step("up")
    assert ra.observation == rb.observation  # the estimators' step anchor
    view = describe(ra.observation)
    assert "box down 1 right 1" in view and "goal none 0 right 1" in view
    parts = render_segments("push", ra.observation, ACTIONS, [], 0, 2)
    assert [seg for seg, _ in parts] == [1, 3, 4]
    start = describe(SokobanEngine(_room(), 5).reset(0).observation)
    assert "pushontarget right" in start and "blockedwall left" in start


# ----------------------------------------------------------------------------- slow

TINY = """\
name: tiny-sokoban
arms: [grpo, gigpo]
seeds: [0]
environments: [sokoban]
env:
  sokoban:
    n_train_rooms: 8
    n_eval_rooms: 4
    min_plan_len: 2
backend:
  kind: local
  local:
    vocab_size: 256
    embed_dim: 8
    hidden_dim: 8
    warmstart_demos: 4
    warmstart_epochs: 2
    games_cache: {cache}
protocol:
  total_steps: 4
  train_batch_size: 2
  group_size: 2
  val_batch_size: 4
  test_freq: 2
  save_freq: 1
  max_steps: 6
  history_length: 2
  max_prompt_length: 128
  lr: 1.0e-3
  ppo_mini_batch_size: 8
launcher:
  kind: inline
analysis:
  window_start: 0
  reference: grpo
"""


def _sweep(tmp_path: Path) -> object:
    from ccpo_lab.config.sweep import load_sweep

    path = tmp_path / "tiny-sokoban.yaml"
    path.write_text(TINY.format(cache=tmp_path / "cache"))
    (part,) = load_sweep(path).per_environment()
    return part


def _rows(path: Path) -> list[tuple[int, dict]]:
    return [(r["step"], {k: v for k, v in r["data"].items()
                         if not k.startswith(MEASURED_PREFIXES)}) for r in read_metrics(path)]


@pytest.mark.slow
def test_a_short_run_trains_and_resumes_identically(tmp_path: Path) -> None:
    from ccpo_lab.backends.local.runner import train
    from ccpo_lab.runs.layout import RunDir, init_run_dir

    sw = _sweep(tmp_path)
    run = next(r for r in sw.runs if r.arm == "gigpo")
    assert run.environment == "sokoban"
    rd = RunDir(sw.sweep_dir(tmp_path / "results") / run.arm / f"seed-{run.seed}")
    init_run_dir(rd, run)
    summary = train(run, rd)
    rows = _rows(rd.metrics)
    assert summary["steps"] == 4 and [s for s, _ in rows] == [0, 1, 2, 3, 4]
    assert "val/success_rate" in rows[0][1] and "val/success_rate" in rows[4][1]
    assert "adv/gigpo/step_groups" in rows[1][1] or any(k.startswith("adv/") for k in rows[1][1])
    assert rows[0][1]["warmstart/demo_turns"] > 0
    assert json.loads(rd.run_json.read_text())["games"]["key"].startswith("sokoban-")
    # resume: drop the last checkpoint; the run redoes step 4 from step 3's
    copy = RunDir(tmp_path / "copy" / run.arm / f"seed-{run.seed}")
    shutil.copytree(rd.path, copy.path)
    (copy.checkpoints / "step-000004.pt").unlink()
    assert train(run, copy)["resumed_from"] == 3
    assert _rows(copy.metrics) == rows


@pytest.mark.slow
def test_evaluate_rescores_sokoban_checkpoints(tmp_path: Path) -> None:
    from ccpo_lab.cli.main import main
    from ccpo_lab.launch.submit import launch_sweep
    from ccpo_lab.runs.evals import eval_files, read_eval_file
    from ccpo_lab.runs.layout import RunDir

    sw = _sweep(tmp_path)
    assert launch_sweep(sw, tmp_path / "results") == 0
    sweep = sw.sweep_dir(tmp_path / "results")
    assert main(["evaluate", str(sweep), "--launcher", "inline", "--checkpoint", "final",
                 "--split", "both", "--episodes", "3"]) == 0
    files = eval_files(RunDir(sweep / "grpo" / "seed-0"))
    assert len(files) == 2  # in and out of distribution
    for f in files:
        data = read_eval_file(f)
        assert data.success.shape == (1, 3) and set(data.task_types) == {"sokoban"}
        assert data.header["draw"]["spec"]["environment"] == "sokoban"
        assert (data.turns > 0).all()
