"""The rehearsal's tiny model: its tokenizer (no download) and its demonstrations' prompts,
which must be the ones verl-agent's ALFWorld environment manager renders."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from ccpo_lab.backends.verl import tiny_model as T

CHECKOUT = os.environ.get("CCPO_LAB_VERL_AGENT")


def test_tokenizer_round_trips_answers_and_keeps_the_tags_whole() -> None:
    pytest.importorskip("transformers")
    tok = T.build_tokenizer(["You arrive at Desk 1. Your task is to: put a mug in desk.",
                             T.answer("take mug 1 from desk 1")])
    text = T.answer("take mug 1 from desk 1")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert pieces[:1] == ["<think>"] and "</action>" in pieces and "<unk>" not in pieces
    assert tok.decode(ids) == text
    assert tok.unk_token_id not in tok("Desk", add_special_tokens=False)["input_ids"]
    chat = tok.apply_chat_template([{"role": "user", "content": "look"}],
                                   add_generation_prompt=True, tokenize=False)
    assert chat == "<|im_start|>user\nlook<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert "token_type_ids" not in tok("look")
    # verl-agent's projection reads a malformed answer as invalid, a well-formed one valid
    assert all(t in text for t in T.TAGS)
    assert "<think>" not in T.answer("look", malformed=True)


@pytest.mark.verl_agent
@pytest.mark.skipif(not CHECKOUT or os.environ.get("CCPO_LAB_IN_TRAINER_ENV") != "1",
                    reason="needs the verl-agent checkout's environment manager (runs in "
                    "the trainer environment: scripts/verl-agent-contract.sh)")
def test_demonstration_prompts_are_verl_agents_own() -> None:
    """:func:`render_prompt` == ``AlfWorldEnvironmentManager.build_text_obs`` at the pinned
    commit, for the first turn and for later turns with a history."""
    from omegaconf import OmegaConf

    checkout = Path(str(CHECKOUT))
    templates = T.prompt_templates(checkout)
    from agent_system.environments.env_manager import AlfWorldEnvironmentManager
    from agent_system.memory import SimpleMemory

    task = "put a mug in desk"
    turns = [("-= Welcome =-\n\nYou are in a room. Your task is to: put a mug in desk.",
              "go to shelf 1"), ("You arrive at shelf 1. You see a mug 1.",
                                 "take mug 1 from shelf 1"),
             ("You pick up the mug 1 from the shelf 1.", "go to desk 1")]
    adm = ["go to desk 1", "go to shelf 1", "help", "look"]
    for hist_len in (0, 2):
        mgr = types.SimpleNamespace(memory=SimpleMemory(), tasks=[task],
                                    config=OmegaConf.create({"env": {"history_length":
                                                                     hist_len}}))
        mgr.memory.reset(batch_size=1)
        history: list[tuple[str, str]] = []
        for i, (obs, action) in enumerate(turns):
            theirs = AlfWorldEnvironmentManager.build_text_obs(mgr, [obs], [adm],
                                                               init=(i == 0))[0]
            ours = T.render_prompt(templates, task, obs, adm, history, hist_len)
            assert ours == theirs, (hist_len, i)
            mgr.memory.store({"text_obs": [obs], "action": [action]})
            history.append((obs, action))
