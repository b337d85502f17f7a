"""The environment registry: each environment's settings (``env.<name>`` in a sweep file)
and the backends that can run it.

An environment is an axis of a study like the arms and the seeds: a sweep lists
``environments: [alfworld, sokoban]`` and every (arm, seed) runs on each. ALFWorld is the
default, so a sweep that names no environment, and every run directory written before
environments existed, mean ALFWorld with the same run ids (the environment enters a run's
identity only when it is not ALFWorld).

Adding an environment: its settings dataclass here, a line in :data:`ENVIRONMENTS`, a field
of :class:`~ccpo_lab.config.schema.EnvConfig`, and its code in each backend that runs it
(``ccpo_lab/backends/local/envs/<name>/`` for the CPU backend). Settings fields are
shared by every backend that runs the environment; a backend ignores those it does not
use, and says so in its docs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ccpo_lab.config.validate import check_range
from ccpo_lab.errors import UserError

Where = Callable[[str], "str | None"]

DEFAULT_ENVIRONMENT = "alfworld"
"""What a sweep without ``environments`` runs on, and every run written before them."""


@dataclass(frozen=True)
class EnvironmentSettings:
    """What every environment's settings have: protocol overrides for its runs."""

    protocol: dict[str, Any] = field(default_factory=dict, metadata={"identity": False})
    """Protocol keys this environment's runs take instead of the sweep's (``max_steps:
    15``, a larger group): verl-agent's scripts give each environment its own; an arm's
    ``training`` still wins. Not part of the settings' identity: the run's protocol is."""


@dataclass(frozen=True)
class AlfworldSettings(EnvironmentSettings):
    """ALFWorld (``env.alfworld``). The CPU backend's game generation lives in
    ``backend.local`` (it predates environments); verl-agent's ALFWorld data in
    ``backend.verl``."""

    def validate(self, where: Where, key: str = "env.alfworld") -> None:
        """Nothing to check."""


@dataclass(frozen=True)
class SokobanSettings(EnvironmentSettings):
    """Sokoban, in verl-agent's text form (``env.sokoban``): ``gym_sokoban`` rooms, actions
    up/down/left/right, the room as text rows.

    ``dim_room``, ``num_boxes``, ``search_depth`` and ``mode`` are verl-agent's
    ``env.sokoban.*`` (the CPU backend generates its rooms with them too); the rest are
    the CPU backend's: how many rooms it generates for training and held-out evaluation,
    and the out-of-distribution split (larger rooms, more boxes).
    """

    dim_room: list[int] = field(default_factory=lambda: [6, 6])
    """Room height and width, walls included (verl-agent's default, ``[6, 6]``)."""
    num_boxes: int = 1
    """Boxes (and targets) per room."""
    search_depth: int = 30
    """Depth of gym_sokoban's reverse-play room generation (its ``max_steps`` of
    reverse moves): deeper rooms are harder."""
    mode: str = "tiny_rgb_array"
    """verl-agent's render mode; ``tiny_rgb_array`` is the text grid (the text modality).
    The visual modes need a vision-language model: ccpo-lab runs the text form only."""
    n_train_rooms: int = 256
    """CPU backend: rooms generated for training (seeded, each checked solvable)."""
    n_eval_rooms: int = 64
    """CPU backend: held-out rooms (never trained on)."""
    rooms_seed: int = 0
    """CPU backend: seed of room generation (the run seed does not change the rooms)."""
    ood_dim_room: list[int] = field(default_factory=lambda: [7, 7])
    """CPU backend: room size of the out-of-distribution split."""
    ood_num_boxes: int = 2
    """CPU backend: boxes per room of the out-of-distribution split."""
    min_plan_len: int = 1
    """CPU backend: rooms whose shortest solution (in moves) is shorter are redrawn
    (gym_sokoban's generator makes many one- and two-move rooms at ``[6, 6]``)."""

    warmstart_epochs: int | None = None
    """CPU backend: passes of Sokoban's behaviour-cloning warm start (None:
    ``backend.local.warmstart_epochs``). A sweep over several environments shares
    ``backend.local``; the small policy needs more passes over Sokoban's short solutions
    than over ALFWorld's."""
    warmstart_demos: int | None = None
    """CPU backend: the solver's solutions behaviour-cloned before RL (None:
    ``backend.local.warmstart_demos``)."""

    MODES: ClassVar[tuple[str, ...]] = ("tiny_rgb_array",)

    def validate(self, where: Where, key: str = "env.sokoban") -> None:
        """Raise :class:`~ccpo_lab.errors.UserError` naming the first bad field."""
        for name in ("dim_room", "ood_dim_room"):
            dims = getattr(self, name)
            if len(dims) != 2:
                raise UserError("a room is [height, width]", file=where(f"{key}.{name}"),
                                key=f"{key}.{name}", value=list(dims))
            for i, d in enumerate(dims):
                check_range(d, low=5, high=30, key=f"{key}.{name}[{i}]",
                            file=where(f"{key}.{name}"))
        ranges = {"num_boxes": (1, 8), "ood_num_boxes": (1, 8), "search_depth": (1, 1_000),
                  "n_train_rooms": (1, 1_000_000), "n_eval_rooms": (0, 1_000_000),
                  "rooms_seed": (0, 2**31 - 1), "min_plan_len": (1, 100)}
        for name, (low, high) in ranges.items():
            check_range(getattr(self, name), low=low, high=high, key=f"{key}.{name}",
                        file=where(f"{key}.{name}"))
        if self.warmstart_demos is not None:
            check_range(self.warmstart_demos, low=0, high=1_000_000,
                        key=f"{key}.warmstart_demos", file=where(f"{key}.warmstart_demos"))
        if self.warmstart_epochs is not None:
            check_range(self.warmstart_epochs, low=0, high=10_000,
                        key=f"{key}.warmstart_epochs", file=where(f"{key}.warmstart_epochs"))
        if self.mode not in self.MODES:
            raise UserError("ccpo-lab runs Sokoban's text form only (a visual mode needs a "
                            "vision-language model)", file=where(f"{key}.mode"),
                            key=f"{key}.mode", value=self.mode, valid=list(self.MODES))


