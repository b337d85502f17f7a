"""Atomic, resumable checkpoints of a local-backend run (``<run dir>/checkpoints/``).

``step-000010.pt`` holds the trainer's full state (policy, reference, optimiser, numpy and
torch generator states, step) plus the run id and the last held-out success. It is written
to a temporary file in the same folder, fsynced and renamed into place, so a run killed at
any moment leaves either the previous checkpoint or the new one, never a torn file. The
newest ``keep`` checkpoints are kept.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ccpo_lab.config.yamlio import atomic_write_json
from ccpo_lab.signals import deferred

_NAME = re.compile(r"^step-(\d{6,})\.pt$")
TMP_PREFIX = ".tmp-"


def checkpoint_path(folder: Path, step: int) -> Path:
    """``<folder>/step-<step:06d>.pt``."""
    return Path(folder) / f"step-{step:06d}.pt"


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of the complete checkpoints in ``folder``, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return sorted(found)


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    found = list_checkpoints(folder)
    return found[-1][1] if found else None


def save_checkpoint(folder: Path, step: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` as the checkpoint of ``step`` atomically; prune to the newest ``keep``.

    A stop signal arriving meanwhile waits for the checkpoint to be whole
    (:func:`ccpo_lab.signals.deferred`): raised inside ``torch.save`` it tore the write."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(folder, step)
    tmp = folder / f"{TMP_PREFIX}{final.name}.{os.getpid()}"
    import torch

    with deferred():
        with tmp.open("wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    _fsync_dir(folder)
    for _, old in list_checkpoints(folder)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`."""
    import torch

    with Path(path).open("rb") as f:
        return torch.load(f, map_location="cpu", weights_only=True)


def remove_partial(folder: Path) -> int:
    """Delete temporary files left by a save that was killed; return how many."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    stale = [p for p in folder.iterdir() if p.name.startswith(TMP_PREFIX)]
    for p in stale:
        p.unlink(missing_ok=True)
    return len(stale)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


BEST_DIR = "best"
"""``checkpoints/best/``: the checkpoint of the run's best held-out evaluation so far."""
BEST_FILE = "best.json"
"""Its record: ``{"step", "value", "metric", "file"}`` (the layout of the verl backend's
``checkpoints/best/best.json``)."""


def read_best(folder: Path) -> dict[str, Any] | None:
    """``<folder>/best/best.json`` when it names a checkpoint that exists (else None)."""
    import json

    best = Path(folder) / BEST_DIR
    try:
        record = json.loads((best / BEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("step"), int) or \
            not (best / str(record.get("file", ""))).is_file():
        return None
    return record


def save_best(folder: Path, step: int, value: float, metric: str,
              state: dict[str, Any]) -> Path:
    """Keep ``state`` as the checkpoint of the best evaluation (``step``, ``value``).

    The new file is written atomically beside the old one, then ``best.json`` is replaced
    (atomically) to name it, then the old file is removed: a run killed at any moment
    leaves a ``best.json`` that names a complete checkpoint.
    """
    best = Path(folder) / BEST_DIR
    path = save_checkpoint(best, step, state, keep=2)
    atomic_write_json(best / BEST_FILE, {"step": int(step), "value": float(value),
                                         "metric": metric, "file": path.name})
    for _, old in list_checkpoints(best):
        if old != path:
            old.unlink(missing_ok=True)
    return path
