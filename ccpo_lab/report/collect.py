"""Reading what the report needs from run directories, quickly.

For each run: ``run.json`` (run id, step-1 fingerprint, backend, import record),
``state.json``, the ``protocol`` and ``backend`` sections of ``config.yaml``, and from
``metrics.jsonl`` the requested metrics. A 1,000-run sweep is read in a fraction of a
second: distinct configuration sections are parsed once; a metrics file is checked whole
with byte counts (every line an object, valid UTF-8), and only the lines that can carry a
requested metric are decoded, in one call (orjson when installed, as verl's file logger
uses it). Anything unclear (a line cut short, invalid UTF-8, a requested value that is not
a finite number, a step logged twice) is read again line by line
(:class:`ccpo_lab.runs.metrics.MetricsScan`) to name its file, line and why: a run with a
line that is not a row, or with a requested value that is not a finite number, is left
out with that reason; a cut-off last line is not used and is said.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.report.discover import FoundRun
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import (
    MAX_STEP,
    LineProblem,
    MetricsFormatError,
    MetricsScan,
    fast_loads,
    value_problem,
)

Series = tuple[np.ndarray, np.ndarray]
"""``(steps, values)``: int64 (n,), float64 (n,), sorted by step."""

TASKS: tuple[tuple[str, str], ...] = (
    ("Pick", "pick_and_place"),
    ("Look", "look_at_obj_in_light"),
    ("Clean", "pick_clean_then_place_in_recep"),
    ("Heat", "pick_heat_then_place_in_recep"),
    ("Cool", "pick_cool_then_place_in_recep"),
    ("Pick2", "pick_two_obj_and_place"),
)
"""Table column and verl-agent task name of the six ALFWorld task types (protocol order)."""
TASK_METRICS: tuple[str, ...] = tuple(f"val/{name}_success_rate" for _, name in TASKS)
ALL_METRIC = "val/success_rate"
VAL_TURNS = "val/length/mean"
TRAIN_TURNS = "episode/length/mean"
N_EPISODES = "val/n_episodes"
TASK_COLUMNS: tuple[str, ...] = (*(col for col, _ in TASKS), "All", "Turns")
"""Columns of the per-task-type table."""
COLUMN_METRIC: dict[str, str] = {
    **{col: m for (col, _), m in zip(TASKS, TASK_METRICS, strict=True)},
    "All": ALL_METRIC, "Turns": VAL_TURNS}
"""The metric of each column of :data:`TASK_COLUMNS`."""


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
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(block, Loader=loader)  # noqa: S506 - a safe loader
    return doc if isinstance(doc, dict) else {}


def read_config_sections(path: Path) -> dict[str, Any]:
    """``protocol``, ``backend`` and ``backend_runtime`` of a ``config.yaml`` ({} if absent).

    Each distinct section text is parsed once per process (sweeps repeat them).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    blocks = _top_level_blocks(text)
    out: dict[str, Any] = {}
    try:
        for key in ("protocol", "backend", "backend_runtime"):
            if key in blocks:
                out.update(_parse_block(blocks[key]))
    except Exception:  # noqa: BLE001 - fall back to a whole-document parse
        out = {}
    if "protocol" not in out:
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            return {}
        out = {k: doc.get(k) for k in ("protocol", "backend", "backend_runtime")
               if isinstance(doc, dict) and k in doc}
    return out


def _prefix(name: str) -> bytes:
    """What a line carrying ``name`` must contain: its JSON key up to the first '/'."""
    token = json.dumps(name).encode()
    cut = token.find(b"/")
    return token[: cut + 1] if cut > 0 else token


def _select_lines(data: bytes, prefixes: set[bytes]) -> list[bytes]:
    """Complete lines of ``data`` containing one of ``prefixes``, in file order."""
    found: dict[int, bytes] = {}
    for pre in prefixes:
        pos = 0
        while (i := data.find(pre, pos)) >= 0:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            end = len(data) if end < 0 else end
            found.setdefault(start, data[start:end])
            pos = end + 1
    return [found[k] for k in sorted(found)]


