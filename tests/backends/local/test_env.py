"""The real ALFWorld engine over generated games: expert plans win, random play, flags."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ccpo_lab.backends.local import speedups
from ccpo_lab.backends.local.env import SUCCESS_REWARD, AlfworldEnv, AlfworldEnvPool
from ccpo_lab.backends.local.games import GameSet, GameSpec, ensure_games, load_game_set

pytestmark = pytest.mark.slow
SPEC = GameSpec(n_train=12, n_eval=6, seed=7)  # the same set as test_games.py (cached)


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> GameSet:
    return ensure_games(tmp_path_factory.getbasetemp() / "games-cache", SPEC)


def transcript(game_set: GameSet, seed: int, fast: bool = True) -> str:
    """Random play with a mix of admissible and invalid actions, as one string."""
    rng = np.random.default_rng(seed)
    pool = AlfworldEnvPool(game_set, "train", n_envs=2, max_steps=12, fast=fast)
    out: list[str] = []
    for _ in range(3):
        starts = pool.reset(pool.sample_games(rng))
        out += [s.observation + "|" + ",".join(s.admissible) for s in starts]
        admissible = [s.admissible for s in starts]
        while not all(pool.done):
            actions: list[str | None] = []
            for done, adm in zip(pool.done, admissible, strict=True):
                pick = int(rng.integers(len(adm) + 1))
                actions.append(None if done else adm[pick] if pick < len(adm) else "dance")
            for i, res in enumerate(pool.step(actions)):
                if res is not None:
                    admissible[i] = res.admissible
                    out.append(f"{res.observation}|{res.reward}|{res.done}|{res.valid}")
    return "\n".join(out)


def test_expert_plans_win_on_the_engine(games: GameSet) -> None:
    for split in ("train", "eval"):
        records = games.split(split)
        env = AlfworldEnv(records, max_steps=50)
        for i, record in enumerate(records):
            start = env.reset(i)
            assert start.goal == record.goal and "UNKNOWN GOAL" not in start.observation
            assert f"Your task is to: {record.goal}." in start.observation
            assert start.task_type == record.task_type
            for k, action in enumerate(record.expert_plan):
                assert action in env.admissible
                res = env.step(action)
                last = k == len(record.expert_plan) - 1
                assert (res.won, res.done, res.valid) == (last, last, True)
                assert res.reward == (SUCCESS_REWARD if last else 0.0)
            with pytest.raises(RuntimeError):
                env.step("look")


def test_planner_expert_is_exposed(games: GameSet) -> None:
    env = AlfworldEnv(games.train, max_steps=50, expert=True)
    for i in (0, 5):
        start = env.reset(i)
        assert start.expert_plan == games.train[i].expert_plan
        res = env.step(start.expert_plan[0])
        assert res.expert_plan == start.expert_plan[1:]
        wrong = next(a for a in res.admissible if a.startswith("go to")
                     and a != start.expert_plan[0])
        res = env.step(wrong)  # after a detour the planner replans from where we are
        assert res.expert_plan and res.expert_plan[0].startswith("go to")


def test_random_play_flags_and_limits(games: GameSet) -> None:
    rng = np.random.default_rng(0)
    pool = AlfworldEnvPool(games, "eval", n_envs=3, max_steps=8)
    assert pool.n_games == 6
    starts = pool.reset([0, 1, 1])
    assert starts[1].observation == starts[2].observation
    steps = 0
    admissible = [s.admissible for s in starts]
    while not all(pool.done):
        actions: list[str | None] = []
        for done, adm in zip(pool.done, admissible, strict=True):
            assert done or adm  # a running episode always offers commands
            actions.append(None if done else ("xyzzy" if steps % 4 == 3
                                              else adm[int(rng.integers(len(adm)))]))
        for i, (res, act) in enumerate(zip(pool.step(actions), actions, strict=True)):
            if res is None:
                continue
            admissible[i] = res.admissible
            assert res.valid == (act != "xyzzy")
            if act == "xyzzy":
                assert res.observation == "Nothing happens."
            assert res.reward == (SUCCESS_REWARD if res.won else 0.0)
            assert res.done == (res.won or res.steps == 8)
        steps += 1
    assert steps <= 8
    with pytest.raises(RuntimeError, match="finished episode"):
        pool.step(["look", None, None])
    pool.reset([2, 3, 4])
    with pytest.raises(ValueError, match="running episode"):
        pool.step(["look", None, "look"])


def test_same_generator_same_episodes_and_no_global_rng(games: GameSet) -> None:
    py_state, np_state = random.getstate(), np.random.get_state()
    a = transcript(games, seed=3)
    assert random.getstate() == py_state
    assert np.array_equal(np.random.get_state()[1], np_state[1])
    assert transcript(games, seed=3) == a
    assert transcript(games, seed=4) != a


def test_engine_speedups_change_nothing(games: GameSet) -> None:
    import textworld.envs.pddl.textgen as textgen

    speedups.uninstall()
    try:
        plain = transcript(games, seed=5, fast=False)
        assert not speedups.installed()
        assert textgen.copy_context.__module__ == textgen.__name__
    finally:
        speedups.install()
    assert textgen.copy_context is speedups._shallow_copy_context
    assert len(plain) > 2000
    assert transcript(games, seed=5) == plain


def test_episodes_pass_library_copies_on_and_play_the_same_text(games: GameSet) -> None:
    speedups.uninstall()
    try:
        stock = transcript(games, seed=11, fast=False)
    finally:
        speedups.install()
    copies = speedups.LIB_COPIES[0]
    speedups._FREE_LIBS.clear()  # start with none to pass on
    pooled = transcript(games, seed=11)
    assert pooled == stock
    # two slots playing three rounds of games: two copies, each passed between games
    assert speedups.LIB_COPIES[0] - copies == 2 and len(speedups._FREE_LIBS) == 2


def test_engines_loaded_from_the_disk_cache_play_the_same_text(games: GameSet,
                                                                tmp_path: Path) -> None:
    code = ("import sys, hashlib; from pathlib import Path; "
            "from ccpo_lab.backends.local import speedups; "
            "from ccpo_lab.backends.local.games import load_game_set; "
            "from tests.backends.local.test_env import transcript; "
            "speedups.use_disk_cache(Path(sys.argv[2])); "
            "print(hashlib.sha256(transcript(load_game_set(Path(sys.argv[1])), 5)"
            ".encode()).hexdigest())")
    repo = Path(__file__).resolve().parents[3]
    disk = tmp_path / "engines"

    def play() -> str:
        out = subprocess.run([sys.executable, "-c", code, str(games.root), str(disk)],
                             cwd=repo, capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def files() -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in disk.iterdir()}

    speedups.uninstall()
    try:
        stock = hashlib.sha256(transcript(games, seed=5, fast=False).encode()).hexdigest()
    finally:
        speedups.install()
    assert play() == stock  # computes and writes the load-time results
    written = files()
    assert {n.split("-")[0] for n in written} == {"pddl_logic", "pddl2sas"}
    assert play() == stock  # reads them: nothing is rewritten
    assert files() == written
    damaged = sorted(written)[0]
    (disk / damaged).write_bytes(b"not a pickle")
    assert play() == stock  # a damaged file is recomputed and replaced
    assert files().keys() == written.keys() and files()[damaged] != written[damaged]


def test_sys_argv_survives_the_translator(games: GameSet) -> None:
    before = list(sys.argv)
    env = AlfworldEnv(games.train, max_steps=5)
    env.reset(0)
    env.reset(3)
    assert sys.argv == before


def test_text_does_not_depend_on_hash_seed(games: GameSet) -> None:
    code = ("import sys, hashlib; from pathlib import Path; "
            "from ccpo_lab.backends.local.games import load_game_set; "
            "from tests.backends.local.test_env import transcript; "
            "print(hashlib.sha256(transcript(load_game_set(Path(sys.argv[1])), 9)"
            ".encode()).hexdigest())")
    here = hashlib.sha256(transcript(load_game_set(games.root), 9).encode()).hexdigest()
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, str(games.root)], cwd=repo, env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here
