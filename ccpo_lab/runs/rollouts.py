"""Step-1 rollouts and their fingerprint: the evidence that arms are comparable.

Every arm of a seed must produce identical step-1 rollouts, since nothing an arm changes
acts before the first gradient step. A backend writes them with :func:`write_rollouts`;
``ccpo-lab verify`` compares fingerprints and, on a difference, finds the first diverging
episode and turn with :func:`first_divergence`.

An episode is a dict::

    {"task_id": str, "rollout": int, "task_type": str,
     "turns": [{"obs": str, "admissible": [str], "action": str, "input_hash": str}, ...]}

(backends may add keys; every key takes part in the fingerprint).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccpo_lab.config.identity import canonical_json
from ccpo_lab.config.yamlio import atomic_write_text
from ccpo_lab.runs.files import Cut, open_file, read_lines

STEP1 = 1


def rollout_file(rollouts_dir: str | Path, step: int = STEP1) -> Path:
    """``<rollouts_dir>/step-000001.jsonl``."""
    return Path(rollouts_dir) / f"step-{step:06d}.jsonl"


def _sorted(episodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(episodes, key=lambda e: (str(e["task_id"]), int(e["rollout"])))


def fingerprint(episodes: Sequence[Mapping[str, Any]]) -> str:
    """sha256 (hex) over the canonical JSON of the episodes sorted by (task_id, rollout)."""
    h = hashlib.sha256()
    for ep in _sorted(episodes):
        h.update(canonical_json(dict(ep)).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def hash_tokens(token_ids: Sequence[int]) -> str:
    """Short sha256 of a sequence of token ids (the policy's input of one turn)."""
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]


def write_rollouts(rollouts_dir: str | Path, episodes: Sequence[Mapping[str, Any]],
                   step: int = STEP1) -> str:
    """Write the episodes (sorted, one per line, atomically); return their fingerprint."""
    lines = "".join(canonical_json(dict(ep)) + "\n" for ep in _sorted(episodes))
    atomic_write_text(rollout_file(rollouts_dir, step), lines)
    return fingerprint(episodes)


def read_rollouts(rollouts_dir: str | Path, step: int = STEP1,
                  root: str | Path | None = None) -> list[dict[str, Any]]:
    """Episodes of a rollout file, in file order ([] when absent), read through the
    run-file gateway (:mod:`ccpo_lab.runs.files`) inside ``root`` (default: its run
    directory).

    Raises:
        RunFileError: a file the gateway does not read (a link out of the sweep).
        ValueError: a line that is not a JSON episode, or longer than the line bound
            (the file and line named).
    """
    p = rollout_file(rollouts_dir, step)
    try:
        f = open_file(p, root if root is not None else Path(rollouts_dir).parent)
    except FileNotFoundError:
        return []
    out = []
    with f:
        for i, raw in enumerate(read_lines(f), 1):
            if isinstance(raw, Cut):
                if raw.long or raw.head.strip():
                    raise ValueError(f"{p}: line {i}: {raw.why()}")
                continue
            if not raw.strip():
                continue
            try:
                ep = json.loads(raw)
            except ValueError:
                raise ValueError(f"{p}: line {i} is not a JSON episode") from None
            if not isinstance(ep, dict):
                raise ValueError(f"{p}: line {i} is not a JSON episode")
            out.append(ep)
    return out


@dataclass(frozen=True)
class Divergence:
    """Where two rollout sets first differ."""

    episode: int
    """Index of the episode in (task_id, rollout) order."""
    task_id: str | None
    """Its task (of the first set)."""
    rollout: int | None
    """Its rollout index."""
    turn: int | None
    """First differing turn (None when the episodes differ outside their turns)."""
    a: Any
    """The first set's value (a turn dict, an episode, or None when missing)."""
    b: Any
    """The second set's value."""


def first_divergence(a: Sequence[Mapping[str, Any]],
                     b: Sequence[Mapping[str, Any]]) -> Divergence | None:
    """The first episode and turn where ``a`` and ``b`` differ, or None if identical."""
    sa, sb = _sorted(a), _sorted(b)
    for i in range(max(len(sa), len(sb))):
        ea = sa[i] if i < len(sa) else None
        eb = sb[i] if i < len(sb) else None
        if ea is None or eb is None:
            src = ea or eb
            assert src is not None
            return Divergence(i, str(src["task_id"]), int(src["rollout"]), None, ea, eb)
        if canonical_json(dict(ea)) == canonical_json(dict(eb)):
            continue
        ta, tb = list(ea.get("turns", [])), list(eb.get("turns", []))
        for t in range(max(len(ta), len(tb))):
            xa = ta[t] if t < len(ta) else None
            xb = tb[t] if t < len(tb) else None
            if xa != xb:
                return Divergence(i, str(ea["task_id"]), int(ea["rollout"]), t, xa, xb)
        return Divergence(i, str(ea["task_id"]), int(ea["rollout"]), None, ea, eb)
    return None
