"""The results layout: the one gateway to a sweep's and a run's files, and the identity guard.

``<results>/<sweep>/`` (:class:`SweepDir`) holds::

    sweep.json         the resolved sweep, its runs and submissions (the manifest)
    adaptive.json      an adaptive seed design's state: the design and every look
    adaptive.lock      held (flock) by the command taking the design's decisions
    _jobs/             sweep-level launcher files (Slurm arrays, local pool queues and logs)
    _replaced/         runs that never trained, set aside for a corrected configuration
    <arm>/seed-<k>/    one run (:class:`RunDir`)

and a run directory holds::

    config.yaml        the resolved configuration (identity first, then the launcher)
    run.json           run id, arm, seed, estimator, provenance, backend-written fields
    state.json         state (pending/running/completed/failed/cancelled/interrupted), step
    job.json           the launcher's record: current submission and earlier ones
    owner.lock         held (flock) by the one process executing the run (runs/owner.py)
    metrics.jsonl      one {"step": N, "data": {...}} per line (verl's file-logger format)
    rollouts/          step-1 rollouts (``step-000001.jsonl``)
    checkpoints/       resumable checkpoints
    logs/              launcher logs

:class:`SweepDir` is the one lister of a sweep's runs (:meth:`SweepDir.run_dirs` for
every directory, pending ones included; :meth:`SweepDir.discover` and
:meth:`SweepDir.newest` for the runs a reader uses and the directories it leaves out) and
the one reader of its manifest (:meth:`SweepDir.read_manifest`).

Nothing else in ccpo-lab joins these names to a path, and what is read here is read
through the run-file gateway (:mod:`ccpo_lab.runs.files`): a file that leads out of the
sweep directory, or is not a regular file, is not read. A run directory that holds another
identity is never overwritten: the launch is refused with a key-by-key diff, or
(``new_run``) the run goes beside it in ``seed-<k>.<n>``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.environments import DEFAULT_ENVIRONMENT
from ccpo_lab.config.identity import diff, format_diff, to_plain
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.schema import BackendConfig, EnvConfig, EstimatorConfig, RunConfig
from ccpo_lab.config.validate import build
from ccpo_lab.config.yamlio import (
    YamlLimitError,
    atomic_write_json,
    atomic_write_text,
    dump_yaml,
    load_yaml_file,
    safe_load_bounded,
)
from ccpo_lab.errors import RunConflictError, UserError
from ccpo_lab.estimators.spec import resolve_params
from ccpo_lab.runs.files import RunFileError, check_inside, excerpt, read_small
from ccpo_lab.runs.provenance import now_iso, provenance

RUN_STATES = ("pending", "running", "completed", "failed", "cancelled", "interrupted",
              "requeued")
"""What ``state.json`` may say. ``interrupted``: stopped from outside (a signal, a lost
node, a time limit) before an outcome of its own; like ``cancelled`` it resumes from its
checkpoint on a relaunch. ``failed``: the run itself failed (an exception, a non-zero
exit); it is resubmitted only on request."""
MANIFEST = "sweep.json"
"""The sweep's manifest file."""
ADAPTIVE_STATE = "adaptive.json"
"""The adaptive design's state file (:mod:`ccpo_lab.adaptive.store`)."""
ADAPTIVE_LOCK = "adaptive.lock"
"""Its lock file (the kernel frees the lock when the holder dies)."""
JOBS_DIR = "_jobs"
"""Sweep-level launcher folder; arm names cannot start with '_', so it never collides."""
SEED_DIR_RE = re.compile(r"^seed-(\d+)(?:\.(\d+))?$")
"""``seed-<k>`` or ``seed-<k>.<n>``: the name of a run directory."""
MAX_SEED = 2**31 - 1
"""Largest seed (seeds are 32-bit signed integers for every generator that uses them)."""
_HISTORY = 20
"""Earlier submissions kept in ``job.json``."""



