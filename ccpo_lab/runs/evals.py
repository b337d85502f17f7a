"""A run's checkpoint evaluations: ``evals/<key>.jsonl`` and the jobs that write them.

``ccpo-lab evaluate`` re-scores a run's checkpoints on a common draw of games; each
evaluation (one checkpoint, split, number of games, repeats, temperature and draw: its
:attr:`EvalFile.key`) is one file in the run directory::

    evals/<key>.jsonl          line 1: the header (what was evaluated, the draw's games in
                               order); then one line per episode, repeat by repeat, game by
                               game: game id, task type, success, reward, turns, invalid
                               actions
    evals/jobs/<job>/          an evaluation job (:class:`EvalJobDir`): request.json (the
                               keys it computes), state.json, job.json, owner.lock, logs/,
                               partial/<key>/repeat-<r>.json (finished repeats of a key
                               not yet complete)

A file is written whole, through a temporary file and a rename, once every episode of
every repeat is in: a file that exists is complete, an interrupted evaluation leaves no
file (its finished repeats wait in the job's ``partial/``).

Reading is strict, like ``metrics.jsonl``'s (:mod:`ccpo_lab.runs.metrics`): every reader
goes through :func:`read_eval_file`, which either returns the whole evaluation or raises
:class:`EvalFileError` naming the file, the line and why (a header that is not one, an
episode out of order or of another game than the draw lists, a value of the wrong type,
episodes missing or extra); nothing is used in part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.config.yamlio import atomic_write_text, read_json_object
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import LineProblem, fast_loads

FORMAT = 1
"""Version of the file format (the header's ``eval`` field)."""
EVALS_DIR = "evals"
JOBS_DIR = "jobs"
REQUEST = "request.json"
PARTIAL = "partial"
KEY_RE = re.compile(r"^[a-z]+-step\d{6,}-n\d+-r\d+-t[0-9.e+-]+-[0-9a-f]{8}$")
"""What a key looks like (:func:`ccpo_lab.evaluation.spec.EvalTarget.key`)."""
EPISODE_FIELDS: dict[str, tuple[type, ...]] = {
    "repeat": (int,), "i": (int,), "game": (str,), "task_type": (str,),
    "success": (bool,), "reward": (int, float), "turns": (int,), "invalid": (int,)}
"""The fields of an episode line and their JSON types."""
HEADER_FIELDS: dict[str, tuple[type, ...]] = {
    "eval": (int,), "key": (str,), "run_id": (str,), "arm": (str,), "seed": (int,),
    "backend": (str,), "split": (str,), "episodes": (int,), "repeats": (int,),
    "temperature": (int, float), "checkpoint": (dict,), "draw": (dict,)}
"""The header's required fields and their JSON types."""


class EvalFileError(ValueError):
    """An evaluation file that cannot be used as a whole (its first problem)."""

    def __init__(self, problem: LineProblem) -> None:
        self.problem = problem
        super().__init__(str(problem))


@dataclass(frozen=True)
class EvalFile:
    """One complete evaluation of one checkpoint, as read from its file.

    ``n`` games of the draw, ``r`` repeats; arrays are ``(r, n)``, repeat by repeat, in the
    draw's game order (so two evaluations on one draw line up game by game).
    """

    path: Path
    """The file."""
    header: dict[str, Any]
    """Its first line (what was evaluated, the draw, provenance)."""
    success: np.ndarray
    """bool (r, n): the episode was won."""
    reward: np.ndarray
    """float (r, n): its reward (the sum of the engine's rewards)."""
    turns: np.ndarray
    """int (r, n): its agent turns."""
    invalid: np.ndarray
    """int (r, n): its inadmissible actions."""
    task_types: tuple[str, ...]
    """The task type of each game of the draw (n,)."""

    @property
    def key(self) -> str:
        """The evaluation's key (the file's stem)."""
        return str(self.header["key"])

    @property
    def step(self) -> int:
        """The checkpoint's training step."""
        return int(self.header["checkpoint"]["step"])

    @property
    def split(self) -> str:
        """``in`` or ``out`` (of distribution)."""
        return str(self.header["split"])

    @property
    def games(self) -> tuple[str, ...]:
        """The draw's game ids, in order."""
        return tuple(self.header["draw"]["games"])

    @property
    def draw_id(self) -> str:
        """The draw's id (the same for every run evaluated on the same draw)."""
        return str(self.header["draw"]["id"])

    @property
    def setting(self) -> tuple[str, int, int, float]:
        """``(split, games, repeats, temperature)``."""
        return (self.split, int(self.header["episodes"]), int(self.header["repeats"]),
                float(self.header["temperature"]))


def evals_dir(rd: RunDir) -> Path:
    """``<run>/evals/``."""
    return rd.path / EVALS_DIR


def eval_path(rd: RunDir, key: str) -> Path:
    """``<run>/evals/<key>.jsonl``."""
    return evals_dir(rd) / f"{key}.jsonl"


def eval_files(rd: RunDir) -> list[Path]:
    """The evaluation files of a run, by name (none when it has no ``evals/``)."""
    import os

    d = evals_dir(rd)
    try:
        with os.scandir(d) as it:
            names = [e.name for e in it if e.name.endswith(".jsonl")
                     and not e.name.startswith(".") and e.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / name for name in sorted(names)]


def _typed(obj: Mapping[str, Any], fields: Mapping[str, tuple[type, ...]]) -> str | None:
    """Why ``obj`` lacks a field or has one of the wrong JSON type (None: it is fine)."""
    for name, types in fields.items():
        if name not in obj:
            return f"no {name!r}"
        v = obj[name]
        ok = isinstance(v, types) and (bool in types or not isinstance(v, bool))
        if not ok:
            want = " or ".join(t.__name__ for t in types)
            return f"{name!r} is {json.dumps(v)[:40]}, not {want}"
    return None


def _header_problem(h: Any) -> str | None:
    if not isinstance(h, dict):
        return "the first line is not an evaluation header (a JSON object)"
    why = _typed(h, HEADER_FIELDS)
    if why is not None:
        return f"header: {why}"
    if h["eval"] != FORMAT:
        return f"header: format {h['eval']} (this version reads {FORMAT})"
    if not KEY_RE.match(h["key"]):
        return f"header: key {h['key']!r} is not an evaluation key"
    games = h["draw"].get("games")
    if not isinstance(h["draw"].get("id"), str) or not isinstance(games, list) \
            or not all(isinstance(g, str) for g in games):
        return "header: draw needs an id and its games (a list of game ids)"
    if h["episodes"] < 1 or h["repeats"] < 1 or len(games) != h["episodes"]:
        return (f"header: {h['episodes']} games x {h['repeats']} repeats, and the draw lists "
                f"{len(games)} games")
    if not isinstance(h["checkpoint"].get("step"), int):
        return "header: checkpoint needs its step"
    return None


def read_eval_file(path: str | Path) -> EvalFile:
    """The evaluation in ``path``; :class:`EvalFileError` naming the first line that makes
    it unusable (or ``OSError`` when it cannot be read)."""
    p = Path(path)
    return _parse(p, p.read_bytes(), p.stem)


def _parse(p: Path, data: bytes, stem: str) -> EvalFile:
    """The evaluation in ``data`` (the bytes of file ``p``, whose name is ``stem``)."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    else:
        raise EvalFileError(LineProblem(p, len(raw), "the last line has no line end (cut "
                                        "off?): not used"))

    def fail(line: int, why: str) -> EvalFileError:
        return EvalFileError(LineProblem(p, line, why))

    try:  # every line in one call (a line run into another, or not JSON, fails it)
        rows = fast_loads(b"[" + b",".join(raw) + b"]") if all(raw) else None
    except ValueError:
        rows = None
    if rows is None or len(rows) != len(raw):
        rows = []
        for i, x in enumerate(raw, 1):
            try:
                rows.append(fast_loads(x))
            except ValueError:
                raise fail(i, f"not JSON: {x[:60]!r}") from None
    header = rows[0] if rows else None
    why = _header_problem(header)
    if why is not None:
        raise fail(1, why)
    assert isinstance(header, dict)
    n, r = int(header["episodes"]), int(header["repeats"])
    if len(rows) - 1 != n * r:
        raise fail(len(rows), f"{len(rows) - 1} episodes, the header says {n} games x {r} "
                              f"repeats = {n * r}")
    if stem != header["key"]:
        raise fail(1, f"header: key {header['key']} is not the file's name ({stem})")
    arrays = _quick(rows[1:], header["draw"]["games"], n, r)
    if arrays is None:  # something is wrong: find the line, and say why
        arrays = _episodes(rows[1:], header["draw"]["games"], n, r, fail)
    return EvalFile(p, header, *arrays)


_FIELDS = tuple(EPISODE_FIELDS)


def _quick(rows: list[Any], games: list[str], n: int, r: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]] | None:
    """:func:`_episodes` of a clean file, checked column by column at C speed (None: not
    clean: the slow reader then names the line)."""
    from operator import itemgetter

    if set(map(type, rows)) != {dict} or set(map(len, rows)) != {len(_FIELDS)}:
        return None
    try:
        cols = dict(zip(_FIELDS, zip(*map(itemgetter(*_FIELDS), rows), strict=True),
                        strict=True))
    except KeyError:
        return None
    ints = set(map(type, cols["repeat"])) | set(map(type, cols["i"])) | \
        set(map(type, cols["turns"])) | set(map(type, cols["invalid"]))
    if ints != {int} or set(map(type, cols["success"])) != {bool} or \
            not set(map(type, cols["reward"])) <= {int, float}:
        return None
    if cols["repeat"] != tuple(j // n for j in range(n * r)) or \
            cols["i"] != tuple(range(n)) * r or cols["game"] != tuple(games) * r:
        return None
    types = cols["task_type"][:n]
    if cols["task_type"] != types * r or set(map(type, types)) != {str}:
        return None
    reward = np.array(cols["reward"], dtype=np.float64).reshape(r, n)
    turns = np.array(cols["turns"], dtype=np.int64).reshape(r, n)
    invalid = np.array(cols["invalid"], dtype=np.int64).reshape(r, n)
    if not np.isfinite(reward).all() or (turns < 0).any() or (invalid < 0).any() or \
            (invalid > turns).any():
        return None
    success = np.array(cols["success"], dtype=bool).reshape(r, n)
    return success, reward, turns, invalid, tuple(types)


def _episodes(rows: list[Any], games: list[str], n: int, r: int, fail: Any
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """The episode lines (line 2 on) as (success, reward, turns, invalid) arrays (r, n) and
    the games' task types; ``fail(line, why)`` builds the error of a bad line."""
    success = np.zeros((r, n), dtype=bool)
    reward = np.zeros((r, n), dtype=np.float64)
    turns = np.zeros((r, n), dtype=np.int64)
    invalid = np.zeros((r, n), dtype=np.int64)
    types: list[str] = [""] * n
    for j, e in enumerate(rows):
        line = j + 2
        rep, i = divmod(j, n)
        if not isinstance(e, dict):
            raise fail(line, "not an episode (a JSON object)")
        why = _typed(e, EPISODE_FIELDS)
        if why is not None:
            raise fail(line, why)
        extra = sorted(set(e) - set(EPISODE_FIELDS))
        if extra:
            raise fail(line, f"unexpected field {extra[0]!r}")
        if (e["repeat"], e["i"]) != (rep, i):
            raise fail(line, f"episode (repeat {e['repeat']}, game {e['i']}) where (repeat "
                             f"{rep}, game {i}) belongs: out of order")
        if e["game"] != games[i]:
            raise fail(line, f"game {e['game']!r}, the draw's game {i} is {games[i]!r}")
        if rep and e["task_type"] != types[i]:
            raise fail(line, f"task type {e['task_type']!r}, repeat 0 of the game said "
                             f"{types[i]!r}")
        if not np.isfinite(e["reward"]) or e["turns"] < 0 or not 0 <= e["invalid"] <= \
                max(e["turns"], 0):
            raise fail(line, "reward not finite, or turns / invalid actions out of range")
        types[i] = e["task_type"]
        success[rep, i] = e["success"]
        reward[rep, i] = float(e["reward"])
        turns[rep, i] = e["turns"]
        invalid[rep, i] = e["invalid"]
    return success, reward, turns, invalid, tuple(types)


def write_eval_file(path: str | Path, header: Mapping[str, Any],
                    episodes: Sequence[Mapping[str, Any]]) -> None:
    """Write an evaluation atomically (checked: a file that would not read back as a whole
    evaluation raises ``ValueError`` and nothing is written)."""
    lines = [json.dumps(dict(header), sort_keys=True)]
    lines += [json.dumps({k: e[k] for k in EPISODE_FIELDS}, sort_keys=True) for e in episodes]
    text = "\n".join(lines) + "\n"
    p = Path(path)
    _parse(p, text.encode("utf-8"), p.stem)
    atomic_write_text(p, text)


# ---------------------------------------------------------------- evaluation jobs
@dataclass(frozen=True)
class EvalJobDir(RunDir):
    """An evaluation job's directory, ``<run>/evals/jobs/<id>/``.

    It has what a launcher and the executor need of a run directory (``state.json``,
    ``job.json``, ``owner.lock``, ``logs/``: :class:`~ccpo_lab.runs.layout.RunDir`), so
    every launcher submits it, ``python -m ccpo_lab.runs.execute`` executes it (one
    executor at a time) and ``status`` / ``cancel`` follow it like a run; its arm, seed and
    ``run.json`` are those of the run it evaluates.
    """

    @property
    def run_dir(self) -> RunDir:
        """The run evaluated."""
        return RunDir(self.path.parents[2])

    @property
    def paths_root(self) -> Path:
        """The sweep directory (``<sweep>/<arm>/<seed dir>/evals/jobs/<id>``)."""
        return self.run_dir.sweep_root

    @property
    def request_json(self) -> Path:
        """What the job computes (:func:`write_request`)."""
        return self.path / REQUEST

    @property
    def partial(self) -> Path:
        """Finished repeats of keys not yet complete."""
        return self.path / PARTIAL

    @property
    def arm(self) -> str:
        """The evaluated run's arm."""
        return self.run_dir.arm

    @property
    def seed(self) -> int | None:
        """The evaluated run's seed."""
        return self.run_dir.seed

    @property
    def job_id(self) -> str:
        """The job's id (its directory's name)."""
        return self.path.name

    def place_problem(self, sweep: str | None = None, run_id: str | None = None
                      ) -> tuple[dict[str, Any], str | None]:
        """The evaluated run's ``run.json`` and place check."""
        return self.run_dir.place_problem(sweep, run_id)

    def read_request(self) -> dict[str, Any]:
        """``request.json`` ({} when absent or unreadable)."""
        return read_json_object(self.request_json)

    def partial_file(self, key: str, repeat: int) -> Path:
        """``partial/<key>/repeat-<r>.json``."""
        return self.partial / key / f"repeat-{repeat:04d}.json"


EVAL_JOB_MODULE = "ccpo_lab.evaluation.job"
"""The module executing an evaluation job's directory (``run_eval_job``,
``serve_eval_job``): named here, imported by :func:`eval_job_module` when the generic job
(:mod:`ccpo_lab.runs.execute`) meets such a directory (``evaluation`` sits above ``runs``)."""


def eval_job_module() -> Any:
    """:data:`EVAL_JOB_MODULE`, imported now."""
    import importlib

    return importlib.import_module(EVAL_JOB_MODULE)


def is_eval_job(path: str | Path) -> bool:
    """Whether ``path`` is an evaluation job's directory (it holds a ``request.json``)."""
    p = Path(path)
    return p.parent.name == JOBS_DIR and p.parent.parent.name == EVALS_DIR and \
        (p / REQUEST).is_file()


def job_dirs(rd: RunDir) -> list[EvalJobDir]:
    """The evaluation jobs of a run (oldest first by name)."""
    d = evals_dir(rd) / JOBS_DIR
    if not d.is_dir():
        return []
    return [EvalJobDir(p) for p in sorted(d.iterdir()) if (p / REQUEST).is_file()]


def job_dir(rd: RunDir, job_id: str) -> EvalJobDir:
    """The job directory ``<run>/evals/jobs/<job_id>`` (it may not exist)."""
    return EvalJobDir(evals_dir(rd) / JOBS_DIR / job_id)
