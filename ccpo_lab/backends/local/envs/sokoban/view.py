"""What the small policy reads of a Sokoban turn (the environment's prompt renderer).

A language model reads verl-agent's prompt: the symbol grid, the history, the four
actions. The CPU backend's policy embeds hashed words and pools them per segment, so a
grid of symbols (which its tokenizer drops) tells it nothing. It reads the same room as
words instead, from the player's point of view, computed from the grid text alone:

- per direction, what the move would do, one step ahead (``walknearer up ;``: nearer to
  the nearest box; ``pushfarther left ;``: the box away from the nearest free target;
  ``pushontarget``, ``pushcorner``, ``blockedwall``...; see :func:`_lookahead`);
- per box not on a target, where it is from the player (``box up 1 left 2 ;``) and where
  the nearest free target is from it (``goal down 1 none 0 ;``);
- the last ``history_length`` actions, the task and the step count.

It is a pure function of the observation text and the history, so it is the same for
every rollout of a group in the same state (the estimators' step anchors are the grid
text itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ccpo_lab.backends.local.prompts import SEG_ACTIONS, SEG_HISTORY, SEG_OBS, SEG_TASK

if TYPE_CHECKING:
    from ccpo_lab.backends.local.prompts import Turn

WORDS = {"#": "wall", "_": "floor", "O": "target", "X": "box", "√": "placed", "P": "floor",
         "S": "target"}
"""Symbol -> the word the policy reads (the player's own cell reads as what is under it)."""
DIRECTIONS = (("up", -1, 0), ("down", 1, 0), ("left", 0, -1), ("right", 0, 1))


def parse_grid(observation: str) -> list[list[str]]:
    """The symbols of a text room, row by row."""
    return [line.split() for line in observation.strip("\n").split("\n") if line.strip()]


def _offset(d: int, neg: str, pos: str) -> str:
    return f"{neg if d < 0 else pos if d > 0 else 'none'} {abs(d)}"


def _lookahead(cells: dict[tuple[int, int], str], player: tuple[int, int], dr: int, dc: int,
               free: list[tuple[int, int]]) -> str:
    """What moving ``(dr, dc)`` would do, as one word (the word before the direction is
    all a width-2 convolution sees with it): ``blockedwall``, ``blockedbox``,
    ``walknearer`` (``walkfarther``, ``walklevel``: the player's distance to the nearest
    box off target), ``pushnearer`` (``pushfarther``, ``pushlevel``: the box's distance to
    the nearest free target), ``pushontarget``, ``pushoff`` (a box off its target),
    ``pushcorner`` (a box into a corner no move brings it out of)."""
    pr, pc = player
    ahead = (pr + dr, pc + dc)
    beyond = (pr + 2 * dr, pc + 2 * dc)
    a = cells.get(ahead, "#")
    boxes = [p for p, s in cells.items() if s == "X"]
    if a == "#":
        return "blockedwall"
    if a in ("X", "√"):
        if cells.get(beyond, "#") in ("#", "X", "√"):
            return "blockedbox"
        if cells[beyond] in ("O",):
            return "pushontarget"
        if _corner(cells, beyond):
            return "pushcorner"
        if a == "√":
            return "pushoff"
        before, after = _dist(ahead, free), _dist(beyond, free)
        return f"push{_trend(before, after)}"
    before, after = _dist(player, boxes), _dist(ahead, boxes)
    return f"walk{_trend(before, after)}"


def _dist(p: tuple[int, int], targets: list[tuple[int, int]]) -> int:
    return min((abs(p[0] - t[0]) + abs(p[1] - t[1]) for t in targets), default=0)


def _trend(before: int, after: int) -> str:
    return "nearer" if after < before else "farther" if after > before else "level"


def _corner(cells: dict[tuple[int, int], str], p: tuple[int, int]) -> bool:
    """Whether a box at ``p`` (not a target) would sit between two perpendicular walls."""
    wall = [cells.get((p[0] + dr, p[1] + dc), "#") == "#" for _, dr, dc in DIRECTIONS]
    return (wall[0] or wall[1]) and (wall[2] or wall[3])


def describe(observation: str) -> str:
    """The room of ``observation`` as the policy's words (see the module docstring)."""
    grid = parse_grid(observation)
    cells = {(r, c): s for r, row in enumerate(grid) for c, s in enumerate(row)}
    player = next((p for p, s in cells.items() if s in ("P", "S")), None)
    if player is None:
        return "no player"
    pr, pc = player
    free = [p for p, s in cells.items() if s in ("O", "S")]
    parts = []
    for name, dr, dc in DIRECTIONS:
        parts.append(f"{_lookahead(cells, player, dr, dc, free)} {name} ;")
    for (br, bc), s in sorted(cells.items()):
        if s != "X":
            continue
        parts.append(f"box {_offset(br - pr, 'up', 'down')} {_offset(bc - pc, 'left', 'right')} ;")
        if free:
            tr, tc = min(free, key=lambda t: (abs(t[0] - br) + abs(t[1] - bc), t))
            parts.append(f"goal {_offset(tr - br, 'up', 'down')} "
                         f"{_offset(tc - bc, 'left', 'right')} ;")
    return " ".join(parts)


def render_segments(task: str, observation: str, actions: Sequence[str],
                    history: Sequence[Turn], step: int, history_length: int
                    ) -> tuple[tuple[int, str], ...]:
    """The prompt of one Sokoban turn as ``(segment id, text)`` parts (the signature of
    :func:`ccpo_lab.backends.local.prompts.render_segments`)."""
    shown = list(history)[-history_length:] if history_length > 0 else []
    parts: list[tuple[int, str]] = [(SEG_TASK, f"task: {task}. step {step + 1}.")]
    if shown:
        parts.append((SEG_HISTORY, "history: " + " ".join(f"moved {t.action} ;"
                                                          for t in shown)))
    parts.append((SEG_OBS, f"now: {describe(observation)}"))
    parts.append((SEG_ACTIONS, f"admissible actions: [ {' | '.join(actions)} ]"))
    return tuple(parts)
