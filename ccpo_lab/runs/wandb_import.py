"""A finished W&B run's history, read for ``ccpo-lab import`` (beside verl's logs).

Sources:

* an offline run directory, ``wandb/offline-run-*/`` (or its ``run-*.wandb`` file, or a
  ``wandb/`` folder holding exactly one run), read with W&B's own transaction-log reader
  (``wandb leet inspect``, :func:`ccpo_lab.runs.wandb_run.inspect`);
* ``wandb:ENTITY/PROJECT/RUN_ID``: the run through W&B's public API
  (``wandb.Api().run(...).scan_history()``; needs the network and a login; untested here).

verl logs to W&B with ``wandb.log(data, step=step)``, so W&B's step is verl's training step
and the metric names are verl's (``val/success_rate``, ``critic/score/mean``, ...). Rows
keep the metrics named like verl's, ``group/name`` (:func:`is_verl_metric`); W&B's own
(``_step``, ``_runtime``, ``_timestamp``, ``_wandb.*``) are left out, and non-numeric
values (media, histograms) are counted as skipped. The run must be finished (its state is
``finished``); one without a verl-named metric is refused. ``wandb`` is imported only
through these functions.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.errors import UserError

API_PREFIX = "wandb:"
"""A source naming a run through the API: ``wandb:ENTITY/PROJECT/RUN_ID``."""
EXAMPLE = "val/success_rate, critic/score/mean"
"""verl metric names quoted when none is found."""


@dataclass(frozen=True)
class WandbLog:
    """A W&B run's history as rows."""

    source: str
    """Where it was read (the ``.wandb`` file, or ``wandb:ENTITY/PROJECT/RUN_ID``)."""
    sha256: str
    """sha256 of the ``.wandb`` file (API: of the rows read)."""
    rows: tuple[tuple[int, dict[str, float | None]], ...]
    """``(step, metrics)`` in the history's order (non-finite values as None)."""
    skipped: int
    """Non-numeric values left out."""
    name: str
    """The run's display name."""


def is_wandb_source(source: str | Path) -> bool:
    """``source`` names a W&B run: the API form, a directory or a ``.wandb`` file."""
    text = str(source)
    return text.startswith(API_PREFIX) or Path(text).is_dir() or text.endswith(".wandb")


def is_verl_metric(key: str) -> bool:
    """A metric named like verl's (``group/name``), not one of W&B's own."""
    return "/" in key and not key.startswith(("_", "system/"))


def find_run_file(path: Path) -> Path:
    """The ``run-*.wandb`` file of a run directory, a ``.wandb`` file or a ``wandb/``
    folder with one run; UserError otherwise."""
    if path.is_file():
        return path
    if not path.exists():
        raise UserError("W&B run not found", file=path)
    found = sorted({p.resolve() for p in path.glob("run-*.wandb")}) or sorted(
        {p.resolve() for p in path.glob("*/run-*.wandb")})  # latest-run links to one of them
    if not found:
        raise UserError("not a W&B run directory (no run-*.wandb file in it or in its "
                        "folders): expected wandb/offline-run-*/, or a verl log file",
                        file=path)
    if len(found) > 1:
        raise UserError(f"holds {len(found)} W&B runs: name one of its offline-run-* "
                        "folders", file=path, valid=[p.parent.name for p in found[:5]])
    return found[0]


def _value(v: Any) -> tuple[bool, float | None]:
    if isinstance(v, bool):
        return True, float(v)
    if isinstance(v, int | float):
        f = float(v)
        return True, f if math.isfinite(f) else None
    if v is None or (isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity")):
        return True, None
    return False, None


def history_rows(items: list[tuple[int, dict[str, Any]]]
                 ) -> tuple[tuple[tuple[int, dict[str, float | None]], ...], int]:
    """``(rows, skipped)``: each item's verl-named numeric metrics (items without any are
    left out)."""
    rows, skipped = [], 0
    for step, item in items:
        row: dict[str, float | None] = {}
        for k, v in item.items():
            if not is_verl_metric(str(k)):
                continue
            ok, num = _value(v)
            if ok:
                row[str(k)] = num
            else:
                skipped += 1
        if row:
            rows.append((step, row))
    return tuple(rows), skipped


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _offline_items(run_file: Path) -> tuple[dict[str, Any], list[tuple[int, dict]]]:
    """(summary, [(step, history item)]) of an offline run, by W&B's reader."""
    import subprocess

    from ccpo_lab.runs.wandb_run import inspect

    try:
        summary = inspect(run_file.parent, summary=True)
        records = inspect(run_file.parent)
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
        raise UserError(f"W&B's reader could not read this run: {str(e)[:300]}",
                        file=run_file) from None
    items = []
    for rec in records:
        h = rec.get("history") if rec.get("type") == "history" else None
        if isinstance(h, dict) and isinstance(h.get("item"), dict):
            item = h["item"]
            step = (h.get("step") or {}).get("num", item.get("_step"))
            if isinstance(step, int | float) and not isinstance(step, bool):
                items.append((int(step), item))
    return summary if isinstance(summary, dict) else {}, items


def _check(rows: tuple, state: Any, where: str | Path) -> None:
    if state != "finished":
        raise UserError(f"the W&B run is not finished (state {state!r}): import a finished "
                        "run; nothing imported", file=where)
    if not rows:
        raise UserError(f"no verl metrics in the W&B run's history (names like {EXAMPLE}); "
                        "nothing imported", file=where)


def read_offline(path: Path) -> WandbLog:
    """An offline run (see the module docstring)."""
    run_file = find_run_file(path)
    summary, items = _offline_items(run_file)
    rows, skipped = history_rows(items)
    _check(rows, summary.get("state"), run_file)
    return WandbLog(str(run_file.resolve()), _sha256(run_file), rows, skipped,
                    str(summary.get("name") or ""))


def read_api(source: str) -> WandbLog:
    """A run through W&B's API (``wandb:ENTITY/PROJECT/RUN_ID``; needs the network)."""
    import wandb

    path = source.removeprefix(API_PREFIX)
    if path.count("/") != 2:
        raise UserError("expected wandb:ENTITY/PROJECT/RUN_ID", value=source)
    try:
        run = wandb.Api().run(path)
        items = [(int(r["_step"]), r) for r in run.scan_history() if "_step" in r]
    except (wandb.errors.CommError, wandb.errors.Error, ValueError) as e:
        raise UserError(f"W&B's API could not read the run: {str(e)[:300]}",
                        value=source) from None
    rows, skipped = history_rows(items)
    _check(rows, getattr(run, "state", None), source)
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
    return WandbLog(source, digest, rows, skipped, str(getattr(run, "name", "") or ""))


def read_wandb(source: str | Path) -> WandbLog:
    """A finished W&B run's verl-named history (UserError: not a W&B run, not finished,
    no verl metric)."""
    text = str(source)
    if text.startswith(API_PREFIX):
        return read_api(text)
    return read_offline(Path(text))
