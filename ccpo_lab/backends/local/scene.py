"""Random ALFRED-style rooms: which receptacles, which objects where, and the task posed.

A :class:`Scene` is the abstract content of one game; :mod:`ccpo_lab.backends.local.pddl`
renders it as a PDDL problem. Sampling draws only from the explicit generator it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ccpo_lab.backends.local.catalog import (
    APPLIANCE,
    LAMP,
    LAMP_HOLDERS,
    MULTI_INSTANCE,
    Physics,
    RoomKind,
    physics,
    rooms_for,
)
from ccpo_lab.runs.tasks import LOOK, PICK_TWO


@dataclass(frozen=True)
class SceneKnobs:
    """How big a sampled room is (resolved, validated elsewhere)."""

    n_receptacles: int
    n_distractors: int
    closed_fraction: float


@dataclass(frozen=True)
class Scene:
    """One game's content. Ids are ALFRED-style (``Apple_bar_1``, ``Sink_bar_1_bar_SinkBasin``)."""

    room: RoomKind
    task_type: str
    object_target: str
    """Object type the task is about (``Apple``)."""
    parent_target: str
    """Receptacle type the object must end in (``""`` for look_at_obj_in_light)."""
    toggle_target: str
    """``DeskLamp`` for look_at_obj_in_light, else ``""``."""
    receptacles: tuple[tuple[str, str], ...]
    """(receptacle id, receptacle type), in creation order."""
    objects: tuple[tuple[str, str, str], ...]
    """(object id, object type, id of the receptacle it is in)."""


def receptacle_id(rtype: str, k: int) -> str:
    """ALFRED's id for the ``k``-th receptacle of type ``rtype`` (basins hang off their sink)."""
    if rtype.endswith("Basin"):
        return f"{rtype[: -len('Basin')]}_bar_{k}_bar_{rtype}"
    return f"{rtype}_bar_{k}"


def _choice(rng: np.random.Generator, items: list[str] | tuple[str, ...]) -> str:
    return items[int(rng.integers(len(items)))]


def _pick_slot_type(rng: np.random.Generator, options: list[str], phys: Physics,
                    closed_fraction: float) -> str:
    """A receptacle type from ``options``: an openable one with probability closed_fraction."""
    closed = [t for t in options if t in phys.openable]
    open_ = [t for t in options if t not in phys.openable]
    want_closed = bool(rng.random() < closed_fraction)
    pool = closed if (want_closed and closed) or not open_ else open_
    return _choice(rng, pool)


def _target_choices(room: RoomKind, task_type: str, phys: Physics) -> dict[str, list[str]]:
    """object type -> receptacle types it may be taken to (those with another source)."""
    out: dict[str, list[str]] = {}
    banned = APPLIANCE.get(task_type)
    for obj in room.objects:
        if not phys.state_ok(task_type, obj):
            continue
        sources = [r for r in room.receptacles if phys.holds(r, obj)]
        if task_type == LOOK:
            if sources:
                out[obj] = [""]
            continue
        targets = [r for r in room.receptacles if phys.holds(r, obj) and r != banned
                   and any(s != r for s in sources)]
        if targets:
            out[obj] = targets
    return out


def sample_scene(task_type: str, knobs: SceneKnobs, rng: np.random.Generator,
                 rooms: tuple[RoomKind, ...] | None = None) -> Scene:
    """A random room posing ``task_type``, drawn from ``rng`` only; ``rooms``: the room
    kinds to draw from (default: the training rooms, :data:`~.catalog.ROOMS`).

    The target object starts in a receptacle of another type than the goal's, so the goal
    never holds at the start; openable receptacles start closed, as in ALFWorld. Long on
    purpose: its draws from ``rng`` happen in one fixed order, which every generated game
    (and so every cached game set) depends on.
    """
    phys = physics()
    kinds = rooms_for(task_type) if rooms is None else rooms_for(task_type, rooms)
    room = kinds[int(rng.integers(len(kinds)))]
    choices = _target_choices(room, task_type, phys)
    obj = _choice(rng, sorted(choices))
    parent = _choice(rng, choices[obj])
    sources = [r for r in room.receptacles if phys.holds(r, obj) and r != parent]
    source = _pick_slot_type(rng, sources, phys, knobs.closed_fraction)

    required = [source]
    if parent:
        required.append(parent)
    if task_type in APPLIANCE:
        required.append(APPLIANCE[task_type])
    toggle = ""
    holder = ""
    if task_type == LOOK:
        toggle = LAMP
        holder = _choice(rng, [h for h in LAMP_HOLDERS if h in room.receptacles])
        required.append(holder)
    types: list[str] = []
    for t in required:
        if t not in types:
            types.append(t)
    for _ in range(8 * knobs.n_receptacles):
        if len(types) >= knobs.n_receptacles:
            break
        options = [t for t in room.receptacles if t not in types or t in MULTI_INSTANCE]
        types.append(_pick_slot_type(rng, options, phys, knobs.closed_fraction))

    counts: dict[str, int] = {}
    receptacles: list[tuple[str, str]] = []
    first: dict[str, str] = {}
    for t in types:
        counts[t] = counts.get(t, 0) + 1
        rid = receptacle_id(t, counts[t])
        receptacles.append((rid, t))
        first.setdefault(t, rid)

    objects: list[tuple[str, str, str]] = []
    ocounts: dict[str, int] = {}

    def place(otype: str, rid: str) -> None:
        ocounts[otype] = ocounts.get(otype, 0) + 1
        objects.append((f"{otype}_bar_{ocounts[otype]}", otype, rid))

    place(obj, first[source])
    if task_type == PICK_TWO:
        spots = [rid for rid, t in receptacles if t != parent and phys.holds(t, obj)]
        place(obj, _choice(rng, spots))
    if toggle:
        place(toggle, first[holder])
    pool = [o for o in room.objects if o != obj
            and any(phys.holds(t, o) for _, t in receptacles)]
    n_d = min(knobs.n_distractors, len(pool))
    for i in rng.permutation(len(pool))[:n_d]:
        otype = pool[int(i)]
        spots = [rid for rid, t in receptacles if phys.holds(t, otype)]
        place(otype, _choice(rng, spots))
    return Scene(room=room, task_type=task_type, object_target=obj, parent_target=parent,
                 toggle_target=toggle, receptacles=tuple(receptacles), objects=tuple(objects))
