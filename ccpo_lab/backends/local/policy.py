"""The small policy: a GRU reads the prompt, each admissible action is scored against it.

The prompt's tokens go through word embeddings and a GRU; ``h_b``, the GRU state at the
last prompt token, summarises the turn (it is what CCPO's ``phi`` takes from the frozen
reference copy, as it takes the 7B model's last-token hidden state on GPUs). Each action
is embedded by a second GRU over its words (``e``), each word's embedding joined with three
flags: whether the word occurs in the task, the history, the current observation
(:func:`token_overlap`, an exact-match copy signal); the action then attends over the
prompt GRU's per-token states (``c``: which words of the prompt it refers to). ``o``: the
share of the action's words flagged per segment (:func:`overlap`); ``r``:
whether the action repeats one of the last two shown in the history.
``logit = v . tanh(U [e, c, e*c, e*h, o, r] + b)``. Parameters are initialised from an
explicit ``torch.Generator``.
``torch`` is imported by this module: import it lazily from CLI code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ccpo_lab.backends.local.prompts import (
    N_REPEAT,
    PAD,
    SEG_HISTORY,
    SEG_OBS,
    SEG_TASK,
    TurnInput,
)

OVERLAP_SEGMENTS = (SEG_TASK, SEG_HISTORY, SEG_OBS)
"""Prompt segments whose word overlap with each action the scorer sees."""


@dataclass(frozen=True)
class PolicyShape:
    """Sizes of the policy network."""

    vocab_size: int
    """Hash buckets of the word tokenizer (id 0 is padding)."""
    embed_dim: int
    """Word-embedding width."""
    hidden_dim: int
    """GRU and action-embedding width (also the width of ``phi``)."""


@dataclass
class PolicyInput:
    """A padded batch of turns.

    ``prompt_ids`` (B, L) long, ``segments`` (B, L) long (0 = padding), ``lengths`` (B,) long
    (>= 1), ``action_ids`` (B, A, La) long, ``action_mask`` (B, A) bool (True for a real
    action; every row has at least one), ``repeats`` (B, A, N_REPEAT) float,
    ``token_flags`` (B, A, La, len(OVERLAP_SEGMENTS)) float: :func:`token_overlap` of the
    batch, computed once by :func:`collate` (a row's flags do not depend on its batch, so
    every forward pass over a selection of the rows reads them from here).
    """

    prompt_ids: torch.Tensor
    segments: torch.Tensor
    lengths: torch.Tensor
    action_ids: torch.Tensor
    action_mask: torch.Tensor
    repeats: torch.Tensor
    token_flags: torch.Tensor

    def select(self, rows: torch.Tensor) -> PolicyInput:
        """The sub-batch of ``rows`` (K,) long, re-trimmed to its own longest prompt."""
        lengths = self.lengths[rows]
        width = int(lengths.max())
        return PolicyInput(self.prompt_ids[rows, :width], self.segments[rows, :width], lengths,
                           self.action_ids[rows], self.action_mask[rows], self.repeats[rows],
                           self.token_flags[rows])


def collate(turns: Sequence[TurnInput]) -> PolicyInput:
    """Pad a batch of B turns into tensors."""
    b = len(turns)
    width = max(1, max(len(t.prompt.ids) for t in turns))
    n_act = max(len(t.actions) for t in turns)
    a_len = max(1, max(len(a) for t in turns for a in t.actions))
    p = np.zeros((b, width), dtype=np.int64)
    seg = np.zeros((b, width), dtype=np.int64)
    lengths = np.zeros(b, dtype=np.int64)
    a = np.zeros((b, n_act, a_len), dtype=np.int64)
    mask = np.zeros((b, n_act), dtype=bool)
    rep = np.zeros((b, n_act, N_REPEAT), dtype=np.float32)
    for i, t in enumerate(turns):
        if not t.actions:
            raise ValueError(f"turn {i} has no action to choose from")
        p[i, :len(t.prompt.ids)] = t.prompt.ids
        seg[i, :len(t.prompt.segments)] = t.prompt.segments
        lengths[i] = max(1, len(t.prompt.ids))
        for j, toks in enumerate(t.actions):
            a[i, j, :len(toks)] = toks
            mask[i, j] = True
        rep[i, :len(t.repeats)] = t.repeats
    prompt_ids, segments, action_ids = (torch.from_numpy(p), torch.from_numpy(seg),
                                        torch.from_numpy(a))
    return PolicyInput(prompt_ids, segments, torch.from_numpy(lengths), action_ids,
                       torch.from_numpy(mask), torch.from_numpy(rep),
                       token_overlap(action_ids, prompt_ids, segments))


class ActionScorer(nn.Module):
    """Prompt encoder (embedding + GRU) and bilinear scorer over admissible actions."""

    def __init__(self, shape: PolicyShape, generator: torch.Generator) -> None:
        super().__init__()
        self.shape = shape
        e, h = shape.embed_dim, shape.hidden_dim
        meta: dict[str, Any] = {"device": "meta"}  # built without the global RNG, then filled
        self.embed = nn.Embedding(shape.vocab_size, e, padding_idx=PAD, **meta)
        self.encoder = nn.GRU(e, h, batch_first=True, **meta)
        self.action_rnn = nn.GRU(e + len(OVERLAP_SEGMENTS), h, batch_first=True, **meta)
        self.action_out = nn.Linear(h, h, **meta)
        self.att_query = nn.Linear(h, h, **meta)
        self.att_key = nn.Linear(h, h, **meta)
        self.score_hidden = nn.Linear(4 * h + len(OVERLAP_SEGMENTS) + N_REPEAT, h, **meta)
        self.score_out = nn.Linear(h, 1, **meta)
        self.to_empty(device="cpu")
        self.encoder.flatten_parameters()
        self.action_rnn.flatten_parameters()
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Initialise every parameter from ``generator`` (PyTorch's default scales)."""
        with torch.no_grad():
            nn.init.normal_(self.embed.weight, 0.0, 0.3, generator=generator)
            self.embed.weight[PAD].zero_()
            bound = 1.0 / math.sqrt(self.shape.hidden_dim)
            for rnn in (self.encoder, self.action_rnn):
                for p in rnn.parameters():
                    nn.init.uniform_(p, -bound, bound, generator=generator)
            for lin in (self.action_out, self.att_query, self.att_key, self.score_hidden,
                        self.score_out):
                b = 1.0 / math.sqrt(lin.in_features)
                nn.init.uniform_(lin.weight, -b, b, generator=generator)
                nn.init.zeros_(lin.bias)

    def encode(self, prompt_ids: torch.Tensor, lengths: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """GRU states ``(out (B, L, H), h (B, H))`` of prompts (B, L) long, lengths (B,) long.

        ``h`` is the state at each prompt's last token. Prompts are right-padded and the GRU
        is causal, so ``h`` does not depend on the padding (packing would be equivalent and
        ~20x slower on CPU).
        """
        out, _ = self.encoder(self.embed(prompt_ids))
        return out, out[torch.arange(len(lengths)), lengths - 1]

    def embed_actions(self, action_ids: torch.Tensor, token_overlap: torch.Tensor
                      ) -> torch.Tensor:
        """Action embeddings (B, A, H) from token ids (B, A, La) long and the tokens' overlap
        flags (B, A, La, S) float: a GRU reads each action's words with their flags.

        Candidate lists repeat the same few commands with the same flags (and padding), so
        the GRU reads each distinct (words, flags) row once (about a quarter of the rows in
        a PPO mini-batch) and the rows are gathered back.
        """
        b, a, la = action_ids.shape
        s = token_overlap.shape[-1]
        key = torch.cat([action_ids.reshape(b * a, la),
                         token_overlap.reshape(b * a, la * s).to(torch.int64)], dim=1)
        rows, inverse = torch.unique(key, dim=0, return_inverse=True)
        ids = rows[:, :la]
        flags = rows[:, la:].reshape(-1, la, s).to(token_overlap.dtype)
        out, _ = self.action_rnn(torch.cat([self.embed(ids), flags], dim=-1))
        n = (ids != PAD).sum(-1).clamp(min=1)
        last = out[torch.arange(len(rows)), n - 1]
        return self.action_out(torch.tanh(last))[inverse].reshape(b, a, -1)

    def forward(self, batch: PolicyInput) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, A) with -inf at padding, h (B, H))`` for a batch of turns."""
        out, h = self.encode(batch.prompt_ids, batch.lengths)
        acts = self.embed_actions(batch.action_ids, batch.token_flags)
        scale = 1.0 / math.sqrt(self.shape.hidden_dim)
        att = torch.matmul(self.att_query(acts), self.att_key(out).transpose(1, 2)) * scale
        width = out.shape[1]
        pad = torch.arange(width)[None, :] >= batch.lengths[:, None]
        att = torch.softmax(att.masked_fill(pad[:, None, :], float("-inf")), dim=-1)
        ctx = torch.matmul(att, out)
        hh = h[:, None, :].expand_as(acts)
        feats = torch.cat([acts, ctx, acts * ctx, acts * hh, overlap(batch), batch.repeats],
                          dim=-1)
        logits = self.score_out(torch.tanh(self.score_hidden(feats))).squeeze(-1)
        return logits.masked_fill(~batch.action_mask, float("-inf")), h


def token_overlap(action_ids: torch.Tensor, prompt_ids: torch.Tensor, segments: torch.Tensor
                  ) -> torch.Tensor:
    """Per action token: does it occur in the task, the history, the current observation?

    A parameter-free exact-match attention of action tokens over prompt tokens (a copy
    mechanism): it lets the policy tell "the object the task names" from others even for
    words it never trained on. ``action_ids`` (B, A, La), ``prompt_ids`` and ``segments``
    (B, L) long; returns (B, A, La, len(OVERLAP_SEGMENTS)) float, 0 at padding.
    """
    eq = action_ids[:, :, :, None] == prompt_ids[:, None, None, :]
    real = action_ids != PAD
    out = []
    for seg in OVERLAP_SEGMENTS:
        in_seg = (segments == seg)[:, None, None, :]
        out.append((eq & in_seg).any(-1) & real)
    return torch.stack(out, dim=-1).to(torch.float32)


def overlap(batch: PolicyInput) -> torch.Tensor:
    """Share of each action's words found in the task, history and current observation:
    (B, A, len(OVERLAP_SEGMENTS)) float (the mean of ``batch.token_flags`` over words)."""
    n_real = (batch.action_ids != PAD).sum(-1, keepdim=True).clamp(min=1)
    return batch.token_flags.sum(-2) / n_real


def chosen_logprobs(logits: torch.Tensor, chosen: torch.Tensor, temperature: float = 1.0
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log pi(chosen) (B,), entropy (B,))`` from ``logits`` (B, A), ``chosen`` (B,) long."""
    logp = torch.log_softmax(logits / temperature, dim=-1)
    picked = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    p = logp.exp()
    ent = -(p * logp.masked_fill(p == 0, 0.0)).sum(-1)
    return picked, ent


