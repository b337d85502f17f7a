"""The small policy: an encoder reads the prompt, each admissible action is scored against it.

Two encoders (``backend.local.encoder``), one scorer. Every variant embeds the prompt's
tokens and produces per-token states ``out`` and a summary ``h_b`` of the turn (it is what
CCPO's ``phi`` takes from the frozen reference copy, as it takes the 7B model's last-token
hidden state on GPUs), and embeds each action (``e``) from its words, each word's embedding
joined with three flags: whether the word occurs in the task, the history, the current
observation (:func:`token_overlap`, an exact-match copy signal).

- ``conv``: the prompt's word embeddings go through a causal convolution
  (:data:`CONV_WIDTH` words, relu); ``h`` is tanh of a linear map of the states' means
  over the four segments (task, history, observation, action list). An action is the
  mean of its words' projections plus its first word's (the verb) one. Every op is
  batched over all tokens at once.
- ``gru``: a GRU reads the prompt (``h``: its state at the last token) and a second GRU
  each action. The first policy's function, but a GRU steps through
  the ~100 prompt words one at a time: 3-4x the time on CPU.

The action then attends over the prompt's per-token states (``c``: which words of the
prompt it refers to). ``o``: the share of the action's words flagged per segment
(:func:`overlap`); ``r``: whether the action repeats one of the last two shown in the
history. ``logit = v . tanh(U [e, c, e*c, e*h, o, r] + b)``. Parameters are initialised
from an explicit ``torch.Generator``.
``torch`` is imported by this module: import it lazily from CLI code.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ccpo_lab.backends.local.prompts import (
    N_REPEAT,
    PAD,
    SEG_ACTIONS,
    SEG_HISTORY,
    SEG_OBS,
    SEG_TASK,
    PromptSettings,
    Turn,
    TurnInput,
    turn_input,
)
from ccpo_lab.backends.local.settings import POLICY_ENCODERS

OVERLAP_SEGMENTS = (SEG_TASK, SEG_HISTORY, SEG_OBS)
"""Prompt segments whose word overlap with each action the scorer sees (consecutive ids)."""
assert tuple(range(SEG_TASK, SEG_TASK + len(OVERLAP_SEGMENTS))) == OVERLAP_SEGMENTS
PROMPT_SEGMENTS = (SEG_TASK, SEG_HISTORY, SEG_OBS, SEG_ACTIONS)
"""Segments the ``conv`` encoder's summary pools over, in order (ids 1..4)."""
CONV_WIDTH = 2
"""Words the ``conv`` encoder's causal convolution reads at each position."""


@dataclass(frozen=True)
class PolicyShape:
    """Sizes of the policy network."""

    vocab_size: int
    """Hash buckets of the word tokenizer (id 0 is padding)."""
    embed_dim: int
    """Word-embedding width."""
    hidden_dim: int
    """Encoder and action-embedding width (also the width of ``phi``)."""
    encoder: str
    """``conv`` or ``gru`` (see the module docstring)."""


@dataclass
class PolicyInput:
    """A padded batch of turns.

    ``prompt_ids`` (B, L) long, ``segments`` (B, L) long (0 = padding), ``lengths`` (B,) long
    (>= 1), ``action_ids`` (B, A, La) long, ``action_mask`` (B, A) bool (True for a real
    action; every row has at least one), ``repeats`` (B, A, N_REPEAT) float,
    ``token_flags`` (B, A, La, len(OVERLAP_SEGMENTS)) float: :func:`token_overlap` of the
    batch, computed once by :func:`collate` (a row's flags do not depend on its batch, so
    every forward pass over a selection of the rows reads them from here).
    ``action_row`` (B, A) long or None: which distinct (words, flags) row each action is,
    numbered in the lexicographic order of the rows' (ids, flags) values, so that the
    distinct rows of any selection come out in the order ``torch.unique(dim=0)`` gives
    them (computed once by :func:`collate`; ``collate(dedup=False)``: every row its own
    number; None: the policy numbers them with :func:`distinct_rows`).
    """

    prompt_ids: torch.Tensor
    segments: torch.Tensor
    lengths: torch.Tensor
    action_ids: torch.Tensor
    action_mask: torch.Tensor
    repeats: torch.Tensor
    token_flags: torch.Tensor
    action_row: torch.Tensor | None = None

    def select(self, rows: torch.Tensor) -> PolicyInput:
        """The sub-batch of ``rows`` (K,) long, re-trimmed to its own longest prompt."""
        lengths = self.lengths[rows]
        width = int(lengths.max())
        return PolicyInput(self.prompt_ids[rows, :width], self.segments[rows, :width], lengths,
                           self.action_ids[rows], self.action_mask[rows], self.repeats[rows],
                           self.token_flags[rows],
                           None if self.action_row is None else self.action_row[rows])


