"""The CPU backend's out-of-distribution split: a real shift, generated and checked solvable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ccpo_lab.backends.local.catalog import ROOMS, TASK_TYPES
from ccpo_lab.backends.local.games import GameGenConfig, generate_games
from ccpo_lab.backends.local.ood import (
    NOVEL_TYPES,
    OOD_ROOMS,
    TRAINING_TYPES,
    ensure_ood_games,
    generate_ood,
    training_problem_types,
)
from ccpo_lab.errors import UserError

pytestmark = pytest.mark.slow
CONFIG = GameGenConfig(n_receptacles=3, n_distractors=0, closed_fraction=0.0)


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    root = tmp_path_factory.mktemp("ood") / "set"
    return generate_games(root, 24, 6, seed=3, config=CONFIG, workers=1)


@pytest.fixture(scope="module")
def ood(games, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN001, ANN201
    return generate_ood(tmp_path_factory.mktemp("ood") / "split", games, 12, workers=1)


def test_the_split_holds_types_no_training_game_contains(games, ood) -> None:  # noqa: ANN001
    assert NOVEL_TYPES and not NOVEL_TYPES & TRAINING_TYPES
    assert not {r.name for r in OOD_ROOMS} & {r.name for r in ROOMS}
    assert not training_problem_types(games) & NOVEL_TYPES  # checked in the files, too
    for g, novel in zip(ood.games, ood.novel, strict=True):
        assert novel and set(novel) <= NOVEL_TYPES
        problem = json.loads(Path(g.gamefile).read_text())["pddl_problem"]
        types = dict(re.findall(r"\(receptacleType (\S+) (\w+)Type\)", problem))
        (source,) = re.findall(rf"\(inReceptacle {g.object_target}_bar_1 (\S+)\)", problem)
        task_types = {g.object_target, g.parent_target, types[source]}
        assert set(novel) == task_types & NOVEL_TYPES, (g.goal, novel)
        assert g.room in {r.name for r in OOD_ROOMS} and g.split == "valid_unseen"
        assert "/valid_unseen/" in str(g.gamefile)
    assert {g.task_type for g in ood.games} == set(TASK_TYPES)  # cycled evenly


def test_every_game_is_solved_by_the_planner_on_the_engine(ood) -> None:  # noqa: ANN001
    from ccpo_lab.backends.local.checker import check_game

    for g in ood.games:
        assert check_game(str(g.gamefile), 12) == list(g.expert_plan), g.goal


def test_the_split_is_reproducible_and_game_i_does_not_depend_on_n(
        games, ood, tmp_path: Path) -> None:  # noqa: ANN001
    again = generate_ood(tmp_path / "again", games, 12, workers=2)
    for a, b in zip(ood.games, again.games, strict=True):
        assert Path(a.gamefile).read_bytes() == Path(b.gamefile).read_bytes()
    fewer = generate_ood(tmp_path / "fewer", games, 6, workers=1)
    for a, b in zip(ood.games[:6], fewer.games, strict=True):
        assert Path(a.gamefile).read_bytes() == Path(b.gamefile).read_bytes()


def test_ensure_generates_once_beside_the_game_set(games) -> None:  # noqa: ANN001
    first = ensure_ood_games(games, 3)
    assert first.root.parent == games.root.parent and first.root.name.startswith("ood-")
    stamp = (first.root / "games.json").stat().st_mtime_ns
    assert ensure_ood_games(games, 3).games == first.games
    assert (first.root / "games.json").stat().st_mtime_ns == stamp
    with pytest.raises(UserError, match="1..2000"):
        generate_ood(games.root.parent / "none", games, 0)
