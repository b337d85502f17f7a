"""Pieces of the GPU smoke test: a tiny Qwen2 + tokenizer built offline, a toy two-turn
environment, seeded sampling, and a verl-agent-shaped batch.

Nothing here downloads anything: the tokenizer is a word-level ``tokenizers`` model over
the toy environment's words, the model a randomly initialised 2-layer Qwen2 (weights drawn
from an explicit ``torch.Generator``), both saved with ``save_pretrained`` and reloaded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

WORDS = ("task", "find", "the", "you", "see", "a", "room", "are", "in", "after", "go", "take",
         "open", "look", "apple", "key", "book", "mug", "lamp", "box", "desk", "shelf",
         "north", "south", "east", "west", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
         ":", ".", ",")
SPECIAL = ("<pad>", "<unk>", "<|im_end|>")


def build_tiny_model(directory: Path, seed: int = 0) -> Path:
    """Build and save a tiny Qwen2 causal LM and its tokenizer in ``directory``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {w: i for i, w in enumerate((*SPECIAL, *WORDS))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>",
                                   eos_token="<|im_end|>", padding_side="left")
    cfg = Qwen2Config(vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, tie_word_embeddings=False,
                      pad_token_id=0, eos_token_id=2, bos_token_id=2)
    model = Qwen2ForCausalLM(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def load_tiny_model(directory: Path, device: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` reloaded from ``directory`` (float32, eval mode)."""
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(directory)
    tok.padding_side = "left"
    model: Any = Qwen2ForCausalLM.from_pretrained(directory, dtype=torch.float32)
    return model.to(device).eval(), tok


@dataclass
class Rows:
    """The turns of one rollout batch, in verl-agent's gather order."""

    task: list[str] = field(default_factory=list)
    traj: list[str] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)
    obs: list[str] = field(default_factory=list)
    action: list[str] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)


def sample(model: Any, tok: Any, prompts: list[str], n_tokens: int,
           gen: torch.Generator) -> tuple[list[list[int]], list[list[int]]]:
    """Sample ``n_tokens`` per prompt (temperature 1) with ``gen``; (prompt ids, response ids).

    ``gen`` lives on the model's device; the same weights, prompts and generator state give
    the same tokens.
    """
    enc = tok(prompts, return_tensors="pt", padding=True)
    ids = enc["input_ids"].to(model.device)
    mask = enc["attention_mask"].to(model.device)
    prompt_ids = [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)]
    out: list[torch.Tensor] = []
    with torch.no_grad():
        for _ in range(n_tokens):
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1]
            nxt = torch.multinomial(torch.softmax(logits.float(), -1), 1, generator=gen)
            out.append(nxt)
            ids = torch.cat([ids, nxt], dim=1)
            mask = torch.cat([mask, torch.ones_like(nxt)], dim=1)
    resp = torch.cat(out, dim=1).tolist()
    return prompt_ids, resp


def rollouts(model: Any, tok: Any, n_tasks: int, group: int, gen: torch.Generator,
             n_tokens: int = 3) -> Rows:
    """Two-turn episodes of ``n_tasks`` x ``group`` rollouts (random uid strings, as verl-agent).

    Turn 0 sees the task; the first action token picks one of three rooms (so rollouts of a
    task meet in shared anchor states); turn 1's reward is 10 when the action tokens sum to
    an even number. An action whose first token is a multiple of 4 is invalid.
    """
    objs = ["apple", "key", "book", "mug", "lamp", "box"]
    n = n_tasks * group
    tasks = [str(uuid.uuid4()) for _ in range(n_tasks)]
    trajs = [str(uuid.uuid4()) for _ in range(n)]
    obs0 = [f"task {e // group} : find the {objs[(e // group) % len(objs)]} . you see a room ."
            for e in range(n)]
    p0, a0 = sample(model, tok, obs0, n_tokens, gen)
    obs1 = [f"task {e // group} : you are in room {a0[e][0] % 3} ." for e in range(n)]
    p1, a1 = sample(model, tok, [f"{obs1[e]} after {tok.decode(a0[e])}" for e in range(n)],
                    n_tokens, gen)
    rows = Rows()
    for e in range(n):
        for t, (o, p, a) in enumerate(((obs0[e], p0[e], a0[e]), (obs1[e], p1[e], a1[e]))):
            rows.task.append(tasks[e // group])
            rows.traj.append(trajs[e])
            rows.turn.append(t)
            rows.obs.append(o)
            rows.action.append(tok.decode(a))
            rows.reward.append(10.0 if t == 1 and sum(a1[e]) % 2 == 0 else 0.0)
            rows.valid.append(a[0] % 4 != 0)
            rows.prompt_ids.append(p)
            rows.response_ids.append(a)
    return rows


def tensors(rows: Rows, pad_id: int, device: str) -> dict[str, torch.Tensor]:
    """verl's layout: ``prompts`` (left-padded), ``responses``, ``input_ids``,
    ``attention_mask`` ``(N, P + R)``, ``response_mask`` ``(N, R)``."""
    plen = max(len(p) for p in rows.prompt_ids)
    rlen = max(len(r) for r in rows.response_ids)
    n = len(rows.prompt_ids)
    prompts = torch.full((n, plen), pad_id, dtype=torch.long)
    pmask = torch.zeros(n, plen, dtype=torch.long)
    resp = torch.full((n, rlen), pad_id, dtype=torch.long)
    rmask = torch.zeros(n, rlen, dtype=torch.long)
    for i, (p, r) in enumerate(zip(rows.prompt_ids, rows.response_ids, strict=True)):
        prompts[i, plen - len(p):] = torch.tensor(p)
        pmask[i, plen - len(p):] = 1
        resp[i, :len(r)] = torch.tensor(r)
        rmask[i, :len(r)] = 1
    out = {"prompts": prompts, "responses": resp,
           "input_ids": torch.cat([prompts, resp], 1),
           "attention_mask": torch.cat([pmask, rmask], 1), "response_mask": rmask}
    return {k: v.to(device) for k, v in out.items()}


def non_tensors(rows: Rows, step_key: str) -> dict[str, np.ndarray]:
    """verl-agent's ``non_tensor_batch`` fields of the rows."""
    return {"uid": np.array(rows.task, dtype=object),
            "traj_uid": np.array(rows.traj, dtype=object),
            "anchor_obs": np.array(rows.obs, dtype=object),
            "rewards": np.array(rows.reward, dtype=object),
            "is_action_valid": np.array(rows.valid, dtype=bool),
            step_key: np.array(rows.turn, dtype=np.int64)}


class StandInProto:
    """The part of verl's ``DataProto`` the adapter uses, for machines without verl.

    ``batch`` is a dict of ``(N, ...)`` tensors, ``non_tensor_batch`` a dict of ``(N,)``
    arrays.
    """

    def __init__(self, batch: dict[str, torch.Tensor], non_tensor_batch: dict[str, Any]):
        self.batch = dict(batch)
        self.non_tensor_batch = dict(non_tensor_batch)
        self.meta_info: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(next(iter(self.non_tensor_batch.values())))

    def select_idxs(self, idx: Any) -> StandInProto:
        ix = np.asarray(idx)
        t = torch.as_tensor(ix)
        return StandInProto({k: v[t.to(v.device)] for k, v in self.batch.items()},
                            {k: v[ix] for k, v in self.non_tensor_batch.items()})


def make_proto(batch: dict[str, torch.Tensor], non_tensor: dict[str, Any]) -> Any:
    """A real ``DataProto`` when verl imports, else a :class:`StandInProto`."""
    try:
        from verl import DataProto
    except ImportError:
        return StandInProto(batch, non_tensor)
    return DataProto.from_dict(tensors=batch, non_tensors=non_tensor)