def collate(turns: Sequence[TurnInput], dedup: bool = True) -> PolicyInput:
    """Pad a batch of B turns into tensors.

    ``dedup``: number the distinct action rows (:func:`distinct_rows`) so that the action
    encoder reads each once; without it every row is its own (a rollout's batch of a few
    turns has few repeats, and finding them costs more than reading them)."""
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
    flags = np.zeros((b, n_act, a_len, len(OVERLAP_SEGMENTS)), dtype=np.float32)
    for i, t in enumerate(turns):
        if not t.actions:
            raise ValueError(f"turn {i} has no action to choose from")
        p[i, :len(t.prompt.ids)] = t.prompt.ids
        seg[i, :len(t.prompt.segments)] = t.prompt.segments
        lengths[i] = max(1, len(t.prompt.ids))
        # token_overlap's flags from the turn's words: word -> [in task, history, obs]
        found: dict[int, list[bool]] = {}
        for w, s in zip(t.prompt.ids, t.prompt.segments, strict=True):
            if s in OVERLAP_SEGMENTS:
                found.setdefault(w, [False] * len(OVERLAP_SEGMENTS))[s - SEG_TASK] = True
        none = [False] * len(OVERLAP_SEGMENTS)
        for j, toks in enumerate(t.actions):
            a[i, j, :len(toks)] = toks
            mask[i, j] = True
            if toks:
                flags[i, j, :len(toks)] = [found.get(w, none) for w in toks]
        rep[i, :len(t.repeats)] = t.repeats
    action_ids = torch.from_numpy(a)
    token_flags = torch.from_numpy(flags)
    rows = (distinct_rows(action_ids, token_flags) if dedup
            else torch.arange(b * n_act).reshape(b, n_act))
    return PolicyInput(torch.from_numpy(p), torch.from_numpy(seg), torch.from_numpy(lengths),
                       action_ids, torch.from_numpy(mask), torch.from_numpy(rep), token_flags,
                       rows)


def _row_keys(action_ids: torch.Tensor, token_flags: torch.Tensor) -> torch.Tensor:
    """(B * A, La * (1 + S)) long: each action's word ids then its flags, one row each."""
    b, a, la = action_ids.shape
    return torch.cat([action_ids.reshape(b * a, la),
                      token_flags.reshape(b * a, -1).to(torch.int64)], dim=1)


def distinct_rows(action_ids: torch.Tensor, token_flags: torch.Tensor) -> torch.Tensor:
    """(B, A) long: the rank of each action's (words, flags) row among the batch's distinct
    rows, in lexicographic order (``torch.unique(dim=0)``'s order).

    The rows are compared as big-endian bytes, whose order is the numeric one for
    non-negative values (``np.unique(axis=0)`` gives the same ~20x slower).
    """
    b, a, _ = action_ids.shape
    keys = np.ascontiguousarray(_row_keys(action_ids, token_flags).numpy().astype(">i8"))
    rows = keys.view(np.dtype((np.void, keys.itemsize * keys.shape[1]))).ravel()
    _, inverse = np.unique(rows, return_inverse=True)
    return torch.from_numpy(inverse.reshape(b, a).astype(np.int64))


