"""What one checkpoint evaluation is, and the request that selects them.

An evaluation (:class:`EvalTarget`) is one checkpoint (its training step) scored on one
:class:`EvalSetting` (split, games, repeats, temperature) and one draw: the backend's
description of which games are played in which order and how their sampling seeds are
derived (:mod:`ccpo_lab.backends.eval_contract`), which does not depend on the arm or the
seed. Its key names its file (``evals/<key>.jsonl``): a finished evaluation is never
redone, and a changed setting gets its own file.

The request (:class:`EvalRequest`) is the command line's selectors, checked here:
checkpoint ``final | best | STEP | all``, split ``in | out | both``, ``--episodes``,
``--repeats``, ``--temperature``, ``--arm``, ``--seed``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccpo_lab.errors import UserError

SPLITS = ("in", "out")
"""``in``: held-out games of the training distribution (ALFWorld's
``eval_in_distribution``); ``out``: games out of it (``eval_out_of_distribution``)."""
SPLIT_CHOICES = ("in", "out", "both")
CHECKPOINT_CHOICES = ("final", "best", "all")
"""Named checkpoints; an integer selects the checkpoint of that training step."""
MAX_REPEATS = 1000
"""Most repeats per game."""
MAX_TEMPERATURE = 100.0
"""Largest sampling temperature (0: greedy)."""


@dataclass(frozen=True)
class EvalSetting:
    """How a checkpoint is scored: split, games, repeats, temperature."""

    split: str
    """``in`` or ``out``."""
    episodes: int
    """Games of the draw (each played ``repeats`` times)."""
    repeats: int
    """Episodes per game, each with its own sampling seed."""
    temperature: float
    """Sampling temperature (the protocol's ``val_temperature`` by default)."""


def canonical(value: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces): what ids are hashed from."""
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class EvalTarget:
    """One evaluation: a checkpoint (training step) on a setting and a draw."""

    step: int
    """The checkpoint's training step."""
    setting: EvalSetting
    """Split, games, repeats, temperature."""
    draw: Mapping[str, Any] = field(hash=False)
    """The backend's draw description (JSON; the same for every arm and seed)."""

    @property
    def draw_id(self) -> str:
        """Hex digest of the draw description (12 characters)."""
        return hashlib.sha256(canonical(dict(self.draw)).encode()).hexdigest()[:12]

    @property
    def key(self) -> str:
        """``<split>-step<step>-n<games>-r<repeats>-t<temperature>-<draw id>``: the file name
        (temperature as ``repr``, so two temperatures never share a key)."""
        s = self.setting
        return (f"{s.split}-step{self.step:06d}-n{s.episodes}-r{s.repeats}-"
                f"t{float(s.temperature)!r}-{self.draw_id[:8]}")


@dataclass(frozen=True)
class EvalRequest:
    """The selectors of one ``ccpo-lab evaluate`` call (checked by :func:`parse_request`)."""

    checkpoint: str | int
    """``final``, ``best``, ``all`` or a step."""
    splits: tuple[str, ...]
    """Of :data:`SPLITS`."""
    episodes: int | None
    """Games per evaluation (None: the backend's default for the run)."""
    repeats: int
    """Episodes per game."""
    temperature: float | None
    """Sampling temperature (None: the run's ``protocol.val_temperature``)."""
    arm: str | None = None
    """Only this arm's runs."""
    seed: int | None = None
    """Only this seed's runs."""


def parse_request(checkpoint: str, split: str, episodes: int | None, repeats: int,
                  temperature: float | None, arm: str | None = None,
                  seed: int | None = None) -> EvalRequest:
    """The request, checked: :class:`UserError` naming the option and value otherwise."""
    cp: str | int
    text = str(checkpoint).strip()
    if text in CHECKPOINT_CHOICES:
        cp = text
    elif text.isdigit():
        cp = int(text)
    else:
        raise UserError("not a checkpoint", key="--checkpoint", value=checkpoint,
                        valid="final, best, all or a training step (an integer >= 0)")
    if split not in SPLIT_CHOICES:
        raise UserError("unknown split", key="--split", value=split, valid=SPLIT_CHOICES)
    if episodes is not None and (isinstance(episodes, bool) or episodes < 1):
        raise UserError("must be an integer >= 1 (games per evaluation)", key="--episodes",
                        value=episodes)
    if not 1 <= repeats <= MAX_REPEATS:
        raise UserError(f"must be an integer in 1..{MAX_REPEATS}", key="--repeats",
                        value=repeats)
    if temperature is not None and not 0.0 <= float(temperature) <= MAX_TEMPERATURE:
        raise UserError(f"must be in [0, {MAX_TEMPERATURE:g}] (0: greedy)",
                        key="--temperature", value=temperature)
    if seed is not None and seed < 0:
        raise UserError("must be an integer >= 0", key="--seed", value=seed)
    splits = SPLITS if split == "both" else (split,)
    return EvalRequest(cp, splits, episodes, repeats,
                       None if temperature is None else float(temperature), arm, seed)


def target_json(t: EvalTarget) -> dict[str, Any]:
    """A target as JSON (what :func:`target_from_json` reads back)."""
    s = t.setting
    return {"key": t.key, "step": t.step, "split": s.split, "episodes": s.episodes,
            "repeats": s.repeats, "temperature": s.temperature, "draw": dict(t.draw),
            "draw_id": t.draw_id}


def target_from_json(d: dict[str, Any]) -> EvalTarget:
    """Inverse of :func:`target_json`; ``ValueError`` when the key no longer matches."""
    t = EvalTarget(int(d["step"]), EvalSetting(str(d["split"]), int(d["episodes"]),
                                               int(d["repeats"]), float(d["temperature"])),
                   dict(d["draw"]))
    if t.key != d.get("key"):
        raise ValueError(f"request key {d.get('key')} does not match its target ({t.key})")
    return t
