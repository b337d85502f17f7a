"""Sokoban behind the CPU backend's environment protocol (``env.sokoban`` settings)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.local.envs.base import LocalEnvironment, games_cache
from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.backends.eval_contract import EpisodeRange
    from ccpo_lab.backends.local.envs.sokoban.engine import SokobanEngine
    from ccpo_lab.backends.local.envs.sokoban.rooms import RoomSet
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.evaluation.spec import EvalSetting
    from ccpo_lab.runs.layout import RunDir


def sokoban_settings(run: RunConfig) -> Any:
    """The run's ``env.sokoban`` settings."""
    return run.env.of("sokoban")


class SokobanEnvironment(LocalEnvironment):
    """Generated Sokoban rooms on gym_sokoban's engine, in verl-agent's text form."""

    name = "sokoban"
    view = "ccpo_lab.backends.local.envs.sokoban.view:render_segments"
    required = (("gym_sokoban", "pip install 'ccpo-lab[local]'"),)

    def load_games(self, run: RunConfig, rd: RunDir) -> RoomSet:
        """The run's rooms, generated into the games cache on first use."""
        from ccpo_lab.backends.local.envs.sokoban.rooms import ensure_rooms

        return ensure_rooms(games_cache(run, rd), sokoban_settings(run))

    def set_key(self, run: RunConfig) -> str:
        """A hash of the generation settings."""
        from ccpo_lab.backends.local.envs.sokoban.rooms import set_key

        return set_key(sokoban_settings(run))

    def open_engine(self, game: Any, max_steps: int) -> SokobanEngine:
        """gym_sokoban's engine loaded with ``game``."""
        from ccpo_lab.backends.local.envs.sokoban.engine import SokobanEngine

        return SokobanEngine(game, max_steps)

    def episodes(self, run: RunConfig, split: str) -> EpisodeRange:
        """Held-out rooms, or as many out-of-distribution ones (``n_eval_rooms``)."""
        from ccpo_lab.backends.eval_contract import EpisodeRange

        held = sokoban_settings(run).n_eval_rooms
        if held < 1:
            raise UserError(f"{run.arm} seed {run.seed}: Sokoban has no held-out rooms",
                            key="env.sokoban.n_eval_rooms", value=held,
                            valid="at least 1")
        what = ("the run's held-out rooms" if split == "in" else
                "the out-of-distribution rooms (env.sokoban.ood_dim_room, ood_num_boxes)")
        return EpisodeRange(min(run.protocol.val_batch_size, held), 1, held,
                            f"{what}, env.sokoban.n_eval_rooms")

    def split_games(self, run: RunConfig, games: Any, split: str, n: int) -> list[Any]:
        """The first ``n`` held-out (``in``) or out-of-distribution (``out``) rooms."""
        return list((games.eval if split == "in" else games.ood)[:n])

    def draw(self, run: RunConfig, setting: EvalSetting) -> dict[str, Any]:
        """The room set's key."""
        return {"game_set": self.set_key(run)[:16]}

    def warm_start(self, run: RunConfig) -> tuple[int, int]:
        """``backend.local``'s, with ``env.sokoban.warmstart_demos`` and ``_epochs`` where
        they are set."""
        cfg, s = run.backend.local, sokoban_settings(run)
        demos = cfg.warmstart_demos if s.warmstart_demos is None else int(s.warmstart_demos)
        epochs = cfg.warmstart_epochs if s.warmstart_epochs is None else int(s.warmstart_epochs)
        return demos, epochs

    def summary(self, run: RunConfig) -> str:
        """The rooms' count and size."""
        s = sokoban_settings(run)
        return (f"{s.n_train_rooms} generated {s.dim_room[0]}x{s.dim_room[1]} Sokoban rooms "
                f"with {s.num_boxes} box(es)")


SOKOBAN = SokobanEnvironment()
