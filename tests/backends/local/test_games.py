"""Generated ALFWorld games: layout, determinism, task coverage, solvability, cache, knobs."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.backends.local.catalog import APPLIANCE, ROOMS, TASK_TYPES, physics
from ccpo_lab.backends.local.games import (
    GameGenConfig,
    GameSet,
    GameSpec,
    ensure_games,
    generate_games,
    load_game_set,
    make_games,
)
from ccpo_lab.backends.local.scene import SceneKnobs, sample_scene
from ccpo_lab.errors import UserError

SPEC = GameSpec(n_train=12, n_eval=6, seed=7)


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> GameSet:
    """12 train + 6 eval default games (shared through the cache with test_env.py)."""
    return ensure_games(tmp_path_factory.getbasetemp() / "games-cache", SPEC)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# ----------------------------------------------------------------------------- fast


def test_bad_knobs_are_user_errors(tmp_path: Path) -> None:
    bad = [
        (GameGenConfig(n_receptacles=2), "n_receptacles"),
        (GameGenConfig(n_distractors=-1), "n_distractors"),
        (GameGenConfig(closed_fraction=1.5), "closed_fraction"),
        (GameGenConfig(task_types=("pick_and_fly",)), "task_types"),
        (GameGenConfig(task_types=()), "task_types"),
    ]
    for cfg, key in bad:
        with pytest.raises(UserError) as err:
            generate_games(tmp_path / "x", 1, 0, 0, cfg)
        assert err.value.key == key
    with pytest.raises(UserError, match="seed"):
        generate_games(tmp_path / "x", 1, 0, -1)
    with pytest.raises(UserError, match="at least one game"):
        generate_games(tmp_path / "x", 0, 0, 0)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        generate_games(tmp_path / "full", 1, 0, 0)
    assert not (tmp_path / "x").exists()


def test_rooms_use_only_alfred_types_and_every_object_has_a_place() -> None:
    phys = physics()
    for room in ROOMS:
        for r in room.receptacles:
            assert r in phys.can_contain, (room.name, r)
        for o in room.objects:
            assert any(phys.holds(r, o) for r in room.receptacles), (room.name, o)


def test_scenes_pose_unsolved_tasks_with_requested_sizes() -> None:
    phys = physics()
    knobs = SceneKnobs(n_receptacles=5, n_distractors=2, closed_fraction=0.5)
    for i in range(300):
        task = TASK_TYPES[i % 6]
        scene = sample_scene(task, knobs, np.random.default_rng(i))
        rtype = dict(scene.receptacles)
        assert len(scene.receptacles) == 5
        assert scene.room.name in {r.name for r in ROOMS}
        targets = [(o, r) for o, t, r in scene.objects if t == scene.object_target]
        assert len(targets) == (2 if task == "pick_two_obj_and_place" else 1)
        # the goal does not hold at the start: no target object in a goal receptacle
        assert all(rtype[r] != scene.parent_target for _, r in targets)
        # every object sits where ALFRED allows it (lamps stand on lamp tables)
        for _, otype, rid in scene.objects:
            assert otype == "DeskLamp" or phys.holds(rtype[rid], otype)
        assert len(scene.objects) == len(targets) + 2 + (task == "look_at_obj_in_light")
        if task in APPLIANCE:
            assert APPLIANCE[task] in rtype.values()
            assert phys.state_ok(task, scene.object_target)
        # ids follow ALFRED (basins hang off their sink), unique
        ids = [rid for rid, _ in scene.receptacles] + [oid for oid, _, _ in scene.objects]
        assert len(set(ids)) == len(ids)
        for rid, t in scene.receptacles:
            if t.endswith("Basin"):  # Sink_bar_1_bar_SinkBasin shows as "sinkbasin 1"
                assert rid.startswith(t.removesuffix("Basin") + "_bar_")
                assert rid.endswith("_bar_" + t)
            else:
                assert rid.startswith(t + "_bar_")


def test_scene_sampling_is_a_function_of_the_generator() -> None:
    knobs = SceneKnobs(4, 2, 0.3)
    for task in TASK_TYPES:
        a = sample_scene(task, knobs, np.random.default_rng([5, 1]))
        b = sample_scene(task, knobs, np.random.default_rng([5, 1]))
        assert a == b


def test_closed_fraction_knob() -> None:
    phys = physics()
    n_closed = {0.0: 0, 1.0: 0}
    n_slots = {0.0: 0, 1.0: 0}
    for frac in (0.0, 1.0):
        knobs = SceneKnobs(6, 1, frac)
        for i in range(120):
            scene = sample_scene("pick_and_place_simple", knobs, np.random.default_rng(i))
            held = {r for _, t, r in scene.objects if t == scene.object_target}
            free = [t for rid, t in scene.receptacles
                    if t != scene.parent_target and rid not in held]
            n_slots[frac] += len(free)
            n_closed[frac] += sum(t in phys.openable for t in free)
    assert n_closed[0.0] == 0  # every room kind offers open receptacles
    assert n_closed[1.0] == n_slots[1.0] > 0  # and openable ones (cabinets, drawers)


# ----------------------------------------------------------------------------- engine


@pytest.mark.slow
def test_every_task_type_in_both_splits(games: GameSet) -> None:
    assert Counter(g.task_type for g in games.train) == {t: 2 for t in TASK_TYPES}
    assert Counter(g.task_type for g in games.eval) == {t: 1 for t in TASK_TYPES}
    assert [g.index for g in games.train] == list(range(12))
    summary = games.summary()
    assert summary["train"]["per_task_type"] == {t: 2 for t in TASK_TYPES}
    plans = [len(g.expert_plan) for g in games.train]
    assert summary["train"]["mean_plan_len"] == pytest.approx(np.mean(plans))
    assert all(g.n_receptacles == 4 for g in games.train + games.eval)


@pytest.mark.slow
def test_layout_is_alfworlds(games: GameSet) -> None:
    for g in games.train + games.eval:
        trial = g.gamefile.parent
        assert trial.name == f"trial_{g.index:05d}"
        assert trial.parent.name.startswith(f"{g.task_type}-{g.object_target}-None-")
        assert trial.parents[1].name == g.split
        assert trial.parents[2].name == "json_2.1.1"
        game = json.loads(g.gamefile.read_text())
        traj = json.loads((trial / "traj_data.json").read_text())
        assert game["solvable"] is True
        assert game["walkthrough"] == list(g.expert_plan)
        assert "UNKNOWN GOAL" not in game["grammar"]
        assert f"Your task is to: {g.goal}." in game["grammar"]
        assert traj["task_type"] == g.task_type
        assert traj["pddl_params"]["object_target"] == g.object_target
        assert 1 <= len(g.expert_plan) <= GameGenConfig().max_plan_len


@pytest.mark.slow
def test_alfred_tw_env_finds_exactly_these_games(games: GameSet) -> None:
    from alfworld.agents.environment import get_environment

    cfg = games.alfworld_config()
    env_cls = get_environment("AlfredTWEnv")
    for split, ours in (("train", games.train), ("eval_in_distribution", games.eval)):
        found = env_cls(cfg, train_eval=split).game_files
        assert sorted(found) == sorted(str(g.gamefile) for g in ours)


@pytest.mark.slow
def test_eval_split_is_disjoint_from_train(games: GameSet) -> None:
    def body(g: object) -> str:
        problem = json.loads(g.gamefile.read_text())["pddl_problem"]  # type: ignore[attr-defined]
        return problem.split("\n", 1)[1]

    train = {body(g) for g in games.train}
    assert len(train) == len(games.train)
    assert not train & {body(g) for g in games.eval}


@pytest.mark.slow
def test_same_seed_same_bytes_whatever_the_workers(tmp_path: Path, games: GameSet) -> None:
    again = generate_games(tmp_path / "again", SPEC.n_train, SPEC.n_eval, SPEC.seed,
                           workers=2)
    assert _files(again.root) == _files(games.root)
    other = generate_games(tmp_path / "other", 6, 0, SPEC.seed + 1, workers=1)
    a = _files(other.root)
    b = _files(games.root)
    assert [k for k in a if k.endswith("game.tw-pddl") and a[k] == b.get(k)] == []


@pytest.mark.slow
def test_game_i_does_not_depend_on_the_number_of_games(tmp_path: Path, games: GameSet) -> None:
    fewer = generate_games(tmp_path / "fewer", 6, 0, SPEC.seed, workers=1)
    for g, h in zip(fewer.train, games.train[:6], strict=True):
        assert g.gamefile.relative_to(fewer.root) == h.gamefile.relative_to(games.root)
        assert g.gamefile.read_bytes() == h.gamefile.read_bytes()


@pytest.mark.slow
def test_ensure_games_reuses_the_cache(tmp_path_factory: pytest.TempPathFactory,
                                       games: GameSet) -> None:
    root = tmp_path_factory.getbasetemp() / "games-cache"
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    again = ensure_games(root, SPEC)
    assert again == games
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before
    assert load_game_set(games.root) == games


def _ensure_in_child(root: str, barrier: object, out: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]  # both start before either finishes
    spec = GameSpec(n_train=3, n_eval=1, seed=11)
    out.put(str(ensure_games(Path(root), spec).root))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_concurrent_ensure_games_agree(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_ensure_in_child, args=(str(tmp_path), barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    roots = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0
    assert roots[0] == roots[1]
    assert [p.name for p in tmp_path.iterdir()] == [Path(roots[0]).name]  # no temp left
    assert len(load_game_set(Path(roots[0])).train) == 3


@pytest.mark.slow
def test_make_games_returns_summary(tmp_path: Path) -> None:
    game_set, summary = make_games(tmp_path / "m", 2, 1, 3,
                                   GameGenConfig(n_receptacles=6, n_distractors=3))
    assert summary["train"]["n_games"] == 2 and summary["eval"]["n_games"] == 1
    assert summary["train"]["mean_receptacles"] == 6.0
    assert all(g.n_objects >= 4 for g in game_set.train + game_set.eval)