class ActionScorer(nn.Module):
    """Prompt encoder, action encoder and bilinear scorer over admissible actions."""

    def __init__(self, shape: PolicyShape, generator: torch.Generator) -> None:
        super().__init__()
        if shape.encoder not in POLICY_ENCODERS:
            raise ValueError(f"unknown encoder {shape.encoder!r}; valid: {POLICY_ENCODERS}")
        self.shape = shape
        e, h, s = shape.embed_dim, shape.hidden_dim, len(OVERLAP_SEGMENTS)
        meta: dict[str, Any] = {"device": "meta"}  # built without the global RNG, then filled
        self.embed = nn.Embedding(shape.vocab_size, e, padding_idx=PAD, **meta)
        self.gru = shape.encoder == "gru"
        if self.gru:
            self.encoder = nn.GRU(e, h, batch_first=True, **meta)
            self.action_rnn = nn.GRU(e + s, h, batch_first=True, **meta)
        else:
            self.conv = nn.Linear(e, CONV_WIDTH * h, **meta)
            self.summary = nn.Linear(len(PROMPT_SEGMENTS) * h, h, **meta)
            self.action_words = nn.Linear(e + s, 2 * h, **meta)
        self.action_out = nn.Linear(h, h, **meta)
        self.att_query = nn.Linear(h, h, **meta)
        # conv: keys are the states themselves (a key map would only be folded into the
        # query's: q . (W u) = (W^T q) . u)
        self.att_key = nn.Linear(h, h, **meta) if self.gru else None
        self.score_hidden = nn.Linear(4 * h + s + N_REPEAT, h, **meta)
        self.score_out = nn.Linear(h, 1, **meta)
        self._table: torch.Tensor | None = None  # set by frozen()
        self.to_empty(device="cpu")
        if self.gru:
            self.encoder.flatten_parameters()
            self.action_rnn.flatten_parameters()
        self.reset_parameters(generator)

    def _linears(self) -> list[nn.Linear]:
        if self.gru:
            return [self.action_out, self.att_query, self.att_key,  # type: ignore[list-item]
                    self.score_hidden, self.score_out]
        return [self.conv, self.summary, self.action_words, self.action_out, self.att_query,
                self.score_hidden, self.score_out]

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Initialise every parameter from ``generator`` (PyTorch's default scales)."""
        with torch.no_grad():
            nn.init.normal_(self.embed.weight, 0.0, 0.3, generator=generator)
            self.embed.weight[PAD].zero_()
            if self.gru:
                bound = 1.0 / math.sqrt(self.shape.hidden_dim)
                for rnn in (self.encoder, self.action_rnn):
                    for p in rnn.parameters():
                        nn.init.uniform_(p, -bound, bound, generator=generator)
            for lin in self._linears():
                b = 1.0 / math.sqrt(lin.in_features)
                nn.init.uniform_(lin.weight, -b, b, generator=generator)
                nn.init.zeros_(lin.bias)

    def encode(self, prompt_ids: torch.Tensor, segments: torch.Tensor, lengths: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token states and summary ``(out (B, L, H), h (B, H))`` of prompts (B, L) long
        with their segments (B, L) long (0 at padding) and lengths (B,) long.

        Prompts are right-padded and both encoders are causal, so the states of real tokens
        do not depend on the padding; ``conv``'s summary pools over real tokens only.
        ``gru``: ``h`` is the state at each prompt's last token (packing would be
        equivalent and ~20x slower on CPU).
        """
        if self.gru:
            out, _ = self.encoder(self.embed(prompt_ids))
            return out, out[torch.arange(len(lengths)), lengths - 1]
        out, pool = self._conv_states(prompt_ids, segments)
        return out, self._summary(torch.bmm(pool, out))

    def _summary(self, means: torch.Tensor) -> torch.Tensor:
        """``conv``'s ``h`` (B, H) from the per-segment means of its states (B, 4, H)."""
        return torch.tanh(self.summary(means.reshape(len(means), -1)))

    def _conv_states(self, prompt_ids: torch.Tensor, segments: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """``conv``'s per-token states (B, L, H) and pooling weights (B, 4, L): row ``s``
        averages over the tokens of segment ``PROMPT_SEGMENTS[s]`` (zero if it has none)."""
        width = prompt_ids.shape[1]
        hd = self.shape.hidden_dim
        ids = nn.functional.pad(prompt_ids, (CONV_WIDTH - 1, 0), value=PAD)  # PAD: no word
        # filter k reads word t-k: a column window of the left-padded words
        words = [ids[:, CONV_WIDTH - 1 - k:CONV_WIDTH - 1 - k + width] for k in range(CONV_WIDTH)]
        table = self._table
        if table is not None and torch.is_grad_enabled():
            raise RuntimeError("the policy is frozen(): gradient-free passes only")
        if table is None and prompt_ids.numel() >= self.shape.vocab_size:
            # the convolution is a sum of per-word terms: apply the filters to the
            # vocabulary's embeddings once and look the results up per word
            table = self.conv(self.embed.weight)  # (V, CONV_WIDTH * H)
        if table is not None:
            terms = [nn.functional.embedding(w, table[:, k * hd:(k + 1) * hd])
                     for k, w in enumerate(words)]
        else:  # few words (a rollout's batch): filter the words themselves
            y = self.conv(self.embed(ids))  # (B, L + CONV_WIDTH - 1, CONV_WIDTH * H)
            terms = [y[:, CONV_WIDTH - 1 - k:CONV_WIDTH - 1 - k + width, k * hd:(k + 1) * hd]
                     for k in range(CONV_WIDTH)]
        pre = terms[0]
        for t in terms[1:]:
            pre = pre + t
        out = torch.relu(pre)  # tanh costs ~12x relu on CPU over all the prompts' words
        member = (segments[:, None, :] == torch.tensor(PROMPT_SEGMENTS)[:, None]).to(out.dtype)
        return out, member / member.sum(2, keepdim=True).clamp(min=1.0)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """A span of gradient-free passes during which the parameters do not change (a
        round of rollouts, the reference pass): ``conv`` applies its filters to the
        vocabulary once for all of them instead of once per batch (the same arithmetic as
        a large batch's; a no-op for ``gru``). A pass that needs gradients inside it is an
        error."""
        if self.gru:
            yield
            return
        with torch.no_grad():
            self._table = self.conv(self.embed.weight)
        try:
            yield
        finally:
            self._table = None

    def embed_actions(self, action_ids: torch.Tensor, token_overlap: torch.Tensor,
                      action_row: torch.Tensor | None = None) -> torch.Tensor:
        """Action embeddings (B, A, H) from token ids (B, A, La) long and the tokens' overlap
        flags (B, A, La, S) float.

        Candidate lists repeat the same few commands with the same flags (and padding), so
        each distinct (words, flags) row is read once (about a quarter of the rows in a PPO
        mini-batch) and the rows are gathered back. ``action_row`` (B, A) long: the rows'
        lexicographic ranks from :func:`distinct_rows` (found here if None).
        """
        b, a, la = action_ids.shape
        s = token_overlap.shape[-1]
        if action_row is None:
            action_row = distinct_rows(action_ids, token_overlap)
        ranks, inverse = torch.unique(action_row.reshape(-1), return_inverse=True)
        first = torch.empty(len(ranks), dtype=torch.int64).scatter_(
            0, inverse, torch.arange(b * a))  # one (any) position of each distinct row
        ids = action_ids.reshape(b * a, la)[first]
        flags = token_overlap.reshape(b * a, la, s)[first]
        x = torch.cat([self.embed(ids), flags], dim=-1)  # (U, La, E + S)
        n = (ids != PAD).sum(-1).clamp(min=1)
        if self.gru:
            out, _ = self.action_rnn(x)
            last = out[torch.arange(len(ids)), n - 1]
        else:
            hd = self.shape.hidden_dim
            words = self.action_words(x)  # (U, La, 2H): per-word and first-word projections
            real = (ids != PAD).to(words.dtype)[:, :, None]
            last = (words[:, :, :hd] * real).sum(1) / n[:, None] + words[:, 0, hd:]
        return self.action_out(torch.tanh(last))[inverse].reshape(b, a, -1)

    def forward(self, batch: PolicyInput) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, A) with -inf at padding, h (B, H))`` for a batch of turns."""
        if self.gru:
            out, h = self.encode(batch.prompt_ids, batch.segments, batch.lengths)
        else:
            out, pool = self._conv_states(batch.prompt_ids, batch.segments)
        acts = self.embed_actions(batch.action_ids, batch.token_flags, batch.action_row)
        scale = 1.0 / math.sqrt(self.shape.hidden_dim)
        keys = out if self.att_key is None else self.att_key(out)
        att = torch.matmul(self.att_query(acts), keys.transpose(1, 2)) * scale
        width = out.shape[1]
        pad = torch.arange(width)[None, :] >= batch.lengths[:, None]
        att = torch.softmax(att.masked_fill(pad[:, None, :], float("-inf")), dim=-1)
        if self.gru:
            ctx = torch.matmul(att, out)
        else:  # the segment means and the attention read the states in one product
            mixed = torch.bmm(torch.cat([pool, att], dim=1), out)
            h = self._summary(mixed[:, :len(PROMPT_SEGMENTS)])
            ctx = mixed[:, len(PROMPT_SEGMENTS):]
        hh = h[:, None, :].expand_as(acts)
        feats = torch.cat([acts, ctx, acts * ctx, acts * hh, overlap(batch), batch.repeats],
                          dim=-1)
        logits = self.score_out(torch.tanh(self.score_hidden(feats))).squeeze(-1)
        return logits.masked_fill(~batch.action_mask, float("-inf")), h

    def encode_turn(self, task: str, observation: str, candidates: Sequence[str],
                    history: Sequence[Turn], prompts: PromptSettings) -> TurnInput:
        """What the policy reads in one turn (:func:`~.prompts.turn_input`); with
        :meth:`score`, what a rollout asks of any action scorer."""
        return turn_input(task, observation, candidates, history, prompts)

    def score(self, inputs: Sequence[TurnInput]) -> torch.Tensor:
        """Logits (B, A) of a lockstep batch of turns, -inf at padding."""
        return self(collate(inputs, dedup=False))[0]


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


def sample_actions(logits: torch.Tensor, temperature: float,
                   rng: np.random.Generator | Sequence[np.random.Generator]) -> np.ndarray:
    """Sample one action per row of ``logits`` (B, A) at ``temperature``; returns (B,) int.

    Probabilities are formed in float64 and drawn by inverse CDF with one ``rng.random()``
    per row, so the draw depends only on the logits and the generator's state. ``rng``: one
    generator for the batch (its draws in row order), or one per row (B,) (an evaluation's
    episodes, each with the sampling seed of its (run seed, game, repeat)).
    """
    z = logits.detach().double().numpy() / max(temperature, 1e-8)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    if isinstance(rng, np.random.Generator):
        u = rng.random(len(p))
    else:
        if len(rng) != len(p):
            raise ValueError(f"{len(rng)} generators for {len(p)} rows")
        u = np.array([g.random() for g in rng], dtype=np.float64)
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