def _every_line_an_object(data: bytes) -> bool:
    """Whether every line of ``data`` (complete lines only) is valid UTF-8 that starts with
    '{' and ends with '}': a line cut short, a blank or a foreign line fails it. Counted with
    C-speed byte searches, so a clean file costs no Python loop."""
    n = data.count(b"\n")
    starts = int(data[:1] == b"{") + data.count(b"\n{") - int(data.endswith(b"\n{"))
    if starts != n or data.count(b"}\n") != n:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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


def _quick(data: bytes, names: Sequence[str]) -> tuple[list[tuple[int, dict]], int | None]:
    """``[(step, data)]`` of the lines that can carry ``names`` (found by byte search, so
    training-only lines are never decoded), and the last line's step. Raises
    :class:`_Unclear` at any line that is not a clean row."""
    if not _every_line_an_object(data):
        raise _Unclear
    picked = _select_lines(data, {_prefix(n) for n in names})
    try:
        rows = fast_loads(b"[" + b",".join(picked) + b"]")
        last = fast_loads(data[data.rfind(b"\n", 0, len(data) - 1) + 1:]) if data else None
    except ValueError:
        raise _Unclear from None
    out = []
    for r in rows if last is None else [*rows, last]:
        step = r.get("step")
        if type(step) is not int or not 0 <= step <= MAX_STEP or type(r.get("data")) is not dict:
            raise _Unclear
        out.append((step, r["data"]))
    return out[: len(rows)], None if last is None else int(last["step"])


def _collect(values: Sequence[tuple[int, dict]], names: Sequence[str]
             ) -> tuple[dict[str, dict[int, float]], list[int]]:
    """Per name, ``step -> value``; and the steps met more than once. Raises
    :class:`_Unclear` at a value that is not a finite number."""
    by_name: dict[str, dict[int, float]] = {n: {} for n in names}
    seen: set[int] = set()
    repeated = []
    for step, row in values:
        carries = False
        for n in names:
            v = row.get(n, _ABSENT)
            if v is _ABSENT:
                continue
            if value_problem(v) is not None:
                raise _Unclear
            by_name[n][step] = v
            carries = True
        if carries:
            if step in seen:
                repeated.append(step)
            seen.add(step)
    return by_name, repeated


_ABSENT = object()


def _slow(path: Path, names: Sequence[str]) -> tuple[list[tuple[int, dict]], int | None,
                                                     dict[int, list[int]]]:
    """Every row, line by line: raises :class:`MetricsFormatError` naming the first line
    that is not a row, or whose value of a requested metric is not a finite number.
    Returns the rows carrying ``names``, the largest step, and the lines of each step."""
    scan = MetricsScan(path)
    values: list[tuple[int, dict]] = []
    last: int | None = None
    lines: dict[int, list[int]] = {}
    for row in scan:
        last = row.step if last is None else max(last, row.step)
        carried = {n: row.data[n] for n in names if n in row.data}
        for n, v in carried.items():
            why = value_problem(v)
            if why is not None:
                scan.problem(row.line, f"{n}: {why}")
        if carried:
            values.append((row.step, row.data))
            lines.setdefault(row.step, []).append(row.line)
    err = scan.error()
    if err is not None:
        raise err
    return values, last, lines