def sample_actions(logits: torch.Tensor, temperature: float, rng: np.random.Generator
                   ) -> np.ndarray:
    """Sample one action per row of ``logits`` (B, A) at ``temperature``; returns (B,) int.

    Probabilities are formed in float64 and drawn by inverse CDF with one ``rng.random()``
    per row, so the draw depends only on the logits and the generator's state.
    """
    z = logits.detach().double().numpy() / max(temperature, 1e-8)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(len(p))
    cdf = np.cumsum(p, axis=1)
    idx = (cdf < u[:, None]).sum(axis=1)
    n_valid = np.isfinite(logits.detach().numpy()).sum(axis=1)
    return np.minimum(idx, n_valid - 1).astype(np.int64)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl"
               ) -> torch.Tensor:
    """verl's per-sample KL estimators of KL(pi || ref): (B,), (B,) -> (B,).

    ``kl``: ``logp - ref``; ``abs``: its absolute value; ``mse``: half its square;
    ``low_var_kl`` (k3): ``exp(ref - logp) - (ref - logp) - 1``, clipped to [-10, 10].
    """
    diff = logp - ref_logp
    if kind == "kl":
        return diff
    if kind == "abs":
        return diff.abs()
    if kind == "mse":
        return 0.5 * diff.square()
    if kind == "low_var_kl":
        delta = torch.clamp(-diff, -20.0, 20.0)
        return torch.clamp(torch.exp(delta) - delta - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL estimator {kind!r}")
