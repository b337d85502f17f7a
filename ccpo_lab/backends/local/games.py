"""Generated ALFWorld games: ALFRED-style PDDL problems for the six task types.

``generate_games`` writes games in ALFWorld's data layout (``json_2.1.1/<split>/<task dir>/
trial_<i>/{game.tw-pddl,traj_data.json}``, splits ``train`` and ``valid_seen`` = ALFWorld's
``eval_in_distribution``) plus a ``games.json`` manifest. Every game is played through by
ALFWorld's planner expert (fast-downward) on the real engine before it is kept. The same
seed gives byte-identical files: all randomness comes from numpy Generators keyed by
(seed, split, game index, attempt), so game ``i`` does not depend on how many games are
made. ``ensure_games`` caches a game set under a hash of its spec.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.atomic import temp_dir
from ccpo_lab.backends.local.catalog import TASK_TYPES, physics
from ccpo_lab.backends.local.checker import check_game
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

GENERATOR_VERSION = 1
"""Bump when generated content changes: it is part of the cache key."""
SPLITS: tuple[str, ...] = ("train", "valid_seen")
SPLIT_NAMES: dict[str, str] = {
    "train": "train", "eval": "valid_seen", "eval_in_distribution": "valid_seen",
    "valid_seen": "valid_seen",
}
"""Accepted split names -> folder name (``eval`` is ALFWorld's ``eval_in_distribution``)."""
MANIFEST = "games.json"
DATA_DIR = "json_2.1.1"
_TAG = 0xA1F


@dataclass(frozen=True)
class GameGenConfig:
    """Difficulty knobs of generated rooms (defaults: small games a tiny policy can learn)."""

    n_receptacles: int = 4
    """Receptacles per room (>= 3: source, target and a sink/microwave/fridge/lamp table)."""
    n_distractors: int = 2
    """Objects besides the task's, of distinct other types (so the goal stays unambiguous;
    capped by how many other object types the room kind offers)."""
    closed_fraction: float = 0.3
    """Chance that a receptacle slot (incl. the target object's source) is an openable one
    (fridge, cabinet, drawer, microwave, safe), which starts closed."""
    task_types: tuple[str, ...] = TASK_TYPES
    """Task types to generate, cycled evenly (each block of len(task_types) games has one
    of each, in a seeded random order)."""
    max_plan_len: int = 12
    """Reject (and redraw) a game whose expert plan is longer."""
    max_attempts: int = 50
    """Redraws per game before generation fails."""

    def validate(self) -> None:
        """Raise UserError naming the first bad knob."""
        if self.n_receptacles < 3 or self.n_receptacles > 12:
            raise UserError("n_receptacles must be in 3..12", key="n_receptacles",
                            value=self.n_receptacles)
        if not 0 <= self.n_distractors <= 10:
            raise UserError("n_distractors must be in 0..10", key="n_distractors",
                            value=self.n_distractors)
        if not 0.0 <= self.closed_fraction <= 1.0:
            raise UserError("closed_fraction must be in [0, 1]", key="closed_fraction",
                            value=self.closed_fraction)
        bad = [t for t in self.task_types if t not in TASK_TYPES]
        if bad or not self.task_types or len(set(self.task_types)) != len(self.task_types):
            raise UserError("task_types must be distinct ALFWorld task types", key="task_types",
                            value=list(self.task_types), valid=TASK_TYPES)
        if self.max_plan_len < 1 or self.max_attempts < 1:
            raise UserError("max_plan_len and max_attempts must be >= 1", key="max_plan_len",
                            value=(self.max_plan_len, self.max_attempts))


@dataclass(frozen=True)
class GameSpec:
    """Everything that determines a game set's content."""

    n_train: int
    n_eval: int
    seed: int
    config: GameGenConfig = field(default_factory=GameGenConfig)

    def validate(self) -> None:
        """Raise UserError on a bad count, seed or knob."""
        for key, value in (("n_train", self.n_train), ("n_eval", self.n_eval)):
            if not isinstance(value, int) or value < 0:
                raise UserError(f"{key} must be an integer >= 0", key=key, value=value)
        if self.n_train + self.n_eval == 0:
            raise UserError("need at least one game", key="n_train", value=0)
        if not isinstance(self.seed, int) or self.seed < 0:
            raise UserError("seed must be an integer >= 0", key="seed", value=self.seed)
        self.config.validate()

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form (what the manifest stores and the cache key hashes)."""
        d = asdict(self)
        d["config"]["task_types"] = list(self.config.task_types)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GameSpec:
        """Inverse of :meth:`to_json`."""
        cfg = dict(d["config"])
        cfg["task_types"] = tuple(cfg["task_types"])
        return cls(n_train=d["n_train"], n_eval=d["n_eval"], seed=d["seed"],
                   config=GameGenConfig(**cfg))

    def key(self) -> str:
        """Hex digest naming this spec's cache folder (engine version included)."""
        from importlib.metadata import version

        blob = json.dumps({"spec": self.to_json(), "generator": GENERATOR_VERSION,
                           "alfworld": version("alfworld")}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class GameRecord:
    """One generated game."""

    split: str
    """``train`` or ``valid_seen``."""
    index: int
    task_type: str
    goal: str
    """Task description, as shown after ``Your task is to:`` (without the final dot)."""
    gamefile: Path
    """Absolute path of ``game.tw-pddl``."""
    room: str
    object_target: str
    parent_target: str
    toggle_target: str
    n_receptacles: int
    n_closed: int
    """Receptacles that start closed."""
    n_objects: int
    expert_plan: tuple[str, ...]
    """The planner expert's plan from the start (also the game file's ``walkthrough``)."""


@dataclass(frozen=True)
class GameSet:
    """What :func:`generate_games` wrote."""

    root: Path
    spec: GameSpec
    train: tuple[GameRecord, ...]
    eval: tuple[GameRecord, ...]

    def split(self, name: str) -> tuple[GameRecord, ...]:
        """Games of split ``name`` (train, eval, eval_in_distribution or valid_seen)."""
        if name not in SPLIT_NAMES:
            raise UserError("unknown game split", value=name, valid=sorted(SPLIT_NAMES))
        return self.train if SPLIT_NAMES[name] == "train" else self.eval

    def alfworld_config(self) -> dict[str, Any]:
        """A config with which ``AlfredTWEnv(config, train_eval)`` finds exactly these games."""
        from importlib import resources

        data = resources.files("alfworld") / "data"
        split_dir = self.root / DATA_DIR
        return {
            "dataset": {"data_path": str(split_dir / "train"),
                        "eval_id_data_path": str(split_dir / "valid_seen"),
                        "eval_ood_data_path": str(split_dir / "valid_unseen"),
                        "num_train_games": -1, "num_eval_games": -1},
            "logic": {"domain": str(data / "alfred.pddl"), "grammar": str(data / "alfred.twl2")},
            "env": {"type": "AlfredTWEnv", "domain_randomization": False,
                    "task_types": [TASK_TYPES.index(t) + 1 for t in self.spec.config.task_types],
                    "expert_type": "planner", "goal_desc_human_anns_prob": 0.0},
            "general": {"training_method": "dagger"},
            "dagger": {"training": {"max_nb_steps_per_episode": 50}},
        }

    def summary(self) -> dict[str, Any]:
        """Counts per split and task type, mean expert plan length, room sizes."""
        out: dict[str, Any] = {"root": str(self.root), "seed": self.spec.seed}
        for name, games in (("train", self.train), ("eval", self.eval)):
            plans = [len(g.expert_plan) for g in games]
            out[name] = {
                "n_games": len(games),
                "per_task_type": {t: sum(g.task_type == t for g in games)
                                  for t in self.spec.config.task_types},
                "mean_plan_len": float(np.mean(plans)) if plans else math.nan,
                "max_plan_len": max(plans, default=0),
                "mean_receptacles": float(np.mean([g.n_receptacles for g in games]))
                if games else math.nan,
                "mean_closed": float(np.mean([g.n_closed for g in games])) if games else math.nan,
                "mean_objects": float(np.mean([g.n_objects for g in games]))
                if games else math.nan,
            }
        return out


# ----------------------------------------------------------------------------- generation


def _task_schedule(spec: GameSpec, split_id: int, n: int) -> list[str]:
    types = spec.config.task_types
    out: list[str] = []
    for cycle in range(math.ceil(n / len(types))):
        perm = np.random.default_rng([_TAG, spec.seed, split_id, 0, cycle]).permutation(len(types))
        out += [types[int(j)] for j in perm]
    return out[:n]


def _build(root: str, split: str, index: int, task_type: str, spec: GameSpec,
           first_attempt: int) -> tuple[dict[str, Any], int, str]:
    """Draw game (split, index) until the expert solves it; returns (record, attempt, hash)."""
    cfg = spec.config
    knobs = SceneKnobs(cfg.n_receptacles, cfg.n_distractors, cfg.closed_fraction)
    split_id = SPLITS.index(split)
    for attempt in range(first_attempt, first_attempt + cfg.max_attempts):
        rng = np.random.default_rng([_TAG, spec.seed, split_id, 1, index, attempt])
        scene = sample_scene(task_type, knobs, rng)
        goal = goal_text(scene, int(rng.integers(len(goal_templates(task_type)))))
        problem = render_problem(scene, f"plan_{split}_{index:05d}")
        parent = scene.parent_target or scene.toggle_target
        rel = (Path(DATA_DIR) / split / f"{task_type}-{scene.object_target}-None-{parent}-"
               f"{scene.room.floorplan}" / f"trial_{index:05d}")
        trial = Path(root) / rel
        trial.mkdir(parents=True, exist_ok=True)
        (trial / "traj_data.json").write_text(
            dumps(traj_payload(scene, goal, f"{split}_{index:05d}")))
        gamefile = trial / "game.tw-pddl"
        gamefile.write_text(dumps(game_payload(problem, goal, None)))
        plan = check_game(str(gamefile), cfg.max_plan_len)
        if plan is None:
            _remove_trial(trial)
            continue
        gamefile.write_text(dumps(game_payload(problem, goal, plan)))
        record = {
            "split": split, "index": index, "task_type": task_type, "goal": goal,
            "gamefile": str(rel / "game.tw-pddl"), "room": scene.room.name,
            "object_target": scene.object_target, "parent_target": scene.parent_target,
            "toggle_target": scene.toggle_target, "n_receptacles": len(scene.receptacles),
            "n_closed": sum(t in physics().openable for _, t in scene.receptacles),
            "n_objects": len(scene.objects), "expert_plan": plan,
        }
        digest = hashlib.sha256(problem.split("\n", 1)[1].encode()).hexdigest()
        return record, attempt, digest
    raise RuntimeError(f"no solvable game for {split}[{index}] ({task_type}) after "
                       f"{cfg.max_attempts} attempts")


def _remove_trial(trial: Path) -> None:
    shutil.rmtree(trial, ignore_errors=True)
    with contextlib.suppress(OSError):
        trial.parent.rmdir()  # the task folder, if no other trial lives there


def _build_star(args: tuple[Any, ...]) -> tuple[dict[str, Any], int, str]:
    return _build(*args)


def generate_games(out_dir: Path, n_train: int, n_eval: int, seed: int,
                   config: GameGenConfig | None = None, *, workers: int | None = None) -> GameSet:
    """Generate and write a game set into ``out_dir`` (created; must be empty or absent).

    ``workers`` processes check games in parallel (default: one per CPU, at most one per
    8 games); the output does not depend on it. Eval games duplicating an earlier game
    (same PDDL problem) are redrawn, so the held-out split is disjoint from training.
    """
    spec = GameSpec(n_train=n_train, n_eval=n_eval, seed=seed, config=config or GameGenConfig())
    spec.validate()
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise UserError("output folder is not empty", file=out)
    out.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[str, str, int, str, GameSpec, int]] = []
    for split, n in (("train", n_train), ("valid_seen", n_eval)):
        for index, task_type in enumerate(_task_schedule(spec, SPLITS.index(split), n)):
            jobs.append((str(out), split, index, task_type, spec, 0))
    n_workers = workers or max(1, min(os.cpu_count() or 1, len(jobs) // 8))
    if n_workers > 1:
        import multiprocessing

        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(n_workers, mp_context=ctx) as pool:
            results = list(pool.map(_build_star, jobs, chunksize=4))
    else:
        results = [_build(*job) for job in jobs]

    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    for job, (record, attempt, digest) in zip(jobs, results, strict=True):
        while digest in seen:  # redraw a duplicate (rare), serially and deterministically
            _remove_trial((out / record["gamefile"]).parent)
            record, attempt, digest = _build(*job[:5], attempt + 1)
        seen.add(digest)
        records.append(record)
    manifest = {"spec": spec.to_json(), "generator": GENERATOR_VERSION, "games": records}
    (out / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return load_game_set(out)


def load_game_set(root: Path) -> GameSet:
    """The GameSet recorded in ``root/games.json``."""
    root = Path(root).resolve()
    path = root / MANIFEST
    if not path.is_file():
        raise UserError("not a generated game folder (no games.json)", file=root)
    manifest = json.loads(path.read_text())
    spec = GameSpec.from_json(manifest["spec"])
    recs = [GameRecord(**{**r, "gamefile": root / r["gamefile"],
                          "expert_plan": tuple(r["expert_plan"])}) for r in manifest["games"]]
    return GameSet(root=root, spec=spec, train=tuple(r for r in recs if r.split == "train"),
                   eval=tuple(r for r in recs if r.split == "valid_seen"))


def ensure_games(cache_root: Path, spec: GameSpec) -> GameSet:
    """The game set of ``spec`` under ``cache_root/games-<hash>``, generated if missing.

    Generation happens in a private temporary folder renamed into place at the end, so
    concurrent callers never see a partial set; a loser of the race discards its copy.
    """
    spec.validate()
    cache_root = Path(cache_root)
    final = cache_root / f"games-{spec.key()[:16]}"
    if (final / MANIFEST).is_file():
        return load_game_set(final)
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(cache_root, ".games-tmp-")
    try:
        generate_games(tmp / "set", spec.n_train, spec.n_eval, spec.seed, spec.config)
        try:
            os.rename(tmp / "set", final)
        except OSError:
            if not (final / MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load_game_set(final)


def make_games(out_dir: Path, n_train: int, n_eval: int, seed: int,
               config: GameGenConfig | None = None) -> tuple[GameSet, dict[str, Any]]:
    """For ``ccpo-lab games make``: generate, print nothing, return (GameSet, summary)."""
    game_set = generate_games(out_dir, n_train, n_eval, seed, config)
    return game_set, game_set.summary()
