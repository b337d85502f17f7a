"""A breadth-first Sokoban solver: the shortest solution of a room (in moves), or None.

States are (player, boxes); a move steps onto floor or a target, or pushes the box ahead
when the cell behind it is free (gym_sokoban's rules: a blocked move is a no-op, so it is
never part of a shortest solution). It checks generated rooms solvable and gives the
warm start's demonstrations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

WALL_CODE = 0
TARGET_CODE = 2
BOX_CODES = (3, 4)
PLAYER_CODE = 5
MOVES: tuple[tuple[str, int, int], ...] = (("up", -1, 0), ("down", 1, 0), ("left", 0, -1),
                                           ("right", 0, 1))

State = tuple[tuple[int, int], frozenset[tuple[int, int]]]


def _parse(fixed: Sequence[Sequence[int]], state: Sequence[Sequence[int]]
           ) -> tuple[set[tuple[int, int]], frozenset[tuple[int, int]], State]:
    walls, targets, boxes = set(), set(), set()
    player = (-1, -1)
    for r, row in enumerate(state):
        for c, code in enumerate(row):
            if int(fixed[r][c]) == WALL_CODE:
                walls.add((r, c))
            if int(fixed[r][c]) == TARGET_CODE:
                targets.add((r, c))
            if int(code) in BOX_CODES:
                boxes.add((r, c))
            if int(code) == PLAYER_CODE:
                player = (r, c)
    if player == (-1, -1):
        raise ValueError("the room has no player")
    return walls, frozenset(targets), (player, frozenset(boxes))


def solve(fixed: Sequence[Sequence[int]], state: Sequence[Sequence[int]],
          max_states: int = 500_000) -> tuple[str, ...] | None:
    """The shortest action sequence that puts every box on a target (None: none found
    within ``max_states`` explored states)."""
    walls, targets, start = _parse(fixed, state)
    if start[1] <= targets:
        return ()
    parent: dict[State, tuple[State, str] | None] = {start: None}
    queue = deque([start])
    while queue and len(parent) <= max_states:
        cur = queue.popleft()
        (pr, pc), boxes = cur
        for name, dr, dc in MOVES:
            ahead = (pr + dr, pc + dc)
            if ahead in walls:
                continue
            if ahead in boxes:
                beyond = (ahead[0] + dr, ahead[1] + dc)
                if beyond in walls or beyond in boxes:
                    continue
                nxt: State = (ahead, (boxes - {ahead}) | {beyond})
            else:
                nxt = (ahead, boxes)
            if nxt in parent:
                continue
            parent[nxt] = (cur, name)
            if nxt[1] <= targets:
                return _path(parent, nxt)
            queue.append(nxt)
    return None


def _path(parent: dict[State, tuple[State, str] | None], end: State) -> tuple[str, ...]:
    out: list[str] = []
    step = parent[end]
    while step is not None:
        prev, name = step
        out.append(name)
        step = parent[prev]
    return tuple(reversed(out))