@dataclass(frozen=True)
class WebshopSettings(EnvironmentSettings):
    """WebShop (``env.webshop``), verl-agent's ``env.webshop.*``: runs on the verl backend
    only, in WebShop's own environment (Java, pyserini, its product index)."""

    use_small: bool = True
    """The 1,000-product index verl-agent's scripts use (False: the full 1.18M)."""
    human_goals: bool = False
    """Human-written instructions instead of the synthetic ones."""
    data_dir: str | None = field(default=None, metadata={"identity": False})
    """WebShop's data folder (``items_shuffle*.json``, ``items_ins_v2*.json``, the search
    index); None: the one inside the verl-agent checkout's WebShop package."""

    def validate(self, where: Where, key: str = "env.webshop") -> None:
        """Nothing to check here: ``ccpo-lab doctor`` checks the data and interpreter."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """One registered environment."""

    name: str
    title: str
    """How tables and docs name it."""
    backends: tuple[str, ...]
    """Backends that can run it."""
    settings: type
    """Its settings dataclass (``env.<name>``)."""


ENVIRONMENTS: dict[str, EnvironmentSpec] = {
    "alfworld": EnvironmentSpec("alfworld", "ALFWorld", ("local", "verl"), AlfworldSettings),
    "sokoban": EnvironmentSpec("sokoban", "Sokoban", ("local", "verl"), SokobanSettings),
    "webshop": EnvironmentSpec("webshop", "WebShop", ("verl",), WebshopSettings),
}
"""Every environment ccpo-lab knows, by the name a sweep gives it."""


def environment_spec(name: str, *, file: str | None = None,
                     key: str = "environments") -> EnvironmentSpec:
    """The registered environment ``name``; an unknown one is a one-line error."""
    if name not in ENVIRONMENTS:
        raise UserError("unknown environment", file=file, key=key, value=name,
                        valid=list(ENVIRONMENTS))
    return ENVIRONMENTS[name]


def check_environments(names: Sequence[str], backend: str, where: Where) -> None:
    """The sweep's ``environments``: non-empty, known, each once, each one the backend
    runs."""
    if not names:
        raise UserError("no environments", file=where("environments"), key="environments",
                        value=list(names), valid=list(ENVIRONMENTS))
    for i, name in enumerate(names):
        spec = environment_spec(name, file=where("environments"), key=f"environments[{i}]")
        if backend not in spec.backends:
            raise UserError(f"the {backend} backend cannot run {spec.title} (it runs on: "
                            f"{', '.join(spec.backends)})", file=where("environments"),
                            key=f"environments[{i}]", value=name)
    dupes = sorted({n for n in names if list(names).count(n) > 1})
    if dupes:
        raise UserError("environment listed twice", file=where("environments"),
                        key="environments", value=dupes)


def settings_of(env: Any, name: str) -> Any:
    """The settings of environment ``name`` in an :class:`~ccpo_lab.config.schema.EnvConfig`."""
    return getattr(env, name)
