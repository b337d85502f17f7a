"""Feature capture: the last prompt token's hidden state, padded and packed layouts."""

from __future__ import annotations

import pytest
import torch

from ccpo_lab.backends.verl.agent.phi import (
    FeatureCapture,
    find_final_norm,
    forward_capturing,
    last_prompt_hidden,
    last_prompt_index,
)

# 3 rows, prompt length 4 (left-padded), response length 3 (right-padded).
MASK = torch.tensor([
    [0, 1, 1, 1, 1, 1, 0],   # prompt tokens at 1..3 -> last prompt col 3
    [1, 1, 1, 1, 1, 1, 1],   # full prompt            -> col 3
    [0, 0, 0, 1, 1, 0, 0],   # one prompt token       -> col 3
])
RESP = 3


def _hidden(bs: int, seqlen: int, h: int) -> torch.Tensor:
    # value = 100*row + col (+ 0.5 * feature index): every position is identifiable
    rows = torch.arange(bs).view(bs, 1, 1) * 100.0
    cols = torch.arange(seqlen).view(1, seqlen, 1).float()
    feat = torch.arange(h).view(1, 1, h) * 0.5
    return rows + cols + feat


def test_left_padded_prompt_picks_the_column_before_the_response() -> None:
    assert last_prompt_index(MASK, RESP).tolist() == [3, 3, 3]
    out = last_prompt_hidden(_hidden(3, 7, 2), MASK, RESP, packed=False)
    assert out.tolist() == [[3.0, 3.5], [103.0, 103.5], [203.0, 203.5]]
    assert out.dtype == torch.float32


def test_right_padded_prompt_picks_its_last_real_token() -> None:
    mask = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 1, 1]])  # prompt = first 4 cols
    assert last_prompt_index(mask, 2).tolist() == [1, 0]
    out = last_prompt_hidden(_hidden(2, 6, 1), mask, 2, packed=False)
    assert out[:, 0].tolist() == [1.0, 100.0]


def test_packed_layout_maps_rows_to_unpadded_positions() -> None:
    full = _hidden(3, 7, 2)
    packed = full.reshape(-1, 2)[MASK.reshape(-1).bool()].unsqueeze(0)   # (1, nnz, H)
    # hand-computed: row 0 keeps cols 1..5 (5 tokens), row 1 keeps 0..6 (7), row 2 keeps 3,4
    # -> last prompt tokens at packed positions 2, 5 + 3 = 8, 12 + 0 = 12
    assert packed.shape == (1, 14, 2)
    assert packed[0, 2, 0] == 3.0 and packed[0, 8, 0] == 103.0 and packed[0, 12, 0] == 203.0
    out = last_prompt_hidden(packed, MASK, RESP, packed=True)
    assert torch.equal(out, last_prompt_hidden(full, MASK, RESP, packed=False))
    assert torch.equal(last_prompt_hidden(packed[0], MASK, RESP, packed=True), out)


def test_shape_mismatches_are_refused() -> None:
    with pytest.raises(ValueError, match="padded hidden states"):
        last_prompt_hidden(_hidden(3, 6, 2), MASK, RESP, packed=False)
    with pytest.raises(ValueError, match="unpadded tokens"):
        last_prompt_hidden(torch.zeros(1, 13, 2), MASK, RESP, packed=True)
    with pytest.raises(ValueError, match="no prompt token"):
        last_prompt_index(torch.tensor([[0, 0, 1]]), 1)


def test_capture_returns_rows_in_batch_order_whatever_the_micro_batches() -> None:
    ids = torch.tensor([[5, 6, 7], [1, 2, 3], [5, 6, 7], [9, 9, 9]])   # rows 0 and 2 equal
    mask = torch.ones_like(ids)
    feats = torch.tensor([[0.0], [1.0], [0.0], [3.0]])
    cap = FeatureCapture()
    cap.start()
    cap.add(ids[[3, 1]], mask[[3, 1]], feats[[3, 1]])     # micro-batches out of order
    cap.add(ids[[0]], mask[[0]], feats[[0]])
    assert cap.collect(ids, mask).tolist() == [[0.0], [1.0], [0.0], [3.0]]
    with pytest.raises(KeyError, match="1 of 1 rows"):
        cap.collect(torch.tensor([[4, 4, 4]]), torch.ones(1, 3, dtype=torch.long))
    cap.stop()
    assert not cap.active


@pytest.mark.slow
def test_hook_on_a_real_qwen2_equals_its_last_hidden_state() -> None:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=64)
    model = Qwen2ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    assert find_final_norm(model) is model.model.norm
    ids = torch.randint(1, 64, (3, 7), generator=g) * MASK
    pos = (MASK.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=MASK, position_ids=pos,
                    output_hidden_states=True)
        _, hidden = forward_capturing(model, lambda: model(input_ids=ids, attention_mask=MASK,
                                                           position_ids=pos))
    got = last_prompt_hidden(hidden, MASK, RESP, packed=False)
    want = ref.hidden_states[-1][torch.arange(3), torch.tensor([3, 3, 3])]
    assert torch.allclose(got, want.float())
    assert not torch.equal(got[0], got[1])


def test_final_norm_is_found_through_fsdp_and_checkpoint_wrappers() -> None:
    inner = torch.nn.Module()
    inner.model = torch.nn.Module()
    inner.model.norm = torch.nn.LayerNorm(4)
    inner.model.layers = torch.nn.ModuleList([torch.nn.Module()])
    inner.model.layers[0].norm = torch.nn.LayerNorm(4)      # a layer's norm is not the one
    wrapped = torch.nn.Module()
    wrapped._fsdp_wrapped_module = torch.nn.Module()
    wrapped._fsdp_wrapped_module._checkpoint_wrapped_module = inner
    assert find_final_norm(wrapped) is inner.model.norm
    with pytest.raises(LookupError):
        find_final_norm(torch.nn.Linear(2, 2))
