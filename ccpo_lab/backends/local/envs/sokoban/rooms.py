"""Generated Sokoban rooms: gym_sokoban's generator, seeded per room, each solved by
:mod:`.solver`, cached per settings.

Room ``i`` of a split is drawn with Python's and numpy's global generators (gym_sokoban's
generator uses both) seeded from (``rooms_seed``, split, ``i``, attempt) and restored
afterwards, so it depends on nothing else: not on the number of rooms, not on what ran
before. The generator is gym_sokoban's own (``room_topology_generation``,
``place_boxes_and_player``, then its reverse-play ``depth_first_search`` run
``search_depth`` moves deep, as ``reverse_playing`` runs it 300 deep). An attempt is
redrawn when gym_sokoban gives up, when the solver finds no solution, or when the room
(layout and start) equals one of an earlier split (held-out and out-of-distribution rooms
are never training rooms). Splits: ``train``, ``valid_seen`` (held-out, same size and
boxes), ``ood`` (``ood_dim_room``, ``ood_num_boxes``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.backends.local.envs.sokoban.engine import TASK, sokoban_modules
from ccpo_lab.backends.local.envs.sokoban.solver import solve
from ccpo_lab.errors import UserError

GENERATOR_VERSION = 1
"""Bump when generated rooms change: part of the cache key."""
SPLITS = {"train": 1, "valid_seen": 2, "ood": 3}
"""Split -> the code in its rooms' seeds."""
MANIFEST = "rooms.json"
ROOM_TAG = 0x50B
MAX_ATTEMPTS = 200
P_CHANGE_DIRECTIONS = 0.35
"""gym_sokoban's default chance that the topology's random walk turns."""

Grid = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Room:
    """One generated room."""

    split: str
    index: int
    fixed: Grid
    """Walls (0), floor (1), targets (2)."""
    state: Grid
    """The start: gym_sokoban's ``room_state`` (4 box, 3 box on target, 5 player)."""
    expert_plan: tuple[str, ...]
    """The solver's shortest solution."""
    gamefile: str
    """``<set folder>/rooms.json#<split>/<index>``: names the room uniquely."""

    @property
    def task_type(self) -> str:
        """Sokoban has one task type."""
        return "sokoban"

    @property
    def goal(self) -> str:
        """The task text."""
        return TASK

    @property
    def num_boxes(self) -> int:
        """Boxes in the room."""
        return sum(code in (3, 4) for row in self.state for code in row)


@dataclass(frozen=True)
class RoomSet:
    """A generated set: ``train``, held-out ``eval`` and ``ood`` rooms, in ``root``."""

    root: Path
    settings: dict[str, Any]
    train: tuple[Room, ...]
    eval: tuple[Room, ...]
    ood: tuple[Room, ...]

    def split(self, name: str) -> tuple[Room, ...]:
        """The rooms of ``train``, ``eval``/``valid_seen`` or ``ood``."""
        found = {"train": self.train, "eval": self.eval, "valid_seen": self.eval,
                 "ood": self.ood}
        if name not in found:
            raise UserError("no such Sokoban split", key="split", value=name,
                            valid=sorted(found))
        return found[name]


def set_settings(settings: Any) -> dict[str, Any]:
    """What determines a room set (the settings' generation fields)."""
    return {"version": GENERATOR_VERSION, "dim_room": list(settings.dim_room),
            "num_boxes": settings.num_boxes, "search_depth": settings.search_depth,
            "n_train": settings.n_train_rooms, "n_eval": settings.n_eval_rooms,
            "seed": settings.rooms_seed, "ood_dim_room": list(settings.ood_dim_room),
            "ood_num_boxes": settings.ood_num_boxes, "min_plan_len": settings.min_plan_len}


