"""Prompts shaped like verl-agent's ALFWorld prompt, and the policy's word tokenizer.

The policy reads the same information a language model reads in verl-agent: the task, the
most recent ``history_length`` observations with the actions taken after them, the current
observation and the admissible actions (``help`` removed, as verl-agent does). The
instruction text about ``<think>``/``<action>`` tags is left out: a scorer over admissible
actions emits no text.

Tokens are lower-cased words, numbers and the separators ``| ; [ ]``, mapped to ids by a stable hash
(crc32) into ``vocab_size - 1`` buckets (0 is padding), so held-out games with unseen words
need no vocabulary file. Tokenisation is cached per string (observations and actions repeat).
"""

from __future__ import annotations

import functools
import importlib
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ccpo_lab.runs.rollouts import hash_tokens
from ccpo_lab.runs.tasks import TASK_TYPES

PAD = 0
SEG_TASK, SEG_HISTORY, SEG_OBS, SEG_ACTIONS = 1, 2, 3, 4
"""Segment ids of prompt tokens (0 is padding): task line, history, current observation,
admissible-action list."""
BANNER = "-= Welcome to TextWorld, ALFRED! =-"
HIDDEN_ACTIONS = frozenset({"help"})
"""Admissible commands verl-agent does not show the agent."""
TASK_METRIC_NAMES: dict[str, str] = {t.id: t.metric_name for t in TASK_TYPES}
"""ALFWorld task type -> the name verl-agent logs (``val/<name>_success_rate``), from the
task-type table (:mod:`ccpo_lab.runs.tasks`)."""

_WORD = re.compile(r"[a-z]+|[0-9]+|[|;\[\]]")


def clean_observation(text: str) -> str:
    """The observation without TextWorld's welcome banner, whitespace collapsed."""
    return " ".join(text.replace(BANNER, " ").split())


def choices(admissible: Sequence[str]) -> tuple[str, ...]:
    """The actions the agent chooses from: admissible commands minus ``help``."""
    return tuple(a for a in admissible if a not in HIDDEN_ACTIONS)


@dataclass(frozen=True)
class Turn:
    """A past turn shown in the prompt's history."""

    observation: str
    """What the agent saw before acting."""
    action: str
    """What it did."""


def render_segments(task: str, observation: str, actions: Sequence[str],
                    history: Sequence[Turn], step: int, history_length: int
                    ) -> tuple[tuple[int, str], ...]:
    """The prompt of one turn as ``(segment id, text)`` parts, in reading order.

    verl-agent's ``ALFWORLD_TEMPLATE`` content in its order (task and steps taken, the last
    ``history_length`` observation/action pairs, current observation, admissible actions),
    with its constant sentences cut to one keyword each: a 2k-token template would only slow
    a model that reads every token. ``step`` is the number of turns already taken;
    ``history`` holds them all.
    """
    shown = list(history)[-history_length:] if history_length > 0 else []
    parts: list[tuple[int, str]] = [(SEG_TASK, f"task: {task}. step {step + 1}.")]
    if shown:
        past = " ".join(f"observation {step - len(shown) + i + 1}: "
                        f"{clean_observation(t.observation)} action {step - len(shown) + i + 1}:"
                        f" {t.action} ;" for i, t in enumerate(shown))
        parts.append((SEG_HISTORY, f"history: {past}"))
    parts.append((SEG_OBS, f"now: {clean_observation(observation)}"))
    parts.append((SEG_ACTIONS, f"admissible actions: [ {' | '.join(actions)} ]"))
    return tuple(parts)


@dataclass(frozen=True)
class PromptTokens:
    """The policy's input for one turn: token ids and their segment ids, same length."""

    ids: tuple[int, ...]
    segments: tuple[int, ...]

    def hash(self) -> str:
        """Short hash of ids and segments (the step-1 evidence's ``input_hash``)."""
        return hash_tokens(self.ids + (-1,) + self.segments)


def encode_prompt(parts: Sequence[tuple[int, str]], vocab_size: int, max_len: int
                  ) -> PromptTokens:
    """Tokenise segments; keep the last ``max_len`` tokens (verl truncates on the left)."""
    ids: list[int] = []
    segs: list[int] = []
    for seg, text in parts:
        toks = tokenize(text, vocab_size)
        ids.extend(toks)
        segs.extend([seg] * len(toks))
    return PromptTokens(tuple(ids[-max_len:]), tuple(segs[-max_len:]))


N_REPEAT = 2
"""Per-action repeat flags: the action equals the one taken 1, 2 turns ago (if shown)."""


@dataclass(frozen=True)
class PromptSettings:
    """How turns are rendered and tokenised."""

    history_length: int
    """Past turns shown."""
    max_prompt_length: int
    """Prompt tokens kept (the last ones)."""
    vocab_size: int
    """Tokenizer buckets."""
    view: str = field(default="", repr=False)
    """The environment's prompt renderer, ``"module:function"`` with the signature of
    :func:`render_segments` ("": :func:`render_segments`, ALFWorld's)."""


@dataclass(frozen=True)
class TurnInput:
    """Everything the policy reads in one turn."""

    prompt: PromptTokens
    """The prompt's tokens."""
    actions: tuple[tuple[int, ...], ...]
    """Token ids of each candidate action."""
    repeats: tuple[tuple[float, ...], ...]
    """Per candidate, ``N_REPEAT`` flags: equal to the action taken r turns ago (r = 1, 2),
    counted only for turns the prompt's history shows."""

    def hash(self) -> str:
        """Short hash of the prompt tokens (the step-1 evidence's ``input_hash``)."""
        return self.prompt.hash()


def turn_input(task: str, observation: str, candidates: Sequence[str],
               history: Sequence[Turn], settings: PromptSettings) -> TurnInput:
    """The policy's input for a turn after ``history`` (all turns taken so far)."""
    render = render_segments if not settings.view else _renderer(settings.view)
    parts = render(task, observation, candidates, history, len(history),
                   settings.history_length)
    shown = min(settings.history_length, len(history))
    repeats = tuple(tuple(float(r <= shown and history[-r].action == a)
                          for r in range(1, N_REPEAT + 1)) for a in candidates)
    return TurnInput(encode_prompt(parts, settings.vocab_size, settings.max_prompt_length),
                     tuple(tokenize(a, settings.vocab_size) for a in candidates), repeats)


Renderer = Callable[[str, str, Sequence[str], Sequence[Turn], int, int],
                    tuple[tuple[int, str], ...]]


@functools.cache
def _renderer(target: str) -> Renderer:
    """The function ``"module:function"`` names (an environment's prompt renderer)."""
    module, _, name = target.partition(":")
    found: Renderer = getattr(importlib.import_module(module), name)
    return found


@functools.lru_cache(maxsize=65536)
def _word_ids(word: str, vocab_size: int) -> int:
    return zlib.crc32(word.encode("utf-8")) % (vocab_size - 1) + 1


@functools.lru_cache(maxsize=65536)
def tokenize(text: str, vocab_size: int) -> tuple[int, ...]:
    """Token ids of ``text``: words, numbers and ``| ; [ ]`` hashed into ``1..vocab_size-1``.

    Other punctuation is dropped (it carries nothing the words do not)."""
    return tuple(_word_ids(w, vocab_size) for w in _WORD.findall(text.lower()))
