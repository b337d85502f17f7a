"""Reading what the report needs from run directories, quickly.

For each run: ``run.json`` (run id, step-1 fingerprint, backend, import record),
``state.json``, the ``protocol`` and ``backend`` sections of ``config.yaml``, and from
``metrics.jsonl`` the requested metrics. A 1,000-run sweep is read in a fraction of a
second: distinct configuration sections are parsed once; a metrics file is read in chunks
and each chunk decoded in one call (orjson when installed, as verl's file logger uses
it), so every line is checked at C speed and memory stays near a chunk. Anything unclear
(a line cut short, invalid UTF-8, a requested value that is not a finite number, a step
logged twice) is read again line by line (:class:`ccpo_lab.runs.metrics.MetricsScan`) to
name its file, line and why: a run with a line that is not a row, or with a requested
value that is not a finite number, is left out with that reason; a cut-off last line is
not used and is said.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.backends import recorded_model
from ccpo_lab.config.yamlio import safe_load_bounded
from ccpo_lab.runs.files import MAX_LINE, Cut, RunFileError, open_file, read_small
from ccpo_lab.runs.layout import FoundRun, RunDir
from ccpo_lab.runs.metrics import (
    EPISODE_COUNT,
    MAX_STEP,
    LineProblem,
    MetricsFormatError,
    MetricsScan,
    fast_loads,
    is_proportion,
    value_problem,
)
from ccpo_lab.runs.tasks import TASK_TYPES, TaskType, task_type_of_metric

Series = tuple[np.ndarray, np.ndarray]
"""``(steps, values)``: int64 (n,), float64 (n,), sorted by step."""

TASKS: tuple[tuple[str, str], ...] = tuple((t.column, t.metric_name) for t in TASK_TYPES)
"""Table column and verl-agent task name of the task-type table's types
(:mod:`ccpo_lab.runs.tasks`: ALFWorld's six, protocol order)."""
TASK_METRICS: tuple[str, ...] = tuple(t.metric() for t in TASK_TYPES)
ALL_METRIC = "val/success_rate"
VAL_TURNS = "val/length/mean"
TRAIN_TURNS = "episode/length/mean"
N_EPISODES = EPISODE_COUNT
TASK_COLUMNS: tuple[str, ...] = (*(col for col, _ in TASKS), "All", "Turns")
"""Columns of the per-task-type table."""
COLUMN_METRIC: dict[str, str] = {
    **{col: m for (col, _), m in zip(TASKS, TASK_METRICS, strict=True)},
    "All": ALL_METRIC, "Turns": VAL_TURNS}
"""The metric of each column of :data:`TASK_COLUMNS`."""
_TASK_METRIC_BYTES = re.compile(rb'"(val/[^"/]+_success_rate)"')


def column_metrics(extra: Sequence[TaskType] = ()) -> dict[str, str]:
    """The per-task-type table's columns and their metrics: the table's task types, then
    ``extra`` (types outside the table that runs logged), then ``All`` and ``Turns``."""
    return {**{t.column: t.metric() for t in (*TASK_TYPES, *extra)},
            "All": ALL_METRIC, "Turns": VAL_TURNS}


def logged_extra_task_types(path: Path, root: Path) -> tuple[TaskType, ...]:
    """Task types outside the table whose held-out success rate the metrics file names
    in its first :data:`CHUNK` bytes (its first evaluations), sorted by name; () when the
    file cannot be read (the series' read says why)."""
    try:
        with open_file(path, root) as f:
            head = f.read(CHUNK)
    except (OSError, ValueError):
        return ()
    known = {t.metric() for t in TASK_TYPES}
    names = {m.decode("utf-8", "replace") for m in _TASK_METRIC_BYTES.findall(head)} - known
    found = (task_type_of_metric(n) for n in sorted(names))
    return tuple(t for t in found if t is not None)


@dataclass(frozen=True)
class RunData:
    """What the report reads from one run directory."""

    arm: str
    """Arm."""
    seed: int
    """Seed."""
    path: Path
    """Run directory."""
    run_id: str | None
    """Run id (``run.json``)."""
    fingerprint: str | None
    """Step-1 rollout fingerprint, None when not recorded."""
    backend: str | None
    """Backend kind (``imported`` for runs brought in by ``ccpo-lab import``)."""
    model_path: str | None
    """verl backend: the model path; None otherwise."""
    protocol: dict[str, Any] | None
    """The resolved protocol section of ``config.yaml`` (None: no configuration)."""
    total_steps: int | None
    """Final step of the run, None when unknown."""
    n_episodes: int | None
    """Held-out episodes per evaluation, None when unknown."""
    state: str | None
    """``state.json`` state."""
    last_step: int | None
    """Last step with a metrics row, None when there is none."""
    series: dict[str, Series] = field(default_factory=dict)
    """Requested metrics that the run logged."""
    turns_from_training: bool = False
    """Turns come from ``episode/length/mean`` (training), not held-out episodes."""
    note: str | None = None
    """A line for the report (several directories for this (arm, seed), ...)."""
    error: str | None = None
    """Why the run could not be read (then it carries no series)."""
    file_notes: tuple[FileNote, ...] = ()
    """Lines of its files that were not used, or used with a caveat."""
    extra_tasks: tuple[TaskType, ...] = ()
    """Task types outside the task-type table that the run logged (their series read)."""


@dataclass(frozen=True)
class FileNote:
    """A line of a run file the report did not use as it stands, and why."""

    text: str
    """What, for a person."""
    file: Path
    """The file."""
    line: int | None = None
    """The line (1-based), when one."""


def _top_level_blocks(text: str) -> dict[str, str]:
    """Split a block-style YAML mapping into ``{top-level key: its text}``."""
    blocks: dict[str, str] = {}
    key: str | None = None
    start = 0
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line and not line[0].isspace() and line[0] not in "#-":
            if key is not None:
                blocks[key] = "\n".join(lines[start:i])
            k, sep, _ = line.partition(":")
            key, start = (k.strip(), i) if sep else (None, i)
    if key is not None:
        blocks[key] = "\n".join(lines[start:])
    return blocks


@functools.lru_cache(maxsize=256)
def _parse_block(block: str) -> dict[str, Any]:
    doc = safe_load_bounded(block)
    return doc if isinstance(doc, dict) else {}


def read_config(path: Path) -> tuple[dict[str, Any], str | None]:
    """A run's ``config.yaml`` as a mapping (:meth:`RunDir.read_config`: through the
    run-file gateway) and why it could not be used (``({}, None)`` when absent)."""
    try:
        return RunDir(path.parent).read_config(), None
    except RunFileError as e:
        return {}, e.why
    except (OSError, ValueError) as e:
        return {}, f"unreadable ({e}): not used"


def read_config_sections(path: Path, root: Path | None = None) -> dict[str, Any]:
    """``protocol``, ``backend`` and ``backend_runtime`` of a ``config.yaml`` ({} if absent
    or unreadable; :func:`config_sections` says why)."""
    return config_sections(path, root)[0]


def config_sections(path: Path, root: Path | None = None
                    ) -> tuple[dict[str, Any], str | None]:
    """``protocol``, ``backend`` and ``backend_runtime`` of a ``config.yaml`` ({} if absent),
    and why it could not be used (None: it could, or it is absent). ``root``: the sweep
    directory it must stay inside (default: that of its run directory).

    Each distinct section text is parsed once per process (sweeps repeat them).
    """
    root = root if root is not None else RunDir(path.parent).sweep_root
    try:
        text = read_small(path, root).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return read_config(path)  # absent, or says why
    blocks = _top_level_blocks(text)
    out: dict[str, Any] = {}
    try:
        for key in ("protocol", "backend", "backend_runtime"):
            if key in blocks:
                out.update(_parse_block(blocks[key]))
    except Exception:  # noqa: BLE001 - fall back to a whole-document parse
        out = {}
    if "protocol" not in out:
        doc, why = read_config(path)
        out = {k: doc.get(k) for k in ("protocol", "backend", "backend_runtime") if k in doc}
        if why is None and "protocol" not in out:
            why = "has no protocol section: not used"
        return out, why
    return out, None


@dataclass(frozen=True)
class SeriesRead:
    """What :func:`read_run_series` read from a metrics file."""

    series: dict[str, Series]
    """Requested metrics that were logged."""
    last_step: int | None
    """Largest step of a row, None when there is none."""
    partial: LineProblem | None = None
    """A last line without its line end (not used)."""
    repeated: tuple[str, ...] = ()
    """Steps that carry a requested metric more than once (the last row is used), as
    ``step S (lines a, b)``."""


class _Unclear(Exception):
    """The quick read met something it cannot explain: read line by line."""


CHUNK = 1 << 22
"""Bytes of a metrics file checked and searched at a time (memory stays near this)."""


def _quick_block(data: bytes, end: int, names: Sequence[str]
                 ) -> tuple[list[tuple[int, dict]], int | None]:
    """The rows of ``data[:end]`` (complete lines) that carry one of ``names``, each
    reduced to those names, and the step of its last line. Every line is decoded, in one
    call (so a line cut short, two lines run together, invalid UTF-8 or a ``NaN`` anywhere
    are caught); anything that is not a clean row raises :class:`_Unclear`."""
    if not end:
        return [], None
    try:
        rows = fast_loads(b"[" + data[:end - 1].replace(b"\n", b",") + b"]")
    except ValueError:
        raise _Unclear from None
    wanted = frozenset(names)
    out = []
    for r in rows:
        if type(r) is not dict:
            raise _Unclear
        step, row = r.get("step"), r.get("data")
        if type(step) is not int or not 0 <= step <= MAX_STEP or type(row) is not dict:
            raise _Unclear
        carried = row.keys() & wanted  # C-speed: most rows carry none
        if carried:
            out.append((step, {n: row[n] for n in carried}))
    return out, rows[-1]["step"]


def _quick(path: Path, names: Sequence[str], root: Path
           ) -> tuple[list[tuple[int, dict]], int | None, LineProblem | None]:
    """``[(step, {name: value})]`` of the lines that can carry ``names`` (found by byte
    search, so training-only lines are never decoded), the last line's step, and a last
    line without its line end. Reads :data:`CHUNK` bytes at a time through the run-file
    gateway (inside ``root``); raises :class:`_Unclear` at any line that is not a clean
    row or is longer than :data:`~ccpo_lab.runs.files.MAX_LINE` (memory stays near two
    chunks); FileNotFoundError; a ``RunFileError`` for a file the gateway refuses."""
    values: list[tuple[int, dict]] = []
    last: int | None = None
    carry = b""
    with open_file(path, root) as f:
        while block := f.read(CHUNK):
            data = carry + block if carry else block
            end = data.rfind(b"\n") + 1
            got, step = _quick_block(data, end, names)
            values += got
            last = step if step is not None else last
            carry = data[end:]
            if len(carry) > MAX_LINE:
                raise _Unclear  # a line too long to hold: the line reader names it
    partial = None
    if carry.strip():
        with open_file(path, root) as f:
            n_lines = sum(block.count(b"\n") for block in iter(lambda: f.read(CHUNK), b""))
        partial = LineProblem(path, n_lines + 1, Cut(carry, len(carry), False, False).why())
    return values, last, partial


def _collect(values: Sequence[tuple[int, dict]], names: Sequence[str]
             ) -> tuple[dict[str, dict[int, Any]], list[int]]:
    """Per name, ``step -> value`` (the last row of a step wins); and the steps met more
    than once."""
    by_name: dict[str, dict[int, Any]] = {n: {} for n in names}
    seen: set[int] = set()
    repeated = []
    for step, row in values:
        for n, v in row.items():
            by_name[n][step] = v
        if row:
            if step in seen:
                repeated.append(step)
            seen.add(step)
    return by_name, repeated


_NUMBERS = {int, float, bool}


def _arrays(by_name: dict[str, dict[int, Any]]) -> dict[str, Series]:
    """Sorted ``(steps, values)`` per name; :class:`_Unclear` when a value is not usable
    (:func:`~ccpo_lab.runs.metrics.value_problem`: not a finite number, a proportion
    outside [0, 1], an episode count that is not a positive integer; checked for all
    values at once)."""
    out: dict[str, Series] = {}
    for n, d in by_name.items():
        if not d:
            continue
        if not set(map(type, d.values())) <= _NUMBERS:
            raise _Unclear
        try:
            vals = np.fromiter(d.values(), dtype=np.float64, count=len(d))
        except OverflowError:
            raise _Unclear from None
        if not np.isfinite(vals).all():
            raise _Unclear
        if is_proportion(n) and not ((vals >= 0) & (vals <= 1)).all():
            raise _Unclear
        if n == EPISODE_COUNT and not ((vals >= 1) & (vals == np.round(vals))).all():
            raise _Unclear
        steps = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
        order = np.argsort(steps, kind="stable")
        out[n] = (steps[order], vals[order])
    return out


_ABSENT = object()


def _slow(path: Path, names: Sequence[str], root: Path | None = None
          ) -> tuple[list[tuple[int, dict]], int | None, dict[int, list[int]],
                     LineProblem | None]:
    """Every row, line by line: raises :class:`MetricsFormatError` naming the first line
    that is not a row, or whose value of a requested metric is not usable
    (:func:`~ccpo_lab.runs.metrics.value_problem`). Returns the rows carrying ``names``
    (reduced to them), the largest step, the lines of each step, and a last line without
    its line end."""
    scan = MetricsScan(path, root=root)
    values: list[tuple[int, dict]] = []
    last: int | None = None
    lines: dict[int, list[int]] = {}
    for row in scan:
        last = row.step if last is None else max(last, row.step)
        carried = {n: row.data[n] for n in names if n in row.data}
        for n, v in carried.items():
            why = value_problem(v, n)
            if why is not None:
                scan.problem(row.line, f"{n}: {why}")
        if carried:
            values.append((row.step, carried))
            lines.setdefault(row.step, []).append(row.line)
    err = scan.error()
    if err is not None:
        raise err
    return values, last, lines, scan.partial


def read_run_series(path: Path, names: Sequence[str], root: Path | None = None
                    ) -> SeriesRead:
    """The series of ``names`` in a metrics file, its last step and what was not used.

    A clean file is read quickly, :data:`CHUNK` bytes at a time, each chunk decoded in one
    call and the requested values checked all at once. Anything else (a line cut short or
    too long, invalid UTF-8, a value of a requested metric that is not usable, a step
    logged twice) is read again line by line to name it. A missing file gives an empty
    read. ``root``: the sweep directory the file must stay inside (default: its own
    directory).

    Raises:
        MetricsFormatError: a complete line that is not a row, or a requested metric's
            value that is not usable (its file, line and why).
        RunFileError: a file the run-file gateway does not read (a link out of the sweep).
    """
    lines: dict[int, list[int]] = {}
    root = root if root is not None else path.parent
    try:
        values, last, partial = _quick(path, names, root)
        by_name, again = _collect(values, names)
        if again:
            raise _Unclear
        out = _arrays(by_name)
    except FileNotFoundError:
        return SeriesRead({}, None)
    except _Unclear:
        values, last, lines, partial = _slow(path, names, root)  # names the line, or is clean
        by_name, again = _collect(values, names)
        out = _arrays(by_name)
    max_parsed = max((s for s, _ in values), default=None)
    if max_parsed is not None and (last is None or max_parsed > last):
        last = max_parsed
    repeated = tuple(f"step {s} (lines {', '.join(map(str, lines.get(s, [])))})"
                     for s in sorted(set(again)))
    return SeriesRead(out, last, partial, repeated)


def read_series(path: Path, names: Sequence[str], root: Path | None = None
                ) -> tuple[dict[str, Series], int | None]:
    """``(series, last step)`` of :func:`read_run_series`."""
    r = read_run_series(path, names, root)
    return r.series, r.last_step


def _read_json(path: Path, root: Path, notes: list[FileNote] | None = None
               ) -> dict[str, Any]:
    """A JSON object file, through the run-file gateway ({} when absent or unreadable;
    an unreadable one is noted)."""
    try:
        doc = json.loads(read_small(path, root))
    except FileNotFoundError:
        return {}
    except RunFileError as e:
        if notes is not None:
            notes.append(FileNote(e.why, path))
        return {}
    except (OSError, ValueError) as e:
        if notes is not None:
            notes.append(FileNote(f"unreadable ({type(e).__name__}: {e}): not used", path))
        return {}
    if not isinstance(doc, dict):
        if notes is not None:
            notes.append(FileNote("is not a JSON object: not used", path))
        return {}
    return doc


def _section(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """``doc[key]`` when it is a mapping, else {}."""
    v = doc.get(key)
    return v if isinstance(v, dict) else {}


def _as_int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def load_run(found: FoundRun, metrics: Sequence[str]) -> RunData:
    """Read one run directory: the requested ``metrics`` plus what the report needs.

    Also reads, when logged, the per-task success rates, held-out turns (falling back to
    training turns, flagged) and ``val/n_episodes``.
    """
    rd = RunDir(found.path)
    root = rd.sweep_root
    notes: list[FileNote] = []
    run = _read_json(rd.run_json, root, notes)
    state = _read_json(rd.state_json, root, notes)
    cfg, why = config_sections(rd.config_yaml, root)
    if why is not None:
        notes.append(FileNote(why, rd.config_yaml))
    imported = _section(run, "imported")
    protocol = _section(cfg, "protocol") if isinstance(cfg.get("protocol"), dict) else None
    backend = _section(cfg, "backend")
    runtime = _section(cfg, "backend_runtime")
    kind = backend.get("kind") or run.get("backend")
    model = recorded_model(kind, backend, runtime)
    total = _as_int((protocol or {}).get("total_steps")) or _as_int(imported.get("total_steps")) \
        or _as_int(state.get("total_steps"))
    episodes = _as_int((protocol or {}).get("val_batch_size")) \
        or _as_int(imported.get("val_episodes"))
    step1 = _section(run, "step1")
    extra = logged_extra_task_types(rd.metrics, root)
    names = list(dict.fromkeys([*metrics, ALL_METRIC, *TASK_METRICS,
                                *(t.metric() for t in extra), VAL_TURNS, N_EPISODES]))
    base: dict[str, Any] = dict(
        arm=found.arm, seed=found.seed, path=found.path, run_id=run.get("run_id"),
        fingerprint=step1.get("fingerprint"), backend=kind, model_path=model,
        protocol=protocol, total_steps=total, n_episodes=episodes, state=state.get("state"),
        note=found.superseded_note, extra_tasks=extra)
    try:
        got = read_run_series(rd.metrics, names, root)
        series, last = got.series, got.last_step
        from_training = False
        if VAL_TURNS not in series and last is not None:
            train, _ = read_series(rd.metrics, [TRAIN_TURNS], root)
            if TRAIN_TURNS in train:
                series[VAL_TURNS] = train[TRAIN_TURNS]
                from_training = True
    except (MetricsFormatError, OSError) as e:
        return RunData(**base, last_step=None, error=str(e), file_notes=tuple(notes))
    if N_EPISODES in series:
        base["n_episodes"] = int(series[N_EPISODES][1][-1])
    if got.partial:
        notes.append(FileNote(f"line {got.partial.line} (the last): {got.partial.why}",
                              rd.metrics, got.partial.line))
    if got.repeated:
        notes.append(FileNote(f"{len(got.repeated)} step(s) logged more than once, the last "
                              f"row of each used: {'; '.join(got.repeated[:3])}", rd.metrics))
    return RunData(**base, last_step=last, series=series, turns_from_training=from_training,
                   file_notes=tuple(notes))
