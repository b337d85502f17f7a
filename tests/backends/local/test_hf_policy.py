"""A causal LM as the CPU backend's policy: each candidate's logit is log p(action | prompt)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ccpo_lab.backends.local.hf_policy import CausalLMScorer
from ccpo_lab.backends.local.policy import sample_actions
from ccpo_lab.backends.local.prompts import PromptSettings, Turn
from tests.evaluation.tiny_hf import save_tiny_model


def test_each_logit_is_the_actions_log_probability_after_the_prompt(tmp_path: Path) -> None:
    path = save_tiny_model(tmp_path / "m", seed=3)
    scorer = CausalLMScorer(str(path), max_prompt_tokens=256)
    prompts = PromptSettings(history_length=1, max_prompt_length=256, vocab_size=0)
    turns = [scorer.encode_turn("put a mug in the fridge", "you see a mug and a desk",
                                ["take mug from desk", "go to fridge 1", "look"],
                                [Turn("you arrive", "go to desk 1")], prompts),
             scorer.encode_turn("examine the book", "nothing happens", ["look"], [], prompts)]
    logits = scorer.score(turns)
    assert logits.shape == (2, 3) and torch.isinf(logits[1, 1:]).all()
    tok, model = scorer.tokenizer, scorer.model
    for b, turn in enumerate(turns):
        prompt = tok(turn.prompt, add_special_tokens=False)["input_ids"]
        for a, action in enumerate(turn.actions):
            act = tok(" " + action, add_special_tokens=False)["input_ids"]
            with torch.no_grad():  # one unpadded sequence at a time
                out = model(input_ids=torch.tensor([prompt + act])).logits[0].log_softmax(-1)
            want = sum(float(out[len(prompt) + i - 1, t]) for i, t in enumerate(act))
            assert abs(float(logits[b, a]) - want) < 1e-4
    # sampled exactly as the trained policy's logits are: the same generator, the same pick
    picks = sample_actions(logits, 1.0, [np.random.default_rng(5), np.random.default_rng(6)])
    assert picks[1] == 0 and 0 <= picks[0] < 3
