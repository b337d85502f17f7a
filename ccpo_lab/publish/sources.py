"""The weights a run directory keeps, by training step, as each backend keeps them.

- ``local`` (the CPU backend): ``checkpoints/step-<k>.pt`` (the newest two and the final
  one, :mod:`ccpo_lab.backends.local.checkpoint`) and the best held-out evaluation's,
  ``checkpoints/best/step-<k>.pt``. Each holds the trainer's state; the policy's weights
  are its ``trainer.policy`` tensors (a small torch module, not a transformers model).
- ``verl``: loadable Hugging Face weights only: ``hf_model/final`` and ``hf_model/best``
  (written by verl-agent's model merger when training ends,
  :mod:`ccpo_lab.backends.verl.agent.weights`) and a retained FSDP checkpoint's
  ``checkpoints/global_step_<s>/actor/huggingface/`` when it holds weights (verl saves
  them there with ``checkpoint.save_contents`` including ``hf_model``). A checkpoint of
  FSDP shards alone is listed as skipped, with the merger command that converts it.

Nothing here writes; :func:`run_sources` only looks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["local-checkpoint", "hf-dir"]
Role = Literal["kept", "final", "best"]
HF_WEIGHTS = ("*.safetensors", "pytorch_model*.bin")
"""File patterns of Hugging Face weights in a model folder."""


@dataclass(frozen=True)
class Source:
    """The weights of one training step of a run."""

    step: int
    """Training step."""
    path: Path
    """A local checkpoint file, or a Hugging Face model folder."""
    kind: Kind
    """How to read it."""
    role: Role
    """``final`` (the completed run's last step), ``best`` (the best training-time held-out
    evaluation's, kept for that reason) or ``kept`` (a retained checkpoint)."""


@dataclass(frozen=True)
class RunSources:
    """What one run keeps."""

    sources: tuple[Source, ...]
    """Exportable weights, one per step, by step."""
    skipped: tuple[str, ...] = ()
    """Checkpoints that cannot be exported, each with why (and how to convert it)."""


def has_hf_weights(folder: Path) -> bool:
    """``folder`` holds a ``config.json`` and Hugging Face weight files."""
    return (folder / "config.json").is_file() and any(
        p.is_file() for pattern in HF_WEIGHTS for p in folder.glob(pattern))


def _by_step(found: list[Source]) -> tuple[Source, ...]:
    """One source per step: ``final`` over ``kept`` over ``best`` (the same weights)."""
    rank = {"final": 0, "kept": 1, "best": 2}
    out: dict[int, Source] = {}
    for s in sorted(found, key=lambda s: (s.step, rank[s.role])):
        out.setdefault(s.step, s)
    return tuple(out[k] for k in sorted(out))


def local_sources(run_dir: Path, final_step: int | None) -> RunSources:
    """The CPU backend's checkpoints; ``final_step``: the run's last step when it is
    completed (None otherwise)."""
    from ccpo_lab.backends.local.checkpoint import BEST_DIR, list_checkpoints, read_best

    folder = run_dir / "checkpoints"
    found = [Source(s, p, "local-checkpoint", "final" if s == final_step else "kept")
             for s, p in list_checkpoints(folder)]
    best = read_best(folder)
    if best is not None:
        found.append(Source(int(best["step"]), folder / BEST_DIR / str(best["file"]),
                            "local-checkpoint", "best"))
    return RunSources(_by_step(found))


def _merge_hint(actor: Path) -> str:
    return (f"{actor}: FSDP shards without Hugging Face weights; verl-agent's merger writes "
            f"them: python scripts/model_merger.py merge --backend fsdp --local_dir {actor} "
            f"--target_dir <folder>")


def _best_step(run_dir: Path) -> int | None:
    try:
        best = json.loads((run_dir / "checkpoints" / "best" / "best.json").read_text())
    except (OSError, ValueError):
        return None
    step = best.get("step") if isinstance(best, dict) else None
    return step if isinstance(step, int) else None


def verl_sources(run_dir: Path, final_step: int | None) -> RunSources:
    """The verl backend's Hugging Face weights (see the module docstring); the merged
    ``hf_model/final`` first, so it is the final step's source."""
    from ccpo_lab.backends.verl.agent.weights import HF_DIR

    found: list[Source] = []
    skipped: list[str] = []
    merged = run_dir / HF_DIR
    if final_step is not None and has_hf_weights(merged / "final"):
        found.append(Source(final_step, merged / "final", "hf-dir", "final"))
    elif final_step is not None:
        skipped.append(f"{merged / 'final'}: not written (the merge at the end of training "
                       "failed or did not run; run.json['hf_model'] says why)")
    for d in sorted((run_dir / "checkpoints").glob("global_step_*")):
        step = d.name.removeprefix("global_step_")
        if not step.isdigit() or not (d / "actor").is_dir():
            continue
        hf = d / "actor" / "huggingface"
        if has_hf_weights(hf):
            found.append(Source(int(step), hf, "hf-dir",
                                "final" if int(step) == final_step else "kept"))
        elif int(step) != final_step or not found:  # the final step's is merged already
            skipped.append(_merge_hint(d / "actor"))
    best = _best_step(run_dir)
    if best is not None and best > 0 and has_hf_weights(merged / "best"):
        found.append(Source(best, merged / "best", "hf-dir", "best"))
    return RunSources(_by_step(found), tuple(skipped))


def run_sources(backend: str | None, run_dir: Path, final_step: int | None) -> RunSources:
    """What a run of ``backend`` keeps; an unknown backend keeps nothing exportable."""
    if backend == "local":
        return local_sources(run_dir, final_step)
    if backend == "verl":
        return verl_sources(run_dir, final_step)
    return RunSources((), (f"{run_dir}: backend {backend!r} has no weights ccpo-lab can "
                           "publish",))
