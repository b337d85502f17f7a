"""Reading what the report needs from run directories, quickly.

For each run: ``run.json`` (run id, step-1 fingerprint, backend, import record),
``state.json``, the ``protocol`` and ``backend`` sections of ``config.yaml``, and from
``metrics.jsonl`` only the lines that carry a requested metric (training-only lines are
never parsed). A 1,000-run sweep is read in a fraction of a second: distinct
configuration sections are parsed once, and the selected metric lines of a file are
decoded in one call (orjson when installed, as verl's file logger uses it). A selected line
that does not parse makes the reader fall back to
:func:`ccpo_lab.runs.metrics.read_metrics`, which names the bad line; a malformed line that
carries no requested metric is not looked at (``ccpo-lab sync`` reads every line).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.report.discover import FoundRun
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.runs.metrics import MetricsFormatError, read_metrics

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


_loads: Callable[[bytes | str], Any]
try:  # verl's own file logger writes with orjson (a verl dependency); 6x faster to read
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - json is the fallback
    _loads = json.loads


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


def _last_step(data: bytes) -> int | None:
    """Step of the last line that parses (a line cut off mid-write is skipped)."""
    end = len(data)
    for _ in range(3):
        start = data.rfind(b"\n", 0, max(end - 1, 0)) + 1
        line = data[start:end].strip()
        try:
            step = _loads(line).get("step") if line else None
        except (ValueError, AttributeError):
            step = None
        if isinstance(step, int):
            return step
        if start == 0:
            return None
        end = start
    return None


def read_series(path: Path, names: Sequence[str]) -> tuple[dict[str, Series], int | None]:
    """The series of ``names`` in a metrics file, and its last step.

    Only lines that can carry one of the names are decoded (found by byte search, so
    training-only lines cost nothing). A missing file gives ({}, None). Raises
    :class:`MetricsFormatError` for a malformed line that is not a cut-off last line.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    complete = data[: data.rfind(b"\n") + 1]  # a cut-off last line is read_metrics' business
    picked = _select_lines(complete, {_prefix(n) for n in names})
    try:
        rows = _loads(b"[" + b",".join(picked) + b"]")
        values = [(int(r["step"]), r["data"]) for r in rows]
        if any(not isinstance(d, dict) for _, d in values) or len(complete) < len(data):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        values = [(r["step"], r["data"]) for r in read_metrics(path)]
    by_name: dict[str, dict[int, float]] = {n: {} for n in names}
    for step, row in values:
        for n in names:
            v = row.get(n)
            if v is not None:
                by_name[n][step] = v
    out: dict[str, Series] = {}
    for n, d in by_name.items():
        if d:
            steps = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
            vals = np.fromiter(d.values(), dtype=np.float64, count=len(d))
            order = np.argsort(steps, kind="stable")
            out[n] = (steps[order], vals[order])
    last = _last_step(data)
    max_parsed = max((s for s, _ in values), default=None)
    if max_parsed is not None and (last is None or max_parsed > last):
        last = max_parsed
    return out, last


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
        series, last = read_series(rd.metrics, names)
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
    return RunData(**base, last_step=last, series=series, turns_from_training=from_training)
