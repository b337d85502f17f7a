"""What can be in a generated room: ALFRED's object and receptacle types, by room kind.

The room lists (which receptacles and objects a kitchen, living room, bedroom or bathroom
offers) are ours; every physical fact (which receptacle type can contain which object type,
which objects can be heated, cooled, cleaned, sliced or toggled, which receptacles open) is
read from the installed ALFWorld package (``alfworld.gen.constants``), so the generated
games obey the same rules as ALFRED's scenes. ``alfworld`` is imported lazily.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ccpo_lab.runs.tasks import CLEAN, COOL, HEAT
from ccpo_lab.runs.tasks import TASK_TYPES as TASK_TABLE

TASK_TYPES: tuple[str, ...] = tuple(t.id for t in TASK_TABLE)
"""ALFWorld's six task types, in ALFWorld's own order (``TASK_TYPES`` ids 1..6): the ids
of the task-type table (:mod:`ccpo_lab.runs.tasks`)."""

APPLIANCE: dict[str, str] = {CLEAN: "SinkBasin", HEAT: "Microwave", COOL: "Fridge"}
"""The receptacle type a state-change task needs (the domain's Clean/Heat/CoolObject)."""

STATE_CLASS: dict[str, str] = {CLEAN: "Cleanable", HEAT: "Heatable", COOL: "Coolable"}

LAMP = "DeskLamp"
LAMP_HOLDERS: tuple[str, ...] = ("Desk", "SideTable", "Dresser")
"""Receptacles a desk lamp stands on (look_at_obj_in_light)."""

MULTI_INSTANCE: frozenset[str] = frozenset(
    {"Cabinet", "Drawer", "CounterTop", "Shelf", "SideTable", "StoveBurner"}
)
"""Receptacle types a room may hold more than one of (``cabinet 1``, ``cabinet 2``)."""


@dataclass(frozen=True)
class RoomKind:
    """A kind of room: the receptacle and object types it may contain."""

    name: str
    floorplan: int
    """ALFRED floor-plan number of this room kind's first scene (used in folder names)."""
    receptacles: tuple[str, ...]
    objects: tuple[str, ...]


ROOMS: tuple[RoomKind, ...] = (
    RoomKind(
        "kitchen", 1,
        ("CounterTop", "DiningTable", "Cabinet", "Drawer", "Fridge", "Microwave",
         "SinkBasin", "StoveBurner", "GarbageCan", "CoffeeMachine", "Shelf"),
        ("Apple", "Bread", "Egg", "Lettuce", "Potato", "Tomato", "Mug", "Cup", "Bowl",
         "Plate", "Pan", "Pot", "Fork", "Knife", "ButterKnife", "Spoon", "Spatula", "Ladle",
         "DishSponge", "SaltShaker", "PepperShaker", "SoapBottle", "Kettle", "WineBottle"),
    ),
    RoomKind(
        "livingroom", 201,
        ("CoffeeTable", "SideTable", "Sofa", "ArmChair", "Drawer", "Cabinet", "Shelf",
         "Dresser", "GarbageCan"),
        ("Book", "CellPhone", "CD", "KeyChain", "Pen", "Pencil", "Watch", "CreditCard",
         "RemoteControl", "Laptop", "Pillow", "Vase", "Statue", "Newspaper", "TissueBox",
         "Bowl"),
    ),
    RoomKind(
        "bedroom", 301,
        ("Bed", "Desk", "SideTable", "Dresser", "Drawer", "Shelf", "GarbageCan", "Safe",
         "ArmChair"),
        ("Book", "CellPhone", "CD", "KeyChain", "Pen", "Pencil", "Watch", "AlarmClock",
         "CreditCard", "Laptop", "Pillow", "Vase", "Statue", "TennisRacket", "BaseballBat",
         "BasketBall", "Mug", "Bowl"),
    ),
    RoomKind(
        "bathroom", 401,
        ("CounterTop", "Cabinet", "Drawer", "SinkBasin", "Toilet", "BathtubBasin",
         "GarbageCan", "Shelf", "ToiletPaperHanger", "HandTowelHolder"),
        ("SoapBar", "SoapBottle", "Cloth", "HandTowel", "ToiletPaper", "SprayBottle",
         "Candle", "DishSponge", "TissueBox"),
    ),
)

ROOMS_BY_NAME: dict[str, RoomKind] = {room.name: room for room in ROOMS}


@dataclass(frozen=True)
class Physics:
    """ALFRED's physical facts, as read from ``alfworld.gen.constants``."""

    can_contain: dict[str, frozenset[str]]
    """receptacle type -> object types it may hold."""
    openable: frozenset[str]
    heatable: frozenset[str]
    coolable: frozenset[str]
    cleanable: frozenset[str]
    sliceable: frozenset[str]
    toggleable: frozenset[str]
    receptacle_objects: frozenset[str]
    """Object types that are themselves containers (``isReceptacleObject``)."""

    def holds(self, receptacle: str, obj: str) -> bool:
        """Whether a ``receptacle``-type receptacle may contain an ``obj``-type object."""
        return obj in self.can_contain.get(receptacle, frozenset())

    def state_ok(self, task_type: str, obj: str) -> bool:
        """Whether ``obj`` can undergo the state change ``task_type`` asks for."""
        cls = STATE_CLASS.get(task_type)
        if cls is None:
            return True
        return obj in {"Cleanable": self.cleanable, "Heatable": self.heatable,
                       "Coolable": self.coolable}[cls]


@functools.cache
def physics() -> Physics:
    """The physical facts of ALFRED (read once from the installed alfworld)."""
    import alfworld.gen.constants as c

    actions = c.VAL_ACTION_OBJECTS
    return Physics(
        can_contain={k: frozenset(v) for k, v in c.VAL_RECEPTACLE_OBJECTS.items()},
        openable=frozenset(c.OPENABLE_CLASS_LIST),
        heatable=frozenset(actions["Heatable"]),
        coolable=frozenset(actions["Coolable"]),
        cleanable=frozenset(actions["Cleanable"]),
        sliceable=frozenset(actions["Sliceable"]),
        toggleable=frozenset(actions["Toggleable"]),
        receptacle_objects=frozenset(c.MOVABLE_RECEPTACLES),
    )


def rooms_for(task_type: str, rooms: tuple[RoomKind, ...] = ROOMS) -> tuple[RoomKind, ...]:
    """Room kinds of ``rooms`` (default: the training rooms) in which ``task_type`` can be
    posed."""
    if task_type == "look_at_obj_in_light":
        return tuple(r for r in rooms if set(LAMP_HOLDERS) & set(r.receptacles))
    need = APPLIANCE.get(task_type)
    if need is None:
        return rooms
    return tuple(r for r in rooms if need in r.receptacles)
