"""A tiny causal LM for rehearsals, built on the spot, with a tokenizer that needs no download.

``ccpo-lab rehearse`` runs verl-agent's real trainer on the sweep's configuration in
minutes; the 7B model it will train is replaced by this one, built from the sweep model's
architecture (:func:`tiny_config`: its ``config.json`` shrunk when ``model_path`` is a local
folder; a Qwen2 otherwise) and saved with ``save_pretrained``, so verl-agent loads it like
any Hugging Face model.

A randomly initialised model never writes verl-agent's ``<think>..</think><action>..
</action>`` format, so every turn would be an invalid action, every advantage 0 and the
estimators would run on nothing. The model is therefore first fitted, for a few seconds,
to the planner expert's solutions of the rehearsal's training games, rendered with
verl-agent's own ALFWorld prompt templates (:func:`demonstrations`), and to a share
(:data:`MALFORMED_SHARE`) of answers that break the format, so that sampling at the
training temperature gives valid and invalid actions and some successful episodes: the
stand-in for the prior a pretrained instruct model brings, as the local backend's warm
start is. The fit's outcome (loss, share of sampled answers in the format, share naming
the expert's action) is written to ``ccpo-lab-tiny.json`` beside the weights.

Run in the trainer environment (torch, transformers, tokenizers, alfworld and the
verl-agent checkout, for its prompt templates)::

    python -m ccpo_lab.backends.verl.tiny_model OUT_DIR --games GAMES --verl-agent CHECKOUT \\
        [--base-config CONFIG_JSON] [--history-length N] [--seed S] [--steps N]

On Sokoban, ``--sokoban ROOMS_JSON`` (settings and room seeds) replaces ``--games``: the
expert is the shortest solution of each room the rehearsal will deal
(:mod:`.tiny_sokoban`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
"""Pad, chat-turn start, end of turn (EOS) and unknown-word tokens."""
TAGS = ("<think>", "</think>", "<action>", "</action>")
"""verl-agent's answer format (``alfworld_projection``), one token each."""
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                 "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                 "{% endif %}")
"""A Qwen-style chat template (what ``apply_chat_template`` renders in verl-agent)."""
MALFORMED_SHARE = 0.2
"""Share of fitted answers that break the format (the action without the ``<think>`` block,
which verl-agent's projection marks invalid): sampled answers are then a mix of valid and
invalid actions, decided by the first token, so the invalid-action penalty is exercised."""
THOUGHT = "i act ."
"""The reasoning text of every fitted answer."""
INFO_FILE = "ccpo-lab-tiny.json"
"""What the build did, beside the weights."""
_WORD = re.compile(r"<\|?/?[a-z_]+\|?>|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


@dataclass(frozen=True)
class TinySpec:
    """What a tiny model is built from (every field goes into :func:`spec_key`)."""

    seed: int = 0
    """Seed of the initial weights and of the fit's order."""
    hidden_size: int = 64
    """Width of the model."""
    num_layers: int = 2
    """Transformer blocks."""
    steps: int = 400
    """Optimizer steps of the fit (batch :attr:`batch`)."""
    batch: int = 16
    """Answers per optimizer step."""
    lr: float = 3e-3
    """Adam learning rate of the fit."""
    history_length: int = 2
    """Previous turns shown in the prompt (the protocol's ``history_length``)."""


def words(text: str) -> list[str]:
    """The tokenizer's words of ``text`` (lower-cased): tags, words, numbers, punctuation."""
    return _WORD.findall(text.lower())


def render_prompt(templates: Any, task: str, obs: str, admissible: list[str],
                  history: list[tuple[str, str]], history_length: int) -> str:
    """verl-agent's ALFWorld observation text (``AlfWorldEnvironmentManager.build_text_obs``
    at the pinned commit) for one turn; ``history``: (observation, action) of earlier turns."""
    acts = "\n ".join(f"'{s}'" for s in admissible if s != "help")
    if not history or history_length <= 0:
        return str(templates.ALFWORLD_TEMPLATE_NO_HIS.format(current_observation=obs,
                                                             admissible_actions=acts))
    recent = history[-history_length:]
    start = len(history) - len(recent)
    lines = [f"[Observation {start + j + 1}: '{o}', Action {start + j + 1}: '{a}']"
             for j, (o, a) in enumerate(recent)]
    return str(templates.ALFWORLD_TEMPLATE.format(
        task_description=task, step_count=len(history), history_length=len(recent),
        action_history="\n".join(lines), current_step=len(history) + 1,
        current_observation=obs, admissible_actions=acts))


def answer(action: str, malformed: bool = False) -> str:
    """A fitted answer: the format with ``action``, or (``malformed``) without the
    ``<think>`` block."""
    if malformed:
        return f"<action> {action} </action>"
    return f"<think> {THOUGHT} </think> <action> {action} </action>"


def prompt_templates(checkout: Path) -> Any:
    """verl-agent's ALFWorld prompt templates module, from ``checkout``."""
    import importlib

    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    return importlib.import_module("agent_system.environments.prompts.alfworld")


def demonstrations(games_root: Path, checkout: Path, history_length: int
                   ) -> list[tuple[str, str]]:
    """(prompt text, expert action) of every expert turn of the training games, played on
    the real engine (:func:`ccpo_lab.backends.local.env.open_engine`)."""
    from ccpo_lab.backends.local.env import keep_argv, open_engine
    from ccpo_lab.backends.local.games import load_game_set

    templates = prompt_templates(checkout)
    out: list[tuple[str, str]] = []
    for game in load_game_set(games_root).train:
        env = open_engine(str(game.gamefile), max_steps=len(game.expert_plan) + 1)
        with keep_argv():
            state = env.reset()
        obs, adm = state.feedback, list(state["admissible_commands"])
        task = obs[obs.find("Your task is to: ") + len("Your task is to: "):].strip() \
            if "Your task is to: " in obs else game.goal
        history: list[tuple[str, str]] = []
        for action in game.expert_plan:
            out.append((render_prompt(templates, task, obs, adm, history, history_length),
                        action))
            with keep_argv():
                state, _, done = env.step(action)
            history.append((obs, action))
            obs, adm = state.feedback, list(state["admissible_commands"])
            if done or state["won"]:
                break
        env.close()
    if not out:
        raise ValueError(f"{games_root}: no training game with an expert plan")
    return out


def build_tokenizer(texts: list[str]) -> Any:
    """A word-level tokenizer over the words of ``texts`` (plus digits 0-99), the tags as
    single tokens, special tokens and the chat template; nothing downloaded."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for w in (*SPECIAL, *TAGS, *(str(i) for i in range(100)),
              *sorted({w for t in texts for w in words(t)})):
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.add_tokens([AddedToken(t, normalized=False) for t in TAGS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>",
                                   unk_token="<unk>", eos_token="<|im_end|>",
                                   bos_token=None, padding_side="left",
                                   additional_special_tokens=["<|im_start|>"],
                                   model_input_names=["input_ids", "attention_mask"])
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 1 << 20
    return fast


def tiny_config(base_config: Path | None, vocab_size: int, tok: Any, spec: TinySpec,
                max_positions: int) -> Any:
    """The model config: ``base_config`` (a ``config.json``) with its sizes shrunk, else a
    Qwen2 of the same shape; the architecture (model type, attention, activation, norms,
    rotary settings) is the base's."""
    from transformers import AutoConfig, Qwen2Config

    heads, kv = 4, 2
    sizes = {"hidden_size": spec.hidden_size, "intermediate_size": 2 * spec.hidden_size,
             "num_hidden_layers": spec.num_layers, "num_attention_heads": heads,
             "num_key_value_heads": kv, "head_dim": spec.hidden_size // heads,
             "vocab_size": vocab_size, "max_position_embeddings": max_positions,
             "max_window_layers": spec.num_layers, "tie_word_embeddings": False,
             "use_sliding_window": False, "torch_dtype": "float32",
             "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id,
             "bos_token_id": tok.eos_token_id}
    if base_config is not None:
        cfg = AutoConfig.from_pretrained(str(base_config.parent))
        for k, v in sizes.items():
            setattr(cfg, k, v)
        for k in ("rope_scaling", "quantization_config", "layer_types"):
            if hasattr(cfg, k):
                setattr(cfg, k, None)
        return cfg
    return Qwen2Config(**sizes)


def _fit(model: Any, tok: Any, demos: list[tuple[str, str]], spec: TinySpec,
         ) -> dict[str, float]:
    """Fit ``model`` to the answers of ``demos`` (loss on the answer tokens only)."""
    import torch

    g = torch.Generator().manual_seed(spec.seed)
    rows = []
    for i, (prompt, action) in enumerate(demos):
        chat = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                       add_generation_prompt=True, tokenize=False)
        p = tok(chat, add_special_tokens=False)["input_ids"]
        for malformed in (False, True):
            a = tok(answer(action, malformed), add_special_tokens=False)["input_ids"]
            rows.append((p, [*a, tok.eos_token_id], malformed, i))
    weights = torch.tensor([MALFORMED_SHARE if m else 1 - MALFORMED_SHARE
                            for _, _, m, _ in rows])
    opt = torch.optim.Adam(model.parameters(), lr=spec.lr)
    model.train()
    losses = []
    for _ in range(spec.steps):
        idx = torch.multinomial(weights, spec.batch, replacement=True, generator=g)
        batch = [rows[int(j)] for j in idx]
        width = max(len(p) + len(a) for p, a, _, _ in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        labels = torch.full((len(batch), width), -100)
        for r, (p, a, _, _) in enumerate(batch):
            seq = [*p, *a]
            ids[r, width - len(seq):] = torch.tensor(seq)
            mask[r, width - len(seq):] = 1
            labels[r, width - len(a):] = torch.tensor(a)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        loss = model(input_ids=ids, attention_mask=mask, position_ids=pos, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return {"first_loss": losses[0], "last_loss": sum(losses[-20:]) / len(losses[-20:])}


def sample_check(model: Any, tok: Any, demos: list[tuple[str, str]], n: int, seed: int,
                 temperature: float = 1.0, max_new_tokens: int = 24) -> dict[str, float]:
    """Sample one answer for ``n`` demonstration prompts: the share in verl-agent's format
    and the share whose action is the expert's (the fit's outcome, recorded)."""
    import torch

    torch.manual_seed(seed)
    valid = expert = 0
    for prompt, action in demos[:n]:
        chat = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                       add_generation_prompt=True, tokenize=False)
        enc = tok(chat, return_tensors="pt", add_special_tokens=False,
                  return_token_type_ids=False)
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, temperature=temperature,
                                 max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=tok.eos_token_id)
        text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        ok = all(t in text for t in TAGS)   # verl-agent's alfworld_projection
        valid += ok
        got = text.split("<action>")[-1].split("</action>")[0].strip() if ok else ""
        expert += ok and " ".join(words(got)) == " ".join(words(action))
    m = max(min(n, len(demos)), 1)
    return {"sampled": float(m), "format_share": valid / m, "expert_action_share": expert / m}