def read_run_series(path: Path, names: Sequence[str]) -> SeriesRead:
    """The series of ``names`` in a metrics file, its last step and what was not used.

    A clean file is read quickly: whole-file byte checks, then only the lines that can
    carry one of the names are decoded. Anything else (a line cut short, invalid UTF-8,
    a value of a requested metric that is not a finite number, a step logged twice) is
    read again line by line to name it. A missing file gives an empty read.

    Raises:
        MetricsFormatError: a complete line that is not a row, or a requested metric's
            value that is not a finite number (its file, line and why).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return SeriesRead({}, None)
    complete = data[: data.rfind(b"\n") + 1]
    tail = data[len(complete):]
    partial = None
    if tail.strip():
        partial = LineProblem(path, complete.count(b"\n") + 1, "the last line has no line end "
                              "(a write in progress, or cut off): not used")
    lines: dict[int, list[int]] = {}
    try:
        values, last = _quick(complete, names)
        by_name, again = _collect(values, names)
        if again:
            raise _Unclear
    except _Unclear:
        values, last, lines = _slow(path, names)
        by_name, again = _collect(values, names)
    out: dict[str, Series] = {}
    for n, d in by_name.items():
        if d:
            steps = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
            vals = np.fromiter(d.values(), dtype=np.float64, count=len(d))
            order = np.argsort(steps, kind="stable")
            out[n] = (steps[order], vals[order])
    max_parsed = max((s for s, _ in values), default=None)
    if max_parsed is not None and (last is None or max_parsed > last):
        last = max_parsed
    repeated = tuple(f"step {s} (lines {', '.join(map(str, lines.get(s, [])))})"
                     for s in sorted(set(again)))
    return SeriesRead(out, last, partial, repeated)


def read_series(path: Path, names: Sequence[str]) -> tuple[dict[str, Series], int | None]:
    """``(series, last step)`` of :func:`read_run_series`."""
    r = read_run_series(path, names)
    return r.series, r.last_step


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


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
    run = _read_json(rd.run_json)
    state = _read_json(rd.state_json)
    cfg = read_config_sections(rd.config_yaml)
    imported = _section(run, "imported")
    protocol = _section(cfg, "protocol") if isinstance(cfg.get("protocol"), dict) else None
    backend = _section(cfg, "backend")
    runtime = _section(cfg, "backend_runtime")
    kind = backend.get("kind") or run.get("backend")
    model = ((runtime.get("model_path") or (backend.get("verl") or {}).get("model_path"))
             if kind == "verl" else None)
    total = _as_int((protocol or {}).get("total_steps")) or _as_int(imported.get("total_steps")) \
        or _as_int(state.get("total_steps"))
    episodes = _as_int((protocol or {}).get("val_batch_size")) \
        or _as_int(imported.get("val_episodes"))
    step1 = _section(run, "step1")
    names = list(dict.fromkeys([*metrics, ALL_METRIC, *TASK_METRICS, VAL_TURNS, N_EPISODES]))
    base: dict[str, Any] = dict(
        arm=found.arm, seed=found.seed, path=found.path, run_id=run.get("run_id"),
        fingerprint=step1.get("fingerprint"), backend=kind, model_path=model,
        protocol=protocol, total_steps=total, n_episodes=episodes, state=state.get("state"),
        note=found.superseded_note)
    try:
        got = read_run_series(rd.metrics, names)
        series, last = got.series, got.last_step
        from_training = False
        if VAL_TURNS not in series and last is not None:
            train, _ = read_series(rd.metrics, [TRAIN_TURNS])
            if TRAIN_TURNS in train:
                series[VAL_TURNS] = train[TRAIN_TURNS]
                from_training = True
    except (MetricsFormatError, OSError) as e:
        return RunData(**base, last_step=None, error=str(e))
    if N_EPISODES in series:
        base["n_episodes"] = int(series[N_EPISODES][1][-1])
    notes = [FileNote(f"line {got.partial.line} (the last) has no line end (a write in "
                      "progress, or cut off): not used", rd.metrics, got.partial.line)
             ] if got.partial else []
    if got.repeated:
        notes.append(FileNote(f"{len(got.repeated)} step(s) logged more than once, the last "
                              f"row of each used: {'; '.join(got.repeated[:3])}", rd.metrics))
    return RunData(**base, last_step=last, series=series, turns_from_training=from_training,
                   file_notes=tuple(notes))
