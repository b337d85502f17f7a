"""CCPO features: the frozen reference policy's final-layer hidden state at the last prompt token.

Captured during the reference log-prob pass (no extra forward): while a reference worker
computes ``ref_log_prob``, a forward hook on the model's final norm keeps its output, and
:func:`last_prompt_hidden` picks each row's last prompt token, for both of verl's layouts:

- padded: ``hidden`` is ``(bs, seqlen, H)``; ``input_ids = [prompt | response]`` with the
  prompt left-padded to ``seqlen - response_length`` tokens;
- packed (``use_remove_padding``): ``hidden`` is ``(1, nnz, H)`` (or ``(nnz, H)``), the
  tokens where ``attention_mask`` is 1, row after row.

Micro-batches may be split or reordered (dynamic batch sizes); :class:`FeatureCapture`
files each row's feature under a digest of its input and hands the features back in the
order of the worker's batch. Identical inputs have identical features, so duplicated rows
(verl-agent pads batches by copying rows) are served correctly.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PHI_KEY = "ccpo_lab_phi"
"""Batch key of the ``(bs, hidden)`` float32 features."""


def last_prompt_index(attention_mask: torch.Tensor, response_length: int) -> torch.Tensor:
    """``(bs,)`` column of each row's last prompt token.

    ``attention_mask``: ``(bs, seqlen)`` 0/1; the prompt is the first
    ``seqlen - response_length`` columns (left- or right-padded). Raises ``ValueError``
    when a row has no prompt token.
    """
    import torch

    bs, seqlen = attention_mask.shape
    plen = seqlen - int(response_length)
    if plen < 1:
        raise ValueError(f"response_length {response_length} leaves no prompt in {seqlen}")
    prompt = attention_mask[:, :plen].to(torch.int64)
    if bool((prompt.sum(dim=1) == 0).any()):
        raise ValueError("a row has no prompt token (all-zero prompt mask)")
    cols = torch.arange(plen, device=attention_mask.device).expand(bs, plen)
    return torch.where(prompt > 0, cols, torch.full_like(cols, -1)).amax(dim=1)


def last_prompt_hidden(hidden: torch.Tensor, attention_mask: torch.Tensor,
                       response_length: int, *, packed: bool) -> torch.Tensor:
    """``(bs, H)`` hidden state at each row's last prompt token (float32, detached).

    ``hidden``: padded ``(bs, seqlen, H)``, or packed ``(1, nnz, H)`` / ``(nnz, H)`` where
    ``nnz = attention_mask.sum()`` and tokens follow ``attention_mask.flatten()`` order.
    ``attention_mask``: ``(bs, seqlen)``. Shapes that do not match raise ``ValueError``.
    """
    import torch

    bs, seqlen = attention_mask.shape
    col = last_prompt_index(attention_mask, response_length)
    if not packed:
        if hidden.ndim != 3 or tuple(hidden.shape[:2]) != (bs, seqlen):
            raise ValueError(f"padded hidden states {tuple(hidden.shape)} do not match the "
                             f"inputs ({bs}, {seqlen})")
        rows = torch.arange(bs, device=hidden.device)
        return hidden[rows, col.to(hidden.device)].detach().float()
    flat_hidden = hidden[0] if hidden.ndim == 3 else hidden
    mask = attention_mask.reshape(-1).to(torch.bool)
    nnz = int(mask.sum())
    if flat_hidden.ndim != 2 or flat_hidden.shape[0] != nnz:
        raise ValueError(f"packed hidden states {tuple(hidden.shape)} do not match the "
                         f"{nnz} unpadded tokens")
    # position of token (row, col) among the kept tokens = number of kept tokens before it
    before = torch.cumsum(mask.to(torch.int64), dim=0) - 1
    flat = torch.arange(bs, device=attention_mask.device) * seqlen + col
    pos = before[flat]
    return flat_hidden[pos.to(flat_hidden.device)].detach().float()


def row_keys(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[bytes]:
    """A digest per row of ``input_ids`` / ``attention_mask`` (both ``(bs, seqlen)``)."""
    ids = input_ids.detach().to("cpu").contiguous().numpy()
    mask = attention_mask.detach().to("cpu").contiguous().numpy()
    out = []
    for i in range(ids.shape[0]):
        h = hashlib.blake2b(ids[i].tobytes(), digest_size=16)
        h.update(mask[i].tobytes())
        out.append(h.digest())
    return out


class FeatureCapture:
    """Collects features of micro-batches and returns them in a batch's row order."""

    def __init__(self) -> None:
        self.active = False
        self._by_key: dict[bytes, Any] = {}

    def start(self) -> None:
        """Begin collecting (drops anything held)."""
        self._by_key = {}
        self.active = True

    def stop(self) -> None:
        """Stop collecting and drop what is held."""
        self.active = False
        self._by_key = {}

    def add(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            features: torch.Tensor) -> None:
        """File ``features`` ``(bs, H)`` of the micro-batch ``input_ids`` ``(bs, seqlen)``."""
        import torch

        feats = features.detach().to("cpu", dtype=torch.float32)
        for key, row in zip(row_keys(input_ids, attention_mask), feats, strict=True):
            self._by_key.setdefault(key, row)

    def collect(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``(bs, H)`` features of the batch rows, in order; ``KeyError`` if one is missing."""
        import torch

        keys = row_keys(input_ids, attention_mask)
        missing = [i for i, k in enumerate(keys) if k not in self._by_key]
        if missing:
            raise KeyError(f"no captured feature for {len(missing)} of {len(keys)} rows "
                           f"(first row {missing[0]}): the reference pass did not see them")
        return torch.stack([self._by_key[k] for k in keys])


CAPTURE = FeatureCapture()
"""The capture of this worker process."""


def find_final_norm(model: Any) -> Any:
    """The final norm module of a (possibly FSDP-wrapped) HF causal LM.

    The module whose name, with wrapper prefixes removed, is ``model.norm`` (Qwen2, Llama,
    Mistral...) or, failing that, ``norm`` / ``*.final_layernorm``. Raises ``LookupError``.
    """
    wanted = ("model.norm", "norm", "model.final_layernorm", "transformer.ln_f")
    found: dict[str, Any] = {}
    for name, mod in model.named_modules():
        clean = ".".join(p for p in name.split(".")
                         if p not in ("_fsdp_wrapped_module", "_checkpoint_wrapped_module",
                                      "module", "_orig_mod"))
        if clean in wanted and clean not in found:
            found[clean] = mod
    for w in wanted:
        if w in found:
            return found[w]
    raise LookupError("no final norm module (model.norm) found in the reference model")


def forward_capturing(model: Any, run: Any) -> tuple[Any, torch.Tensor]:
    """Call ``run()`` with a forward hook on ``model``'s final norm; return (result, hidden).

    ``hidden`` is the norm's output: ``(bs, seqlen, H)`` or packed ``(1, nnz, H)``.
    """
    norm = find_final_norm(model)
    box: list[Any] = []

    def hook(_mod: Any, _inp: Any, out: Any) -> None:
        box.append(out[0] if isinstance(out, tuple) else out)

    handle = norm.register_forward_hook(hook)
    try:
        result = run()
    finally:
        handle.remove()
    if not box:
        raise RuntimeError("the final norm did not run during the reference forward")
    return result, box[-1]
