"""The CPU backend's out-of-distribution split: rooms and things no training game contains.

ALFWorld's ``eval_out_of_distribution`` (``valid_unseen``) holds games in rooms the
training games never show. The generated games' analogue is stronger, and checked: every
game of this split (ALFWorld's layout, ``json_2.1.1/valid_unseen/``) is posed in one of
three room kinds the training games never use (a laundry room, a study, a pantry:
:data:`OOD_ROOMS`), and **the task's own object, the receptacle it starts in or the one it
must end in is of a type that no training game contains**: the objects glass bottle, paper
towel, toilet-paper roll, plunger, watering can, towel; the receptacles cart, ottoman, TV
stand, laundry hamper, towel holder, toaster, box (:data:`NOVEL_TYPES`). The policy has
never read their names, and their receptacles hold other things than the training
rooms'. Everything else is as in training: the six task types cycled evenly, the room
size and closed-receptacle knobs of the run's game set, ALFRED's physics
(:mod:`.catalog`), the real engine, and every game played through by ALFWorld's planner
expert before it is kept (:func:`~.checker.check_game`). :func:`ensure_ood_games` also
reads every training game's PDDL problem and refuses a set whose training games name a
novel type.

Game ``i`` depends only on (the game set's seed, ``i``), drawn from numpy Generators keyed
by (seed, ``i``, attempt); a set of ``n`` games is cached under a hash of (the training
set, ``n``, the generator's version), beside the training set.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.atomic import temp_dir
from ccpo_lab.backends.local.catalog import ROOMS, RoomKind, physics
from ccpo_lab.backends.local.checker import check_game
from ccpo_lab.backends.local.games import (
    DATA_DIR,
    MANIFEST,
    GameRecord,
    GameSet,
    GameSpec,
    _remove_trial,
    _task_schedule,
)
from ccpo_lab.backends.local.pddl import (
    dumps,
    game_payload,
    goal_templates,
    goal_text,
    render_problem,
    traj_payload,
)
from ccpo_lab.backends.local.scene import SceneKnobs, sample_scene
from ccpo_lab.errors import UserError

OOD_VERSION = 1
"""Bump when the generated content changes (part of the cache key)."""
SPLIT = "valid_unseen"
SPLIT_ID = 2
"""The split's index in the generator's random keys (train 0, valid_seen 1)."""
_TAG = 0x00D
MAX_DRAWS = 5000
"""Scene draws per game before giving up (a draw without a novel type costs
microseconds; only those with one are written and checked by the planner)."""
MAX_GAMES = 2000
"""Most games of the split (generation checks each one with the planner: ~0.3 s a game)."""

OOD_ROOMS: tuple[RoomKind, ...] = (
    RoomKind(
        "laundryroom", 501,
        ("LaundryHamper", "Cart", "TowelHolder", "Box", "Shelf", "Cabinet", "Drawer",
         "CounterTop", "SinkBasin", "GarbageCan", "Dresser"),
        ("Cloth", "Towel", "SoapBar", "SoapBottle", "SprayBottle", "PaperTowel",
         "ToiletPaperRoll", "Plunger", "DishSponge", "WateringCan", "Glassbottle",
         "TissueBox", "Candle", "HandTowel"),
    ),
    RoomKind(
        "study", 601,
        ("Ottoman", "TVStand", "Box", "Cart", "Desk", "SideTable", "Shelf", "Drawer",
         "Cabinet", "GarbageCan", "Dresser"),
        ("Glassbottle", "WateringCan", "PaperTowel", "ToiletPaperRoll", "Book", "CellPhone",
         "KeyChain", "Vase", "Statue", "Pen", "TissueBox", "Candle", "AlarmClock",
         "CreditCard", "Laptop", "Pillow", "RemoteControl", "Mug"),
    ),
    RoomKind(
        "pantry", 701,
        ("Toaster", "Cart", "Box", "Fridge", "Microwave", "SinkBasin", "CounterTop",
         "Cabinet", "Shelf", "Drawer", "GarbageCan", "DiningTable"),
        ("Glassbottle", "PaperTowel", "Mug", "Cup", "Bowl", "Plate", "Apple", "Bread", "Egg",
         "Potato", "Tomato", "WineBottle", "DishSponge", "Kettle", "Fork", "Spoon", "Lettuce",
         "Pan", "Pot"),
    ),
)
"""Room kinds of the out-of-distribution split (none is a training room kind)."""

TRAINING_TYPES: frozenset[str] = frozenset(
    {t for r in ROOMS for t in (*r.receptacles, *r.objects)} | {"DeskLamp"})
"""Every object and receptacle type a training room can hold."""
NOVEL_TYPES: frozenset[str] = frozenset(
    {t for r in OOD_ROOMS for t in (*r.receptacles, *r.objects)} - TRAINING_TYPES)
"""Types of the split that no training game contains."""


def novel_in_task(scene: Any) -> tuple[str, ...]:
    """The novel types among the task's object, its start receptacle and its target."""
    rtype = dict(scene.receptacles)
    source = rtype[scene.objects[0][2]]
    return tuple(sorted({t for t in (scene.object_target, source, scene.parent_target)
                         if t in NOVEL_TYPES}))


