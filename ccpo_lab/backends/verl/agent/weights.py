"""Loadable Hugging Face weights of a verl run: the final checkpoint and the best evaluation.

verl-agent keeps ``trainer.max_actor_ckpt_to_keep`` sharded FSDP checkpoints
(``checkpoints/global_step_<s>/actor/``: model and optimizer shards per rank, plus the
model's ``huggingface/`` config and tokenizer) and deletes older ones, so the weights of
the best held-out evaluation are usually gone when training ends. ccpo-lab's hooks:

1. after each evaluation (``RayPPOTrainer._validate``) compare ``val/success_rate`` with
   the best so far (``checkpoints/best/best.json``, so a requeued run remembers it); on a
   new best at step ``s > 0`` the step's checkpoint is kept: the trainer's own save at
   ``s`` when one is due (``save_freq``, last step), else an extra ``_save_checkpoint()``;
2. right after that save, :func:`keep_best` hard-links the checkpoint's model shards and
   ``huggingface/`` files (not the optimizer's) into ``checkpoints/best/actor/``: no copy,
   and they survive verl's rotation of ``global_step_*``;
3. when the trainer has finished, the backend runs verl-agent's own merger
   (``scripts/model_merger.py merge --backend fsdp``) on the last checkpoint and on
   ``checkpoints/best/actor`` (:func:`merge_commands`), writing ``hf_model/final`` and
   ``hf_model/best``, and records both in ``run.json["hf_model"]``.

A best evaluation at step 0 is the base model: ``best.json`` says so and no weights are
kept (``backend.verl.model_path`` is already loadable).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

BEST_DIR = "best"
"""``checkpoints/best/``: the kept checkpoint of the best evaluation."""
BEST_FILE = "best.json"
METRIC = "val/success_rate"
"""The held-out metric that decides the best evaluation."""
HF_DIR = "hf_model"
"""``<run>/hf_model/{final,best}``: merged Hugging Face weights."""
MERGER = "scripts/model_merger.py"
"""verl-agent's checkpoint merger (relative to the checkout)."""


def read_best(checkpoints: Path) -> dict[str, Any] | None:
    """``checkpoints/best/best.json`` (None when absent or unreadable)."""
    try:
        out = json.loads((Path(checkpoints) / BEST_DIR / BEST_FILE).read_text())
    except (OSError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def is_new_best(checkpoints: Path, value: float) -> bool:
    """Whether ``value`` beats the recorded best (ties keep the earlier step)."""
    best = read_best(checkpoints)
    return best is None or float(value) > float(best.get("value", float("-inf")))


def write_best(checkpoints: Path, record: dict[str, Any]) -> None:
    """Write ``best.json`` atomically."""
    d = Path(checkpoints) / BEST_DIR
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{BEST_FILE}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(record, sort_keys=True))
    os.replace(tmp, d / BEST_FILE)


def _keep(name: str) -> bool:
    return not name.startswith("optim_")


def keep_best(checkpoints: Path, step: int, value: float) -> Path:
    """Hard-link ``global_step_<step>/actor`` (without optimizer shards) into
    ``best/actor`` (replacing the previous best) and record it; returns ``best/actor``."""
    root = Path(checkpoints)
    src = root / f"global_step_{step}" / "actor"
    if not src.is_dir():
        raise FileNotFoundError(f"no actor checkpoint at {src}")
    best = root / BEST_DIR
    best.mkdir(parents=True, exist_ok=True)
    tmp = best / f".actor.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or not _keep(rel.parts[0]):
            continue
        dst = tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, dst)
        except OSError:           # another file system: copy
            shutil.copy2(path, dst)
    old = best / "actor"
    if old.exists():
        trash = best / f".actor.old{os.getpid()}"
        os.replace(old, trash)
        shutil.rmtree(trash, ignore_errors=True)
    os.replace(tmp, old)
    write_best(root, {"step": int(step), "value": float(value), "metric": METRIC,
                      "weights": str(old)})
    return old


def merge_commands(python: str, checkout: Path, checkpoints: Path, run_dir: Path,
                   final_step: int | None) -> dict[str, list[str]]:
    """verl-agent's merger calls: ``final`` (the last checkpoint) and ``best`` (when kept)."""
    out: dict[str, list[str]] = {}
    merger = str(Path(checkout) / MERGER)
    targets: dict[str, Path] = {}
    if final_step is not None:
        targets["final"] = Path(checkpoints) / f"global_step_{final_step}" / "actor"
    best = read_best(checkpoints)
    if best is not None and int(best.get("step", 0)) > 0:
        targets["best"] = Path(checkpoints) / BEST_DIR / "actor"
    for name, src in targets.items():
        out[name] = [python, merger, "merge", "--backend", "fsdp", "--local_dir", str(src),
                     "--target_dir", str(Path(run_dir) / HF_DIR / name)]
    return out
