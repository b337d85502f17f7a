"""The local backend's prompts, tokenizer and policy network (no engine needed)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch

from ccpo_lab.backends.local.policy import (
    CONV_WIDTH,
    PROMPT_SEGMENTS,
    ActionScorer,
    PolicyShape,
    _row_keys,
    chosen_logprobs,
    collate,
    distinct_rows,
    kl_penalty,
    overlap,
    sample_actions,
    token_overlap,
)
from ccpo_lab.backends.local.prompts import (
    SEG_ACTIONS,
    SEG_HISTORY,
    SEG_OBS,
    SEG_TASK,
    PromptSettings,
    Turn,
    choices,
    clean_observation,
    encode_prompt,
    render_segments,
    tokenize,
    turn_input,
)

V = 512
SETTINGS = PromptSettings(history_length=2, max_prompt_length=256, vocab_size=V)
SHAPE = PolicyShape(vocab_size=V, embed_dim=8, hidden_dim=12, encoder="conv")
GRU = PolicyShape(vocab_size=V, embed_dim=8, hidden_dim=12, encoder="gru")
BOTH = pytest.mark.parametrize("shape", [SHAPE, GRU], ids=["conv", "gru"])
START = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking "
         "quickly around you, you see a countertop 1, and a fridge 1.\n\nYour task is to: put "
         "a cool cup in sinkbasin.")


def word(w: str) -> int:
    return zlib.crc32(w.encode()) % (V - 1) + 1


def test_tokenize_hashes_lowercased_words_and_drops_punctuation() -> None:
    assert tokenize("Take cup 1, from: Fridge 1.", V) == tuple(
        word(w) for w in ("take", "cup", "1", "from", "fridge", "1"))
    assert tokenize("[ a | b ; ]", V) == tuple(word(w) for w in "[a|b;]")
    assert all(1 <= t < V for t in tokenize(START, V))


def test_choices_hide_help_and_banner_is_removed() -> None:
    assert choices(("go to fridge 1", "help", "look")) == ("go to fridge 1", "look")
    assert clean_observation(START).startswith("You are in the middle of a room.")


def test_segments_show_the_last_history_length_turns_numbered_from_the_episode_start() -> None:
    hist = [Turn("o1", "a1"), Turn("o2", "a2"), Turn("o3", "a3")]
    parts = dict(render_segments("put a cup in fridge", "o4", ["x", "y"], hist, 3, 2))
    assert parts[SEG_TASK] == "task: put a cup in fridge. step 4."
    assert parts[SEG_HISTORY] == "history: observation 2: o2 action 2: a2 ; observation 3: o3 " \
                                 "action 3: a3 ;"
    assert parts[SEG_OBS] == "now: o4"
    assert parts[SEG_ACTIONS] == "admissible actions: [ x | y ]"
    first = dict(render_segments("t", "o", ["x"], [], 0, 2))
    assert SEG_HISTORY not in first and first[SEG_TASK] == "task: t. step 1."


def test_encode_prompt_keeps_the_last_tokens_with_their_segments() -> None:
    enc = encode_prompt([(SEG_TASK, "a b"), (SEG_OBS, "c"), (SEG_ACTIONS, "d e")], V, 3)
    assert enc.ids == (word("c"), word("d"), word("e"))
    assert enc.segments == (SEG_OBS, SEG_ACTIONS, SEG_ACTIONS)


def test_repeat_flags_only_for_turns_the_prompt_shows() -> None:
    hist = [Turn("o1", "go to fridge 1"), Turn("o2", "open fridge 1"), Turn("o3", "look")]
    cands = ["look", "open fridge 1", "go to fridge 1"]
    ti = turn_input("t", "o4", cands, hist, SETTINGS)
    assert ti.repeats == ((1.0, 0.0), (0.0, 1.0), (0.0, 0.0))
    one = turn_input("t", "o4", cands, hist, PromptSettings(1, 256, V))
    assert one.repeats == ((1.0, 0.0), (0.0, 0.0), (0.0, 0.0))


def _turns() -> list:
    hist = [Turn(START, "go to countertop 1")]
    a = turn_input("put a cool cup in sinkbasin", "You arrive at countertop 1. On the "
                   "countertop 1, you see a cup 1.",
                   ["go to fridge 1", "take cup 1 from countertop 1", "look"], hist, SETTINGS)
    b = turn_input("put a cool cup in sinkbasin", START, ["go to countertop 1", "go to fridge 1"],
                   [], SETTINGS)
    return [a, b]


def test_collate_pads_and_masks() -> None:
    a, b = _turns()
    batch = collate([a, b])
    assert batch.prompt_ids.shape == (2, max(len(a.prompt.ids), len(b.prompt.ids)))
    assert batch.lengths.tolist() == [len(a.prompt.ids), len(b.prompt.ids)]
    assert batch.action_mask.tolist() == [[True, True, True], [True, True, False]]
    assert batch.action_ids.shape[:2] == (2, 3)
    assert batch.repeats.shape == (2, 3, 2)


def test_overlap_counts_action_words_found_in_each_segment() -> None:
    a, _ = _turns()
    o = overlap(collate([a]))[0]
    # "go to fridge 1": not in the task line; go/to/fridge/1 all in the history
    # (start observation + "go to countertop 1"); only "1" in the current observation
    assert o[0].tolist() == pytest.approx([0.0, 1.0, 1 / 4])
    # "take cup 1 from countertop 1" (6 words): task has cup; history and observation have
    # cup, 1, countertop, 1
    assert o[1].tolist() == pytest.approx([1 / 6, 4 / 6, 4 / 6])
    # "look" occurs only in the action list
    assert o[2].tolist() == [0.0, 0.0, 0.0]


@BOTH
def test_policy_init_is_seeded_and_leaves_global_rng_alone(shape: PolicyShape) -> None:
    before = torch.get_rng_state().clone()
    p1 = ActionScorer(shape, torch.Generator().manual_seed(3))
    p2 = ActionScorer(shape, torch.Generator().manual_seed(3))
    p3 = ActionScorer(shape, torch.Generator().manual_seed(4))
    assert torch.equal(before, torch.get_rng_state())
    assert all(torch.equal(x, y) for x, y in zip(p1.parameters(), p2.parameters(), strict=True))
    assert not torch.equal(p1.embed.weight, p3.embed.weight)
    assert torch.count_nonzero(p1.embed.weight[0]) == 0


@BOTH
def test_logits_mask_padding_and_do_not_depend_on_batch_padding(shape: PolicyShape) -> None:
    a, b = _turns()
    pol = ActionScorer(shape, torch.Generator().manual_seed(0))
    with torch.no_grad():
        both, h_both = pol(collate([a, b]))
        alone, h_alone = pol(collate([b]))
    assert math.isinf(float(both[1, 2])) and float(both[1, 2]) < 0
    assert torch.allclose(both[1, :2], alone[0], atol=1e-5)
    assert torch.allclose(h_both[1], h_alone[0], atol=1e-5)
    assert h_both.shape == (2, SHAPE.hidden_dim)


def _one_action(pol: ActionScorer, ids: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
    """The action encoder of the module docstring, written out for one action (La,)."""
    x = torch.cat([pol.embed(ids), flags], dim=-1)
    real = int((ids != 0).sum())  # words come first, then padding
    n = max(1, real)
    if pol.gru:
        out, _ = pol.action_rnn(x[None])
        last = out[0, n - 1]
    else:
        h = pol.shape.hidden_dim
        words = pol.action_words(x)
        last = words[:real, :h].sum(0) / n + words[0, h:]  # the mean of the real words
    return pol.action_out(torch.tanh(last))


@BOTH
@pytest.mark.parametrize("precomputed", [True, False], ids=["collated", "found"])
def test_actions_are_read_once_per_distinct_row_with_the_same_values_and_gradients(
        shape: PolicyShape, precomputed: bool) -> None:
    a, b = _turns()
    batch = collate([a, b, a, b, b])  # repeated turns, "go to fridge 1" in both, padding
    pol = ActionScorer(shape, torch.Generator().manual_seed(0))
    ids, flags = batch.action_ids, batch.token_flags

    def every_row() -> torch.Tensor:  # all B x A rows, one by one
        rows = [_one_action(pol, ids[i, j], flags[i, j])
                for i in range(ids.shape[0]) for j in range(ids.shape[1])]
        return torch.stack(rows).reshape(ids.shape[0], ids.shape[1], -1)

    calls = []
    reader = pol.action_rnn if pol.gru else pol.action_words
    hook = reader.register_forward_hook(lambda m, i, o: calls.append(i[0].shape[0]))
    fast = pol.embed_actions(ids, flags, batch.action_row if precomputed else None)
    hook.remove()
    distinct = len({(tuple(ids[i, j].tolist()), tuple(flags[i, j].flatten().tolist()))
                    for i in range(ids.shape[0]) for j in range(ids.shape[1])})
    assert calls == [distinct] and distinct < ids.shape[0] * ids.shape[1]
    w = torch.randn(fast.shape, generator=torch.Generator().manual_seed(1))
    (fast * w).sum().backward()
    grads = {k: p.grad.clone() for k, p in pol.named_parameters() if p.grad is not None}
    pol.zero_grad()
    slow = every_row()
    (slow * w).sum().backward()
    assert torch.allclose(fast, slow, atol=1e-6)
    assert grads.keys() == {k for k, p in pol.named_parameters() if p.grad is not None}
    for k, g in grads.items():
        assert torch.allclose(g, dict(pol.named_parameters())[k].grad, atol=1e-6), k


def test_distinct_rows_number_rows_in_torch_unique_order_and_collate_flags_match() -> None:
    gen = torch.Generator().manual_seed(5)
    for trial in range(20):  # small values: many repeats; large ones: byte order matters
        high = 3 if trial % 2 else 70_000
        ids = torch.randint(0, high, (6, 5, 4), generator=gen)
        flags = torch.randint(0, 2, (6, 5, 4, 3), generator=gen).float()
        _, inverse = torch.unique(_row_keys(ids, flags), dim=0, return_inverse=True)
        assert torch.equal(distinct_rows(ids, flags), inverse.reshape(6, 5))
    batch = collate([*_turns(), *_turns()[::-1]])
    assert torch.equal(batch.token_flags,
                       token_overlap(batch.action_ids, batch.prompt_ids, batch.segments))
    sub = batch.select(torch.tensor([3, 1]))
    assert torch.equal(sub.action_row, batch.action_row[torch.tensor([3, 1])])


def test_conv_encoder_matches_its_definition_whichever_way_it_is_computed() -> None:
    """Causal convolution of word embeddings (relu), summary = tanh(W [segment means]); the
    vocabulary-table path (many words) and the per-word path (few) agree."""
    pol = ActionScorer(SHAPE, torch.Generator().manual_seed(2))
    a, b = _turns()
    one = collate([b])
    many = collate([b] * (V // len(b.prompt.ids) + 1))  # >= V words: the table path
    assert one.prompt_ids.numel() < V <= many.prompt_ids.numel()
    h = SHAPE.hidden_dim
    ids = one.prompt_ids[0]
    x = pol.embed(torch.cat([torch.zeros(CONV_WIDTH - 1, dtype=torch.long), ids]))
    w, bias = pol.conv.weight, pol.conv.bias
    want = torch.stack([torch.relu(sum(w[k * h:(k + 1) * h] @ x[t + CONV_WIDTH - 1 - k]
                                       + bias[k * h:(k + 1) * h] for k in range(CONV_WIDTH)))
                        for t in range(len(ids))])
    seg = one.segments[0]
    means = torch.cat([want[seg == s].mean(0) if (seg == s).any() else torch.zeros(h)
                       for s in PROMPT_SEGMENTS])
    want_h = torch.tanh(pol.summary(means))
    with torch.no_grad():
        for batch in (one, many):
            out, summary = pol.encode(batch.prompt_ids, batch.segments, batch.lengths)
            assert torch.allclose(out[0], want, atol=1e-5)
            assert torch.allclose(summary[0], want_h, atol=1e-5)
            assert torch.allclose(summary[-1], want_h, atol=1e-5)
            _, h_forward = pol(batch)  # the forward pass computes h its own way
            assert torch.allclose(h_forward[0], want_h, atol=1e-5)


def test_chosen_logprobs_and_entropy_by_hand() -> None:
    logits = torch.tensor([[0.0, math.log(3.0), float("-inf")]])
    logp, ent = chosen_logprobs(logits, torch.tensor([1]))
    assert float(logp) == pytest.approx(math.log(0.75))
    assert float(ent) == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
    hot, _ = chosen_logprobs(logits, torch.tensor([1]), temperature=0.5)
    assert float(hot) == pytest.approx(math.log(9 / 10))


def test_sampling_is_reproducible_respects_the_mask_and_the_temperature() -> None:
    logits = torch.tensor([[0.0, math.log(3.0), float("-inf")]] * 4000)
    draws = sample_actions(logits, 1.0, np.random.default_rng(7))
    again = sample_actions(logits, 1.0, np.random.default_rng(7))
    assert np.array_equal(draws, again)
    assert set(np.unique(draws)) <= {0, 1}
    assert abs(float(np.mean(draws == 1)) - 0.75) < 0.03  # 4000 draws: sd 0.007
    cold = sample_actions(logits, 0.05, np.random.default_rng(7))
    assert float(np.mean(cold == 1)) > 0.99


def test_kl_estimators_match_verl_definitions() -> None:
    logp = torch.tensor([-1.0, -2.0, -0.5])
    ref = torch.tensor([-1.0, -1.0, -1.5])
    d = logp - ref
    assert torch.allclose(kl_penalty(logp, ref, "kl"), d)
    assert torch.allclose(kl_penalty(logp, ref, "abs"), d.abs())
    assert torch.allclose(kl_penalty(logp, ref, "mse"), 0.5 * d**2)
    k3 = torch.exp(-d) + d - 1
    assert torch.allclose(kl_penalty(logp, ref, "low_var_kl"), k3)
    assert float(kl_penalty(logp, ref, "low_var_kl")[0]) == 0.0
    assert float(kl_penalty(torch.tensor([-30.0]), torch.tensor([0.0]))[0]) == 10.0
    with pytest.raises(ValueError):
        kl_penalty(logp, ref, "nope")


@BOTH
def test_frozen_passes_and_rows_read_without_dedup_give_the_same_logits(
        shape: PolicyShape) -> None:
    """frozen() (the filters applied to the vocabulary once) and collate(dedup=False) (every
    action row read) change only the rounding; a pass that needs gradients is refused."""
    a, b = _turns()
    pol = ActionScorer(shape, torch.Generator().manual_seed(6))
    with torch.no_grad():
        want, h = pol(collate([a, b, a]))
        with pol.frozen():
            for batch in (collate([a, b, a]), collate([a, b, a], dedup=False)):
                got, h_got = pol(batch)
                assert torch.allclose(got, want, atol=1e-5)
                assert torch.allclose(h_got, h, atol=1e-5)
    assert torch.equal(collate([a, b], dedup=False).action_row, torch.arange(6).reshape(2, 3))
    if shape.encoder == "conv":
        with pol.frozen(), pytest.raises(RuntimeError, match="frozen"):
            pol(collate([a]))
    logits, _ = pol(collate([a]))  # frozen() ended: gradients flow again
    logits[0, 0].backward()
    assert pol.embed.weight.grad is not None