def set_key(settings: Any) -> str:
    """sha256 of :func:`set_settings`."""
    text = json.dumps(set_settings(settings), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@contextlib.contextmanager
def seeded_globals(seed: int) -> Iterator[None]:
    """Python's and numpy's global generators seeded with ``seed``, restored after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def draw_room(dim: tuple[int, int], num_boxes: int, search_depth: int, seed: int
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """One room of gym_sokoban's generator: ``(fixed, state)``, or None where it failed."""
    room_utils, _ = sokoban_modules()
    num_gen_steps = int(1.7 * (dim[0] + dim[1]))  # gym_sokoban's SokobanEnv default
    with seeded_globals(seed):
        try:
            room = room_utils.room_topology_generation(dim, P_CHANGE_DIRECTIONS, num_gen_steps)
            room = room_utils.place_boxes_and_player(room, num_boxes=num_boxes,
                                                     second_player=False)
        except (RuntimeError, RuntimeWarning, ValueError):
            return None
        fixed = room.copy()
        fixed[fixed == 5] = 1
        state = room.copy()
        state[state == 2] = 4
        score = _reverse_play(room_utils, state, fixed, search_depth)
    if score is None:
        return None
    best = np.array(room_utils.best_room)
    best[best == 3] = 4
    return fixed.astype(np.int64), best.astype(np.int64)


def _reverse_play(room_utils: Any, state: np.ndarray, fixed: np.ndarray, depth: int
                  ) -> float | None:
    """gym_sokoban's ``reverse_playing`` with the depth given (its globals set as it
    sets them); None when no room scored."""
    mapping = {}
    locations = np.where(fixed == 2)
    for r, c in zip(locations[0], locations[1], strict=True):
        mapping[(r, c)] = (r, c)
    room_utils.explored_states = set()
    room_utils.num_boxes = len(mapping)
    room_utils.best_room_score = -1
    room_utils.best_room = None
    room_utils.best_box_mapping = mapping
    room_utils.depth_first_search(state, fixed, mapping, box_swaps=0, last_pull=(-1, -1),
                                  ttl=depth)
    score = room_utils.best_room_score
    if room_utils.best_room is None or score <= 0:
        return None
    return float(score)


def room_seed(rooms_seed: int, split: str, index: int, attempt: int) -> int:
    """The 32-bit seed of an attempt at a room."""
    seq = np.random.SeedSequence([ROOM_TAG, rooms_seed, SPLITS[split], index, attempt])
    return int(seq.generate_state(1)[0])


def make_room(split: str, index: int, dim: tuple[int, int], num_boxes: int,
              search_depth: int, rooms_seed: int, seen: set[bytes], gamefile: str,
              min_plan_len: int = 1) -> Room:
    """Room ``index`` of ``split``: the first attempt that is generated, solvable and new."""
    for attempt in range(MAX_ATTEMPTS):
        drawn = draw_room(dim, num_boxes, search_depth,
                          room_seed(rooms_seed, split, index, attempt))
        if drawn is None:
            continue
        fixed, state = drawn
        key = fixed.tobytes() + state.tobytes()
        if key in seen:
            continue
        plan = solve(fixed.tolist(), state.tolist())
        if plan is None or len(plan) < max(1, min_plan_len):
            continue
        seen.add(key)
        return Room(split, index, _grid(fixed), _grid(state), plan, gamefile)
    raise UserError(f"no solvable {dim[0]}x{dim[1]} room with {num_boxes} box(es) in "
                    f"{MAX_ATTEMPTS} attempts", key="env.sokoban.dim_room", value=list(dim))


def _grid(a: np.ndarray) -> Grid:
    return tuple(tuple(int(v) for v in row) for row in a)


def generate_rooms(root: Path, settings: Any) -> RoomSet:
    """Every room of ``settings`` (train, then held-out, then out-of-distribution, each
    new to the ones before), their files naming ``root``."""
    seen: set[bytes] = set()
    seed = int(settings.rooms_seed)
    plan = [("train", settings.n_train_rooms, settings.dim_room, settings.num_boxes),
            ("valid_seen", settings.n_eval_rooms, settings.dim_room, settings.num_boxes),
            ("ood", settings.n_eval_rooms, settings.ood_dim_room, settings.ood_num_boxes)]
    made: dict[str, tuple[Room, ...]] = {}
    for split, n, dim, boxes in plan:
        made[split] = tuple(
            make_room(split, i, (int(dim[0]), int(dim[1])), int(boxes),
                      int(settings.search_depth), seed, seen,
                      f"{root / MANIFEST}#{split}/{i:05d}", int(settings.min_plan_len))
            for i in range(int(n)))
    return RoomSet(root, set_settings(settings), made["train"], made["valid_seen"],
                   made["ood"])


def _to_json(rooms: RoomSet) -> dict[str, Any]:
    return {"settings": rooms.settings,
            "rooms": [{"split": r.split, "index": r.index, "fixed": r.fixed,
                       "state": r.state, "expert_plan": r.expert_plan}
                      for r in (*rooms.train, *rooms.eval, *rooms.ood)]}


def load_rooms(root: Path) -> RoomSet:
    """The room set in ``root/rooms.json``."""
    root = Path(root).resolve()
    data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    rooms = [Room(d["split"], int(d["index"]), _grid(np.array(d["fixed"])),
                  _grid(np.array(d["state"])), tuple(d["expert_plan"]),
                  f"{root / MANIFEST}#{d['split']}/{int(d['index']):05d}")
             for d in data["rooms"]]

    def of(split: str) -> tuple[Room, ...]:
        return tuple(r for r in rooms if r.split == split)

    return RoomSet(root, data["settings"], of("train"), of("valid_seen"), of("ood"))


def ensure_rooms(cache: Path, settings: Any) -> RoomSet:
    """The room set of ``settings`` under ``cache/sokoban-<hash>``, generated if missing
    (runs starting together wait on a lock while one generates it)."""
    import fcntl

    from ccpo_lab.atomic import atomic_write_text

    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    key = set_key(settings)[:16]
    root = (cache / f"sokoban-{key}").resolve()
    with (cache / f".lock-sokoban-{key}").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (root / MANIFEST).is_file():
                rooms = generate_rooms(root, settings)
                root.mkdir(parents=True, exist_ok=True)
                atomic_write_text(root / MANIFEST, json.dumps(_to_json(rooms)) + "\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return load_rooms(root)
