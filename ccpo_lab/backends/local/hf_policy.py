"""A Hugging Face causal language model as a policy of the CPU backend (reference policies).

``ccpo-lab evaluate --reference FOLDER`` plays the sweep's draw with a released model. On
this backend a turn's candidates are the engine's admissible actions, so the model scores
them: the logit of action ``a`` is ``log p(a | prompt)``, the sum of its tokens'
log-probabilities after the turn's prompt (the local backend's prompt text,
:func:`~.prompts.render_segments`, then ``"action:"``). Actions are then sampled from
those logits exactly as the trained policy's are (:func:`~.policy.sample_actions`: the
same temperature, the same generator per episode), so a reference and a checkpoint of one
seed draw with the same random numbers on every game and repeat.

The prompt keeps its last ``protocol.max_prompt_length`` tokens (left truncation, as
verl's), cut further to the model's context. Everything runs without gradients, on CPU,
in float32; a 7B model is far too slow here (that is the verl backend's job): this is
for small models.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ccpo_lab.backends.local.prompts import PromptSettings, Turn, render_segments
from ccpo_lab.runs.rollouts import hash_tokens

ACTION_CUE = " action:"
"""Text between the prompt and each candidate action."""


@dataclass(frozen=True)
class TextTurn:
    """One turn as text: the prompt and the candidate actions."""

    prompt: str
    actions: tuple[str, ...]

    def hash(self) -> str:
        """Short hash of the prompt (the step-1 evidence's ``input_hash``)."""
        return hash_tokens(tuple(self.prompt.encode("utf-8")))


class CausalLMScorer:
    """Scores admissible actions with a causal LM loaded from a local folder."""

    def __init__(self, path: str, max_prompt_tokens: int) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        # tokenizer.json, where there is one, defines the tokenizer whole (transformers 5's
        # AutoTokenizer may rebuild a model type's own pre-tokenizer over it)
        self.tokenizer = (PreTrainedTokenizerFast if (Path(path) / "tokenizer.json").is_file()
                          else AutoTokenizer).from_pretrained(path, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                          dtype=torch.float32)
        self.model.eval()
        context = int(getattr(self.model.config, "max_position_embeddings", 0) or 4096)
        self.max_prompt_tokens = max(1, min(max_prompt_tokens, context - 64))
        self.pad_id = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id
                          is not None else 0)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Passes without gradients (the weights never change)."""
        with torch.inference_mode():
            yield

    def eval(self) -> CausalLMScorer:
        """Already in evaluation mode (the trained policy's interface)."""
        return self

    def encode_turn(self, task: str, observation: str, candidates: Sequence[str],
                    history: Sequence[Turn], prompts: PromptSettings) -> TextTurn:
        """The turn's prompt text (the trained policy's segments, in order)."""
        parts = render_segments(task, observation, candidates, history, len(history),
                                prompts.history_length)
        return TextTurn(" ".join(text for _, text in parts) + ACTION_CUE, tuple(candidates))

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def score(self, inputs: Sequence[TextTurn]) -> torch.Tensor:
        """Logits (B, A): ``log p(action | prompt)`` per candidate, -inf at padding."""
        rows: list[tuple[int, int, list[int], int]] = []  # (turn, action, ids, prompt len)
        for b, turn in enumerate(inputs):
            prompt = self._ids(turn.prompt)[-self.max_prompt_tokens:] or [self.pad_id]
            for a, action in enumerate(turn.actions):
                act = self._ids(" " + action) or [self.pad_id]
                rows.append((b, a, prompt + act, len(prompt)))
        width = max(len(ids) for _, _, ids, _ in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (_, _, seq, _) in enumerate(rows):
            ids[i, :len(seq)] = torch.tensor(seq)
            mask[i, :len(seq)] = 1
        with torch.inference_mode():
            logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask).logits
                                     .float(), dim=-1)
        out = torch.full((len(inputs), max(len(t.actions) for t in inputs)), float("-inf"))
        for i, (b, a, seq, start) in enumerate(rows):
            target = torch.tensor(seq[start:])
            pos = torch.arange(start - 1, len(seq) - 1)
            out[b, a] = logp[i, pos, target].sum()
        return out


def load_scorer(path: str, prompts: PromptSettings) -> Any:
    """The scorer of the folder ``path``, keeping ``prompts.max_prompt_length`` tokens."""
    return CausalLMScorer(path, prompts.max_prompt_length)
