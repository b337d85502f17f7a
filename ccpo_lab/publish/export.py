"""One checkpoint's weights written into a folder in a publishable form.

- A Hugging Face model folder (verl's merged ``hf_model/*`` or a checkpoint's
  ``huggingface/``): its files (config, tokenizer, weights) as they are, hard-linked when
  the folder is on the same file system, else copied. Loadable with
  ``transformers.AutoModelForCausalLM.from_pretrained``.
- A local-backend checkpoint: the policy's tensors (``trainer.policy`` of the ``.pt``
  file) as ``model.safetensors`` and :data:`POLICY_CONFIG` naming the class and its
  shape. It is ccpo-lab's small torch policy, **not** a transformers model: load it with
  ``safetensors.torch.load_file`` into
  ``ccpo_lab.backends.local.policy.ActionScorer(PolicyShape(**config["shape"]), gen)``.
  No ``config.json`` is written, so nothing takes it for a transformers model.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ccpo_lab.atomic import atomic_write_bytes, atomic_write_text
from ccpo_lab.errors import UserError
from ccpo_lab.publish.sources import Source

POLICY_CONFIG = "policy_config.json"
"""The local policy's config file (its class, shape and prompt settings)."""
WEIGHTS = "model.safetensors"
"""The local policy's weights file."""
LOCAL_FORMAT = "ccpo-lab local policy (safetensors; not a transformers model)"
HF_FORMAT = "Hugging Face transformers (config, tokenizer, weights)"


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed: copy
        shutil.copy2(src, dst)


def export_hf_dir(src: Path, dest: Path) -> list[str]:
    """The top-level files of the model folder ``src`` into ``dest``; their names."""
    names = []
    for p in sorted(src.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            _link_or_copy(p, dest / p.name)
            names.append(p.name)
    return names


def _policy_config(run_config: dict[str, Any], tensors: dict[str, Any]) -> dict[str, Any]:
    import ccpo_lab

    local = dict((run_config.get("backend") or {}).get("local") or {})
    proto = dict(run_config.get("protocol") or {})
    shape = {k: local.get(k) for k in ("vocab_size", "embed_dim", "hidden_dim", "encoder")}
    return {"format": LOCAL_FORMAT, "ccpo_lab_version": ccpo_lab.__version__,
            "class": "ccpo_lab.backends.local.policy.ActionScorer",
            "shape": shape,
            "prompt": {"history_length": proto.get("history_length"),
                       "max_prompt_length": proto.get("max_prompt_length"),
                       "vocab_size": shape["vocab_size"]},
            "tensors": {k: list(v.shape) for k, v in sorted(tensors.items())},
            "loadable_with_transformers": False}


def export_local(src: Path, dest: Path, run_config: dict[str, Any]) -> list[str]:
    """The policy of the local checkpoint ``src`` as ``model.safetensors`` and
    :data:`POLICY_CONFIG` in ``dest``; their names."""
    from ccpo_lab.backends.local.checkpoint import load_checkpoint

    try:
        from safetensors.torch import save
    except ImportError:
        raise UserError("writing the local policy's weights needs the safetensors package "
                        "(pip install 'ccpo-lab[hub]')", file=src) from None
    try:
        state = load_checkpoint(src)
    except Exception as e:  # torch's unpickler raises several kinds for a damaged file
        raise UserError(f"cannot read this checkpoint ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:200] if str(e) else ''}); nothing written",
                        file=src) from None
    policy = (state.get("trainer") or {}).get("policy") if isinstance(state, dict) else None
    if not isinstance(policy, dict) or not policy:
        raise UserError("not a local-backend checkpoint (no trainer.policy tensors)", file=src)
    tensors = {k: v.detach().contiguous() for k, v in policy.items()}
    atomic_write_bytes(dest / WEIGHTS, save(tensors, metadata={"format": "pt"}))
    atomic_write_text(dest / POLICY_CONFIG,
                      json.dumps(_policy_config(run_config, tensors), indent=2) + "\n")
    return [WEIGHTS, POLICY_CONFIG]


def export(source: Source, dest: Path, run_config: dict[str, Any]) -> list[str]:
    """``source``'s weights into ``dest`` (created); the names of the files written."""
    dest.mkdir(parents=True, exist_ok=True)
    if source.kind == "hf-dir":
        return export_hf_dir(source.path, dest)
    return export_local(source.path, dest, run_config)


def weights_format(kind: str) -> str:
    """What the exported files are, in words."""
    return HF_FORMAT if kind == "hf-dir" else LOCAL_FORMAT