def demos_and_texts(games_root: Path | None, checkout: Path, history_length: int,
                    sokoban: dict[str, Any] | None) -> tuple[list[tuple[str, str]], list[str]]:
    """The demonstrations and the tokenizer's texts: ALFWorld's games (``games_root``), or
    Sokoban's rooms (``sokoban``: settings and ``room_seeds``, :mod:`.tiny_sokoban`)."""
    if sokoban is not None:
        from ccpo_lab.backends.verl import tiny_sokoban

        demos = tiny_sokoban.demonstrations(checkout, history_length, sokoban,
                                            sokoban["room_seeds"])
        extra = tiny_sokoban.template_texts(checkout)
    else:
        if games_root is None:
            raise ValueError("ALFWorld's tiny model needs --games")
        demos = demonstrations(games_root, checkout, history_length)
        templates = prompt_templates(checkout)
        extra = [templates.ALFWORLD_TEMPLATE, templates.ALFWORLD_TEMPLATE_NO_HIS]
    return demos, [p for p, _ in demos] + [answer(a) for _, a in demos] + extra


def build(out: Path, games_root: Path | None, checkout: Path, *,
          base_config: Path | None = None, spec: TinySpec | None = None,
          sokoban: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build, fit and save the tiny model and its tokenizer in ``out``; returns the info
    written to :data:`INFO_FILE`."""
    import torch
    from transformers import AutoModelForCausalLM

    spec = spec or TinySpec()
    t0 = time.monotonic()
    demos, texts = demos_and_texts(games_root, checkout, spec.history_length, sokoban)
    tok = build_tokenizer(texts)
    longest = max(len(tok(p)["input_ids"]) for p, _ in demos)
    torch.manual_seed(spec.seed)
    cfg = tiny_config(base_config, len(tok), tok, spec, max_positions=4096)
    model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    t1 = time.monotonic()
    fit = {**_fit(model, tok, demos, spec), "seconds": round(time.monotonic() - t1, 1)}
    check = sample_check(model, tok, demos, n=min(32, len(demos)), seed=spec.seed)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"spec": asdict(spec), "architecture": cfg.architectures or [type(model).__name__],
            "model_type": cfg.model_type,
            "base_config": str(base_config) if base_config else None,
            "parameters": sum(p.numel() for p in model.parameters()),
            "vocab_size": len(tok), "demonstrations": len(demos),
            "longest_prompt_tokens": longest, "fit": fit, "sample_check": check,
            "seconds": round(time.monotonic() - t0, 1)}
    (out / INFO_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return info


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.backends.verl.tiny_model")
    ap.add_argument("out", type=Path)
    ap.add_argument("--games", type=Path, default=None)
    ap.add_argument("--sokoban", type=Path, default=None,
                    help="JSON file: Sokoban settings and room_seeds (instead of --games)")
    ap.add_argument("--verl-agent", type=Path, required=True)
    ap.add_argument("--base-config", type=Path, default=None)
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=TinySpec.steps)
    ns = ap.parse_args(argv)
    spec = TinySpec(seed=ns.seed, steps=ns.steps, history_length=ns.history_length)
    sokoban = json.loads(ns.sokoban.read_text(encoding="utf-8")) if ns.sokoban else None
    info = build(ns.out, ns.games, ns.verl_agent, base_config=ns.base_config, spec=spec,
                 sokoban=sokoban)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