@dataclass(frozen=True)
class OodSet:
    """A generated out-of-distribution split."""

    root: Path
    """Its folder."""
    games: tuple[GameRecord, ...]
    """The games, in order."""
    novel: tuple[tuple[str, ...], ...]
    """Per game, its novel types (object, start receptacle, target)."""


def ood_key(base: GameSpec, n: int) -> str:
    """Hex digest naming the split of ``n`` games of the training set ``base``."""
    blob = json.dumps({"base": base.key(), "n": int(n), "version": OOD_VERSION,
                       "rooms": [[r.name, list(r.receptacles), list(r.objects)]
                                 for r in OOD_ROOMS]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _build(root: str, index: int, task_type: str, base: GameSpec,
           first: int = 0) -> tuple[dict[str, Any], int, str]:
    """Draw OOD game ``index`` until a scene with a novel type is solved by the expert;
    returns (record, attempt, problem digest)."""
    cfg = base.config
    knobs = SceneKnobs(cfg.n_receptacles, cfg.n_distractors, cfg.closed_fraction)
    checked = 0
    for attempt in range(first, first + MAX_DRAWS):
        rng = np.random.default_rng([_TAG, base.seed, SPLIT_ID, index, attempt])
        try:
            scene = sample_scene(task_type, knobs, rng, rooms=OOD_ROOMS)
        except (IndexError, ValueError):  # no room of the split poses it this way
            continue
        novel = novel_in_task(scene)
        if not novel:
            continue
        goal = goal_text(scene, int(rng.integers(len(goal_templates(task_type)))))
        problem = render_problem(scene, f"plan_{SPLIT}_{index:05d}")
        parent = scene.parent_target or scene.toggle_target
        rel = (Path(DATA_DIR) / SPLIT / f"{task_type}-{scene.object_target}-None-{parent}-"
               f"{scene.room.floorplan}" / f"trial_{index:05d}")
        trial = Path(root) / rel
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "traj_data.json").write_text(dumps(traj_payload(scene, goal,
                                                                 f"{SPLIT}_{index:05d}")))
        gamefile = trial / "game.tw-pddl"
        gamefile.write_text(dumps(game_payload(problem, goal, None)))
        plan = check_game(str(gamefile), cfg.max_plan_len)
        checked += 1
        if plan is None:
            _remove_trial(trial)
            if checked >= cfg.max_attempts:
                break
            continue
        gamefile.write_text(dumps(game_payload(problem, goal, plan)))
        record = {
            "split": SPLIT, "index": index, "task_type": task_type, "goal": goal,
            "gamefile": str(rel / "game.tw-pddl"), "room": scene.room.name,
            "object_target": scene.object_target, "parent_target": scene.parent_target,
            "toggle_target": scene.toggle_target, "n_receptacles": len(scene.receptacles),
            "n_closed": sum(t in physics().openable for _, t in scene.receptacles),
            "n_objects": len(scene.objects), "expert_plan": plan, "novel": list(novel),
        }
        digest = hashlib.sha256(problem.split("\n", 1)[1].encode()).hexdigest()
        return record, attempt, digest
    raise RuntimeError(f"no solvable out-of-distribution game {index} ({task_type}) after "
                       f"{MAX_DRAWS} draws")


def _build_star(args: tuple[Any, ...]) -> tuple[dict[str, Any], int, str]:
    return _build(*args)


def training_problem_types(games: GameSet) -> set[str]:
    """The ``<Type>Type`` constants the training games' PDDL problems declare, as types."""
    import re

    found: set[str] = set()
    for g in games.train:
        problem = json.loads(Path(g.gamefile).read_text(encoding="utf-8"))["pddl_problem"]
        found.update(re.findall(r"\b(\w+)Type - [or]type", problem))
    return found


def generate_ood(out_dir: Path, games: GameSet, n: int, *, workers: int | None = None
                 ) -> OodSet:
    """Generate ``n`` out-of-distribution games for the training set ``games`` into
    ``out_dir`` (must be empty or absent); the output does not depend on ``workers``."""
    if not 1 <= n <= MAX_GAMES:
        raise UserError(f"the out-of-distribution split has 1..{MAX_GAMES} games",
                        key="--episodes", value=n)
    seen = training_problem_types(games) & NOVEL_TYPES
    if seen:
        raise RuntimeError(f"training games of {games.root} contain {sorted(seen)}: the "
                           "out-of-distribution split would not be out of distribution")
    base = games.spec
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(out), i, t, base) for i, t in enumerate(_task_schedule(base, SPLIT_ID, n))]
    n_workers = workers or max(1, min(os.cpu_count() or 1, len(jobs) // 8))
    if n_workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(n_workers, mp_context=ctx) as pool:
            results = list(pool.map(_build_star, jobs, chunksize=4))
    else:
        results = [_build(*job) for job in jobs]
    digests: set[str] = set()
    records = []
    for job, (record, attempt, digest) in zip(jobs, results, strict=True):
        while digest in digests:  # a duplicate (rare): redraw, serially
            _remove_trial((out / record["gamefile"]).parent)
            record, attempt, digest = _build(*job, attempt + 1)
        digests.add(digest)
        records.append(record)
    manifest = {"base": base.key(), "base_root": games.root.name, "n": n,
                "version": OOD_VERSION, "split": SPLIT, "novel_types": sorted(NOVEL_TYPES),
                "rooms": [r.name for r in OOD_ROOMS], "games": records}
    (out / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return load_ood(out)


def load_ood(root: Path) -> OodSet:
    """The split recorded in ``root/games.json``."""
    root = Path(root).resolve()
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    recs = []
    novel = []
    for r in manifest["games"]:
        novel.append(tuple(r.pop("novel", ())))
        recs.append(GameRecord(**{**r, "gamefile": root / r["gamefile"],
                                  "expert_plan": tuple(r["expert_plan"])}))
    return OodSet(root, tuple(recs), tuple(novel))


def ensure_ood_games(games: GameSet, n: int) -> OodSet:
    """The out-of-distribution split of ``n`` games for ``games``, beside it in its cache
    folder (``ood-<hash>``), generated on first use. Concurrent callers wait on a lock;
    generation happens in a temporary folder renamed into place."""
    cache = games.root.parent
    final = cache / f"ood-{ood_key(games.spec, n)[:16]}"
    if (final / MANIFEST).is_file():
        return load_ood(final)
    with (cache / f".lock-{final.name}").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if (final / MANIFEST).is_file():
                return load_ood(final)
            tmp = temp_dir(cache, ".ood-tmp-")
            try:
                generate_ood(tmp / "set", games, n)
                os.rename(tmp / "set", final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return load_ood(final)