@dataclass(frozen=True)
class RunDir:
    """One run directory: its paths and its files (read and written here only)."""

    path: Path
    """The directory."""

    @property
    def config_yaml(self) -> Path:
        """Resolved configuration."""
        return self.path / "config.yaml"

    @property
    def run_json(self) -> Path:
        """Identity and provenance."""
        return self.path / "run.json"

    @property
    def state_json(self) -> Path:
        """Current state."""
        return self.path / "state.json"

    @property
    def job_json(self) -> Path:
        """The launcher's record of the run's submissions."""
        return self.path / "job.json"

    @property
    def owner_lock(self) -> Path:
        """Locked by the process executing the run (:mod:`ccpo_lab.runs.owner`)."""
        return self.path / "owner.lock"

    @property
    def metrics(self) -> Path:
        """Metrics, one JSON object per line."""
        return self.path / "metrics.jsonl"

    @property
    def rollouts(self) -> Path:
        """Step-1 rollouts."""
        return self.path / "rollouts"

    @property
    def checkpoints(self) -> Path:
        """Checkpoints."""
        return self.path / "checkpoints"

    @property
    def logs(self) -> Path:
        """Launcher logs."""
        return self.path / "logs"

    @property
    def sweep_root(self) -> Path:
        """The sweep directory its files must stay inside (``<sweep>/<arm>/seed-<k>``)."""
        return self.path.parent.parent

    @property
    def paths_root(self) -> Path:
        """The folder the paths in its files are stored relative to: the sweep directory
        (a moved sweep directory still finds them)."""
        return self.sweep_root

    def read_json(self, path: Path) -> dict[str, Any]:
        """One of its JSON files, read through the gateway: {} when absent; raises
        ``OSError`` (a :class:`~ccpo_lab.runs.files.RunFileError` for a file the gateway
        refuses) or ``ValueError`` (not UTF-8 JSON, or not an object)."""
        try:
            data = json.loads(read_small(path, self.sweep_root))
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data

    def read_config(self) -> dict[str, Any]:
        """``config.yaml`` as a mapping, through the gateway ({} when absent).

        Raises:
            RunFileError: a file the gateway does not read (a link out of the sweep).
            ValueError: not UTF-8, malformed YAML (one line: where and what) or not a
                mapping.
            OSError: it cannot be read.
        """
        import yaml

        try:
            text = read_small(self.config_yaml, self.sweep_root).decode("utf-8")
        except FileNotFoundError:
            return {}
        except UnicodeDecodeError as e:
            raise ValueError(f"not UTF-8 (byte {e.start})") from None
        try:
            doc = safe_load_bounded(text)
        except yaml.YAMLError as e:
            raise ValueError(yaml_problem(e)) from None
        if not isinstance(doc, dict):
            raise ValueError("not a YAML mapping")
        return doc

    def read_json_quietly(self, path: Path) -> dict[str, Any]:
        """:meth:`read_json`, {} when absent or unreadable (for readers that only need
        what they can get: ``status`` says the file is unreadable elsewhere)."""
        try:
            return self.read_json(path)
        except (OSError, ValueError):
            return {}

    @property
    def arm(self) -> str:
        """The arm, from the directory's place (``<sweep>/<arm>/seed-<k>``)."""
        return self.path.parent.name

    @property
    def seed(self) -> int | None:
        """The seed, from the directory's name (None when not ``seed-<k>[.<n>]``)."""
        m = SEED_DIR_RE.match(self.path.name)
        return int(m.group(1)) if m else None

    @property
    def suffix(self) -> int:
        """``<n>`` of ``seed-<k>.<n>`` (1 for ``seed-<k>``)."""
        m = SEED_DIR_RE.match(self.path.name)
        return int(m.group(2) or 1) if m else 1

    def exists(self) -> bool:
        """Whether the directory holds a run (a ``run.json``)."""
        return self.run_json.is_file()

    def read_run(self) -> dict[str, Any]:
        """``run.json`` as a dict ({} when absent; ``OSError``/``ValueError`` when it cannot
        be read, so that no writer takes a damaged run for a missing one)."""
        return self.read_json(self.run_json)

    def place_problem(self, sweep: str | None = None, run_id: str | None = None
                      ) -> tuple[dict[str, Any], str | None]:
        """``run.json`` and why this directory is not a run of its place (None when it is).

        Its place is ``<sweep>/<arm>/seed-<k>[.<n>]``: ``run.json`` must exist, be a JSON
        object, and name this arm and seed; and, when given, the sweep's name (``sweep``)
        and the run id the sweep's manifest lists for this directory (``run_id``).
        A directory copied in from another sweep, or whose ``run.json`` was deleted or
        edited, is refused this way by every reader (report, verify, sync, status).
        """
        try:
            data = json.loads(read_small(self.run_json, self.sweep_root))
        except FileNotFoundError:
            return {}, "no run.json (deleted?): the run cannot be identified"
        except RunFileError as e:
            return {}, f"run.json {e.why}"
        except (OSError, ValueError) as e:
            return {}, f"run.json unreadable ({type(e).__name__}: {e})"
        if not isinstance(data, dict):
            return {}, "run.json is not a JSON object"
        return data, _place_mismatch(self, data, sweep, run_id)

    def update_run(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into ``run.json`` (atomic rewrite); return the new content."""
        data = self.read_run()
        data.update(fields)
        atomic_write_json(self.run_json, data)
        return data

    def read_state(self) -> dict[str, Any]:
        """``state.json`` as a dict ({} when absent or unreadable)."""
        return self.read_json_quietly(self.state_json)

    def write_state(self, state: str, **info: Any) -> None:
        """Record the run's state (one of :data:`RUN_STATES`) with extra info.

        The first ``step`` a running attempt records (after ``rate_from`` was reset to
        None when it started) becomes its ``rate_from`` ``{step, time}``: the origin of the
        steps/s and ETA that ``status`` shows (set-up and resuming excluded).
        """
        if state not in RUN_STATES:
            raise ValueError(f"unknown run state {state!r}; valid: {RUN_STATES}")
        now = now_iso()
        data = {**self.read_state(), **info, "state": state, "updated": now}
        if state == "running" and "step" in info and "rate_from" in data \
                and data["rate_from"] is None:
            data["rate_from"] = {"step": info["step"], "time": now}
        atomic_write_json(self.state_json, data)

    def read_job(self) -> dict[str, Any]:
        """The current submission (``job.json``; {} when never submitted or unreadable),
        its paths (:data:`JOB_PATHS`) absolute under the sweep directory as it is now."""
        return self._job_paths(self.read_json_quietly(self.job_json), sweep_path)

    def record_job(self, **fields: Any) -> dict[str, Any]:
        """Record a new submission (written by launchers only, never by the job); the
        previous one moves to ``history``."""
        old = self.read_job()
        history = list(old.pop("history", []))
        if old:
            history.append(old)
        data = {"submitted": now_iso(), "host": socket.gethostname(), **fields,
                "history": history[-_HISTORY:]}
        atomic_write_json(self.job_json, self._job_paths(data, stored_path))
        return data

    def update_job(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the current submission record."""
        data = self.read_job()
        data.update(fields)
        atomic_write_json(self.job_json, self._job_paths(data, stored_path))
        return data

    def _job_paths(self, data: dict[str, Any],
                   convert: Callable[[Any, Path, tuple[str, ...]], Any]) -> dict[str, Any]:
        """``data`` with its :data:`JOB_PATHS` (and its history's) converted."""
        root = self.paths_root
        hint = self.path.relative_to(root).parts if self.path.is_relative_to(root) else ()
        out = {k: convert(v, root, hint) if k in JOB_PATHS else v for k, v in data.items()}
        if isinstance(out.get("history"), list):
            out["history"] = [self._job_paths(h, convert) if isinstance(h, dict) else h
                              for h in out["history"]]
        return out


JOB_PATHS = ("folder", "stdout", "stderr", "pool_queue")
"""The keys of ``job.json`` holding paths: stored relative to the sweep directory, so a
sweep directory copied or moved elsewhere reads as before."""


def stored_path(value: Any, root: Path, hint: tuple[str, ...] = ()) -> Any:
    """A path to store in a file of the sweep directory ``root``: relative to ``root``
    when it lies inside it (a moved sweep directory still finds it), else as it is."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return value
    try:
        return os.path.relpath(value, root) if Path(value).resolve().is_relative_to(
            root.resolve()) else value
    except (OSError, ValueError):
        return value


def sweep_path(value: Any, root: Path, hint: tuple[str, ...] = ()) -> Any:
    """A stored path as an absolute path under the sweep directory ``root`` as it is now.

    A relative path is joined to ``root``. An absolute one written before paths were
    stored relative (or from where the sweep directory was before it moved) is re-rooted
    at its last ``_jobs`` part or its last run of the directory's own place under the
    sweep (``hint``: ``<arm>/<seed dir>``, an evaluation job's longer) when it is not
    under ``root``; anything else is returned as it is (the gateway refuses what is
    outside).
    """
    if not isinstance(value, str) or not value:
        return value
    if not os.path.isabs(value):
        return str(root / value)
    parts = Path(value).parts
    if Path(value).is_relative_to(root):
        return value
    k = len(hint)
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "_jobs":
            return str(root.joinpath(*parts[i:]))
        if k and i - k + 1 >= 1 and parts[i - k + 1:i + 1] == tuple(hint):
            return str(root.joinpath(*parts[i - k + 1:]))
    return value


def yaml_problem(e: Exception) -> str:
    """One line for a YAML error: where, and what (PyYAML's own text spans lines); a
    document beyond the readers' bounds is not called malformed."""
    if isinstance(e, YamlLimitError):
        return f"YAML {getattr(e, 'problem', None) or e}"
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    what = getattr(e, "problem", None) or (str(e).splitlines() or [type(e).__name__])[0]
    return f"malformed YAML{where}: {what}"


def _place_mismatch(rd: RunDir, data: Mapping[str, Any], sweep: str | None,
                    run_id: str | None) -> str | None:
    """What ``run.json`` says that its directory's place contradicts (None: nothing)."""
    wrong = []
    if data.get("arm") != rd.arm:
        wrong.append(f"arm {data.get('arm')} (here {rd.arm})")
    if data.get("seed") != rd.seed or isinstance(data.get("seed"), bool):
        wrong.append(f"seed {data.get('seed')} (here {rd.seed})")
    if sweep is not None and data.get("sweep") != sweep:
        wrong.append(f"sweep {data.get('sweep')} (here {sweep})")
    if wrong:
        return ("its run.json belongs elsewhere: " + ", ".join(wrong)
                + " (a run directory copied from another place?)")
    if run_id is not None and data.get("run_id") != run_id:
        return (f"its run id {str(data.get('run_id'))[:12]} is not the run the sweep's "
                f"manifest lists here ({run_id[:12]}): replaced or edited by hand?")
    return None


@dataclass(frozen=True)
class Placed:
    """A run directory found in a sweep directory, with its ``run.json``."""

    rd: RunDir
    """The directory."""
    run: dict[str, Any]
    """``run.json`` ({} when missing or unreadable)."""
    problem: str | None
    """Why it is not a run of its place (None: it is); see :meth:`RunDir.place_problem`."""


_RUN_FILES = ("run.json", "config.yaml", "state.json", "metrics.jsonl")
"""A directory holding none of these holds no run (an empty or log-only directory)."""


def run_dir_name(seed: int, n: int = 1) -> str:
    """``seed-<k>`` for the first run of a seed, ``seed-<k>.<n>`` for later ones."""
    return f"seed-{seed}" if n == 1 else f"seed-{seed}.{n}"


def candidate_dirs(sweep_dir: Path, arm: str, seed: int) -> list[Path]:
    """Existing directories of (arm, seed), in creation order (``seed-k``, ``seed-k.2``...)."""
    base = Path(sweep_dir) / arm
    if not base.is_dir():
        return []
    found = []
    for p in base.iterdir():
        m = SEED_DIR_RE.match(p.name)
        if m and int(m.group(1)) == seed and p.is_dir():
            found.append((int(m.group(2) or 1), p))
    return [p for _, p in sorted(found)]


@dataclass(frozen=True)
class FoundRun:
    """One run of a sweep: a directory whose ``run.json`` agrees with its place."""

    arm: str
    """Arm (the parent directory's name)."""
    seed: int
    """Seed (from ``seed-<k>``)."""
    path: Path
    """The run directory."""
    suffix: int
    """``<n>`` of ``seed-<k>.<n>`` (1 for ``seed-<k>``)."""
    siblings: tuple[str, ...] = ()
    """Names of every directory of this (arm, seed), oldest first (itself included)."""

    @property
    def superseded_note(self) -> str | None:
        """One line saying which directory of several is used, or None if it is alone."""
        if len(self.siblings) < 2:
            return None
        return (f"{self.arm} seed {self.seed}: {len(self.siblings)} directories "
                f"({', '.join(self.siblings)}); using the newest, {self.path.name}")


@dataclass(frozen=True)
class LeftOut:
    """A directory that holds run files but is not a run of its place."""

    arm: str
    """Its arm directory."""
    seed: int
    """The seed of its name."""
    path: Path
    """The directory."""
    why: str
    """Why it is left out."""

    @property
    def file(self) -> Path:
        """The file at fault (``run.json``)."""
        return self.path / "run.json"

    @property
    def text(self) -> str:
        """One line: which directory, left out, why."""
        return f"{self.arm}/{self.path.name}: left out: {self.why}"


def newest_runs(found: list[FoundRun]) -> dict[tuple[str, int], FoundRun]:
    """The newest directory (highest ``<n>``) of each (arm, seed) of ``found``."""
    out: dict[tuple[str, int], FoundRun] = {}
    for r in found:
        cur = out.get((r.arm, r.seed))
        if cur is None or r.suffix > cur.suffix:
            out[(r.arm, r.seed)] = r
    return out


@dataclass(frozen=True)
class SweepDir:
    """A sweep's results directory ``<results>/<sweep>``: manifest, launcher files, runs."""

    path: Path
    """The directory."""

    @property
    def manifest(self) -> Path:
        """``sweep.json``."""
        return self.path / MANIFEST

    @property
    def jobs(self) -> Path:
        """``_jobs/``: sweep-level launcher files."""
        return self.path / JOBS_DIR

    @property
    def adaptive_state(self) -> Path:
        """``adaptive.json``: the adaptive design's state (absent for fixed seeds)."""
        return self.path / ADAPTIVE_STATE

    @property
    def adaptive_lock(self) -> Path:
        """``adaptive.lock``: locked by the command deciding the design's looks."""
        return self.path / ADAPTIVE_LOCK

    def run_dir(self, arm: str, seed: int, n: int = 1) -> RunDir:
        """The run directory of (arm, seed), ``n``-th of its kind (it may not exist)."""
        return RunDir(self.path / arm / run_dir_name(seed, n))

    def read_manifest(self) -> dict[str, Any]:
        """The manifest as written, read through the gateway ({} when absent).

        Raises:
            UserError: naming the file, when the gateway refuses it (a link out of the
                sweep), it cannot be read or parsed, or it is not a JSON object: a damaged
                manifest is never taken for a missing one (nor overwritten as one).
        """
        p = self.manifest
        if not p.is_file() and not p.is_symlink():
            return {}
        try:
            doc = json.loads(read_small(p, self.path))
        except RunFileError as e:
            raise UserError(f"sweep manifest {e.why}", file=p) from None
        except (OSError, ValueError) as e:
            raise UserError(f"unreadable sweep manifest: {e}", file=p) from None
        if not isinstance(doc, dict):
            raise UserError("sweep manifest must be a JSON object", file=p)
        for key, kind, item in (("arms", list, str), ("seeds", list, int),
                                ("runs", list, dict), ("config", dict, None),
                                ("analysis", dict, None)):
            v = doc.get(key)
            if v is None:
                continue
            if not isinstance(v, kind) or (item is not None and not all(
                    isinstance(x, item) and not isinstance(x, bool) for x in v)):
                what = f"a list of {item.__name__}" if item is not None else "an object"
                raise UserError(f"sweep manifest: must be {what}", file=p, key=key,
                                value=v if isinstance(v, int | float | str) else
                                json.dumps(v)[:200])
        return doc

    def write_manifest(self, data: Mapping[str, Any]) -> None:
        """Replace the manifest (atomically)."""
        atomic_write_json(self.manifest, dict(data))

    @property
    def replaced(self) -> Path:
        """``_replaced/``: run directories set aside for a corrected configuration."""
        return self.path / "_replaced"

    def set_aside(self, rd: RunDir) -> Path:
        """Move run directory ``rd`` to ``_replaced/<arm>/<name>-<time>`` (kept, out of
        every reader's way); return where it went."""
        import time

        dest = self.replaced / rd.arm / f"{rd.path.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        n = 1
        while dest.exists():
            n += 1
            dest = dest.with_name(f"{dest.name.split('~')[0]}~{n}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        rd.path.rename(dest)
        return dest

    def add_submission(self, **fields: Any) -> None:
        """Append one submission record (launcher, job ids, runs, time) to the manifest."""
        data = self.read_manifest()
        fields = {k: stored_path(v, self.path) for k, v in fields.items()}
        data.setdefault("submissions", []).append({"time": now_iso(), **fields})
        data["submissions"] = data["submissions"][-200:]
        self.write_manifest(data)

    def sweep_name(self, data: Mapping[str, Any] | None = None) -> str | None:
        """The sweep's name from its manifest (None without a manifest); ``data``: the
        manifest, when already read."""
        data = self.read_manifest() if data is None else data
        config = data.get("config")
        name = data.get("sweep") or (config.get("name") if isinstance(config, dict) else None)
        return name if isinstance(name, str) and name else None

    def _identity(self) -> tuple[str | None, dict[str, Any]]:
        """The sweep's name and the run id its manifest lists per directory
        (``<arm>/seed-<k>``)."""
        data = self.read_manifest()
        listed = {e["dir"]: e.get("run_id") for e in data.get("runs", [])
                  if isinstance(e, dict) and isinstance(e.get("dir"), str)}
        return self.sweep_name(data), listed

    def check_places(self, dirs: list[RunDir]) -> list[Placed]:
        """Each of ``dirs`` checked against its place (:meth:`RunDir.place_problem`, with
        the manifest's sweep name and the run id it lists there), in order."""
        name, listed = self._identity()
        out = []
        for rd in dirs:
            expected = listed.get(f"{rd.arm}/{rd.path.name}")
            run, problem = rd.place_problem(name, expected if isinstance(expected, str)
                                            else None)
            out.append(Placed(rd, run, problem))
        return out

    def scan(self) -> list[Placed]:
        """Every ``<arm>/seed-<k>[.<n>]`` directory holding a run file, each checked
        against its place (:meth:`check_places`), sorted by arm, seed and ``<n>``;
        directories whose ``run.json`` is missing or disagrees are included, with their
        problem (:meth:`discover` sets them apart)."""
        if not self.path.is_dir():
            return []
        dirs = []
        for d in self.path.glob("*/seed-*"):
            rd = RunDir(d)
            if (rd.seed is None or rd.arm.startswith((".", "_")) or not d.is_dir()
                    or not any((d / f).exists() or (d / f).is_symlink()
                               for f in _RUN_FILES)):
                continue
            dirs.append(rd)
        return sorted(self.check_places(dirs),
                      key=lambda p: (p.rd.arm, p.rd.seed or 0, p.rd.suffix))

    def discover(self) -> tuple[list[FoundRun], list[LeftOut]]:
        """Every run of the sweep (a directory whose ``run.json`` agrees with its place),
        sorted by (arm, seed, ``<n>``), and the directories left out (``run.json``
        missing, unreadable, or disagreeing with its place); see :meth:`scan`."""
        found: dict[tuple[str, int], list[tuple[int, Path]]] = {}
        left: list[LeftOut] = []
        for p in self.scan():
            seed = p.rd.seed if p.rd.seed is not None else -1
            if p.problem is not None:
                left.append(LeftOut(p.rd.arm, seed, p.rd.path, p.problem))
                continue
            found.setdefault((p.rd.arm, seed), []).append((p.rd.suffix, p.rd.path))
        out: list[FoundRun] = []
        for (arm, seed), dirs in sorted(found.items()):
            dirs.sort()
            names = tuple(p.name for _, p in dirs)
            out.extend(FoundRun(arm, seed, p, n, names) for n, p in dirs)
        return out, left

    def newest(self) -> tuple[dict[tuple[str, int], FoundRun], list[LeftOut]]:
        """The newest run of each (arm, seed) (the one a report reads), and the
        directories left out (:meth:`discover`)."""
        found, left = self.discover()
        return newest_runs(found), left

    def _listed_dirs(self, data: Mapping[str, Any]) -> list[RunDir]:
        """The manifest's run directories that lie inside the sweep directory; any other
        (an absolute path, ``..``, a link leading out) is refused, named on stderr, and
        never read or acted on."""
        out = []
        runs = data.get("runs", [])
        for i, e in enumerate(runs if isinstance(runs, list) else []):
            if not (isinstance(e, dict) and isinstance(e.get("dir"), str)):
                continue
            try:
                check_inside(self.path / e["dir"], self.path)
            except RunFileError:
                print(f"warning: {self.manifest}: runs[{i}].dir {excerpt(e['dir'])!r} "
                      "lies outside the sweep directory: refused", file=sys.stderr,
                      flush=True)
                continue
            out.append(RunDir(self.path / e["dir"]))
        return out

    def run_dirs(self) -> list[RunDir]:
        """Run directories: the manifest's, then every other ``<arm>/seed-*`` holding a run
        file (:meth:`scan`: those whose ``run.json`` is missing or disagrees included).

        Ordered by arm (in manifest order when known), seed, then directory name.
        """
        data = self.read_manifest()
        listed = self._listed_dirs(data)
        placed = {p.rd.path: p for p in self.scan()}
        unique = list({rd.path: rd for rd in [*listed, *(p.rd for p in placed.values())]
                       }.values())
        order = {a: i for i, a in enumerate(data.get("arms", []))}

        def key(rd: RunDir) -> tuple[int, str, int, str]:
            p = placed.get(rd.path)
            info = p.run if p is not None and p.problem is None else {}
            arm = str(info.get("arm", rd.arm))
            seed = info.get("seed", rd.seed)
            return (order.get(arm, len(order)), arm, seed if isinstance(seed, int) else 0,
                    rd.path.name)

        return sorted(unique, key=key)


def config_document(run: RunConfig, launcher: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
    """The content of ``config.yaml``: identity (with its hash), the launcher it was
    submitted with (a record: the run does not read it back) and the backend's runtime
    settings."""
    doc = {"run_id": run.run_id, "sweep": run.sweep, "arm": run.arm, **run.identity}
    if launcher is not None:
        doc["launcher"] = dict(launcher)
    doc["backend_runtime"] = to_plain(run.backend.settings)
    if run.environment != DEFAULT_ENVIRONMENT:
        doc["environment_runtime"] = to_plain(run.env_settings)
    return doc


_NON_IDENTITY_KEYS = ("run_id", "sweep", "arm", "launcher", "backend_runtime",
                      "environment_runtime")


def find_run_dir(sweep_dir: Path, run: RunConfig) -> RunDir | None:
    """The directory already holding ``run``'s identity, if any."""
    for p in candidate_dirs(sweep_dir, run.arm, run.seed):
        if RunDir(p).read_run().get("run_id") == run.run_id:
            return RunDir(p)
    return None


def resolve_run_dir(sweep_dir: Path, run: RunConfig, *, new_run: bool = False) -> RunDir:
    """Where ``run`` lives: its existing directory, a fresh one, or a refusal.

    Raises :class:`RunConflictError` (with a key-by-key diff) when ``seed-<k>`` holds a
    different identity and ``new_run`` is false. Writes nothing.
    """
    existing = find_run_dir(sweep_dir, run)
    if existing is not None:
        return existing
    dirs = candidate_dirs(sweep_dir, run.arm, run.seed)
    if not dirs:
        return RunDir(sweep_dir / run.arm / run_dir_name(run.seed))
    held = RunDir(dirs[0])
    if not held.exists() and (not held.config_yaml.exists()
                              or _config_run_id(held) == run.run_id):
        return held  # no run there yet, or this very run being created by another launch
    if new_run:
        n = max(RunDir(p).suffix for p in dirs) + 1
        return RunDir(sweep_dir / run.arm / run_dir_name(run.seed, n))
    old_identity = _identity_on_disk(held)
    rows = diff(old_identity, run.identity)
    raise RunConflictError(
        f"run directory holds a different run (id {held.read_run().get('run_id', '?')[:12]}, "
        f"requested {run.short_id}); refusing to overwrite it — relaunch with the same "
        "configuration, or pass --new-run to put this run beside it",
        file=held.path,
        detail=format_diff(rows) if rows else "  (identity formats differ)",
    )


def _identity_on_disk(rd: RunDir) -> dict[str, Any]:
    import yaml

    try:
        doc = load_yaml_file(rd.config_yaml) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return {k: v for k, v in doc.items() if k not in _NON_IDENTITY_KEYS}


def init_run_dir(rd: RunDir, run: RunConfig, launcher: Mapping[str, Any] | None = None
                 ) -> None:
    """Create ``rd`` for ``run`` (config.yaml, run.json, state pending) if not yet there.

    ``launcher``: the launcher settings it is submitted with, recorded in ``config.yaml``.
    Idempotent for the same identity, also when two launchers create it at once; never
    overwrites another identity (callers use :func:`resolve_run_dir` first, and this
    re-checks).
    """
    held = rd.read_run().get("run_id")
    if held == run.run_id:
        return
    if held is None and rd.config_yaml.exists():  # being created: by whom?
        held = _config_run_id(rd)
        if held == run.run_id:
            held = None
    if held is not None:
        raise UserError("run directory holds another run; refusing to overwrite it",
                        file=rd.path, value=held)
    rd.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rd.config_yaml, dump_yaml(config_document(run, launcher)))
    atomic_write_json(rd.run_json, {
        "run_id": run.run_id,
        "sweep": run.sweep,
        "arm": run.arm,
        "seed": run.seed,
        "estimator": {"name": run.estimator.name, "params": dict(run.estimator.params)},
        "backend": run.backend.kind,
        "environment": run.environment,
        **provenance(),
    })
    if not rd.state_json.exists():
        rd.write_state("pending", step=0, total_steps=run.protocol.total_steps)


def _config_run_id(rd: RunDir) -> str:
    """The run id ``config.yaml`` records ('?' when unreadable)."""
    import yaml

    try:
        doc = load_yaml_file(rd.config_yaml)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return "?"
    value = doc.get("run_id") if isinstance(doc, dict) else None
    return str(value) if value else "?"


def load_run_config(rd: RunDir) -> RunConfig:
    """Rebuild the frozen :class:`RunConfig` from a run directory's ``config.yaml``.

    The ``launcher`` section is a record of the submission and is not read back: where a
    run executes reaches it as a :class:`~ccpo_lab.placement.Placement` from its launcher.
    """
    doc = load_yaml_file(rd.config_yaml)
    where = lambda _k: str(rd.config_yaml)  # noqa: E731
    kind = doc["backend"]["kind"]
    backend = {"kind": kind, kind: doc.get("backend_runtime", doc["backend"][kind])}
    env_doc = doc.get("environment") or {}
    environment = str(env_doc.get("name", DEFAULT_ENVIRONMENT))
    env = {environment: doc.get("environment_runtime", env_doc.get(environment, {}))} \
        if environment != DEFAULT_ENVIRONMENT else {}
    run = RunConfig(
        sweep=doc["sweep"], arm=doc["arm"], seed=int(doc["seed"]),
        estimator=EstimatorConfig(name=doc["estimator"]["name"], params=resolve_params(
            doc["estimator"]["name"], doc["estimator"]["params"], file=str(rd.config_yaml))),
        protocol=build(ProtocolConfig, doc["protocol"], key="protocol", where=where),
        backend=build(BackendConfig, backend, key="backend", where=where),
        environment=environment, env=build(EnvConfig, env, key="env", where=where),
    )
    if run.run_id != doc.get("run_id"):
        raise UserError("config.yaml does not hash to its recorded run id (edited by hand?)",
                        file=rd.config_yaml, value=doc.get("run_id"))
    return run
