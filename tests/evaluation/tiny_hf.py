"""Tiny Hugging Face causal LMs built on the spot, saved as a folder or in the Hub's cache
layout (read offline with ``HF_HUB_OFFLINE=1``): no test downloads weights."""

from __future__ import annotations

import shutil
from pathlib import Path

WORDS = ("task put clean heat cool examine look go to take from in on open close use "
         "a the some your is with and find two it then place desk drawer shelf cabinet "
         "countertop fridge microwave sinkbasin mug apple book pen pencil lamp keychain "
         "cd bowl plate knife spoon cup bed sofa armchair garbagecan safe dresser "
         "now history admissible actions action step observation you are middle of room "
         "looking quickly around see nothing happens arrive")


def save_tiny_model(dest: Path, seed: int = 0, hidden: int = 32) -> Path:
    """A randomly initialised 2-layer Qwen2 (``seed``) with a word-level tokenizer in
    ``dest`` (``config.json``, ``model.safetensors``, tokenizer files)."""
    import torch
    from transformers import AutoModelForCausalLM

    from ccpo_lab.backends.verl.tiny_model import TinySpec, build_tokenizer, tiny_config

    tok = build_tokenizer([WORDS])
    torch.manual_seed(seed)
    cfg = tiny_config(None, len(tok), tok, TinySpec(seed=seed, hidden_size=hidden), 4096)
    model = AutoModelForCausalLM.from_config(cfg)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest


def to_hub_cache(src: Path, cache: Path, repo_id: str, commit: str,
                 branch: str = "main") -> Path:
    """Copy the folder ``src`` into the Hub cache ``cache`` (``HF_HUB_CACHE``) as
    ``repo_id`` at ``commit`` (40 hex digits), with ``refs/<branch>`` naming it; returns
    the snapshot folder."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    shutil.copytree(src, snap, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / branch).write_text(commit)
    return snap
