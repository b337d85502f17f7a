"""ALFWorld behind the CPU backend's environment protocol (every output as before)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.local.envs.base import LocalEnvironment, games_cache
from ccpo_lab.errors import UserError

if TYPE_CHECKING:
    from ccpo_lab.backends.eval_contract import EpisodeRange
    from ccpo_lab.backends.local.env import AlfworldEnv
    from ccpo_lab.backends.local.games import GameSet, GameSpec
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.evaluation.spec import EvalSetting
    from ccpo_lab.runs.layout import RunDir

ENGINE_CACHE = ".engines"
"""Folder of a game set holding its engines' load-time results (see :mod:`.speedups`)."""


def game_spec(run: RunConfig) -> GameSpec:
    """The game set a run trains and evaluates on (from ``backend.local``)."""
    from ccpo_lab.backends.local.games import GameGenConfig, GameSpec

    cfg = run.backend.local
    gen = GameGenConfig(n_receptacles=cfg.n_receptacles, n_distractors=cfg.n_distractors,
                        closed_fraction=cfg.closed_fraction, max_plan_len=cfg.max_plan_len)
    return GameSpec(n_train=cfg.n_train_games, n_eval=cfg.n_eval_games, seed=cfg.games_seed,
                    config=gen)


class AlfworldEnvironment(LocalEnvironment):
    """Generated ALFWorld games (``backend.local.*`` settings)."""

    name = "alfworld"
    view = ""
    required = (("alfworld", "pip install 'ccpo-lab[local]'"),)

    def load_games(self, run: RunConfig, rd: RunDir) -> GameSet:
        """The run's game set, generated into the cache on first use (shared by all runs).

        Runs starting together wait on a lock file while one of them generates the set.
        """
        import fcntl

        from ccpo_lab.backends.local.games import ensure_games

        spec = game_spec(run)
        cache = games_cache(run, rd)
        cache.mkdir(parents=True, exist_ok=True)
        with (cache / f".lock-{spec.key()[:16]}").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                games = ensure_games(cache, spec)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        if not games.train:
            raise UserError("the local backend needs at least one training game",
                            key="backend.local.n_train_games",
                            value=run.backend.local.n_train_games)
        return games

    def set_key(self, run: RunConfig) -> str:
        """The game spec's hash."""
        return game_spec(run).key()

    def open_engine(self, game: Any, max_steps: int) -> AlfworldEnv:
        """An engine slot on the real ALFWorld engine."""
        from ccpo_lab.backends.local.env import AlfworldEnv

        return AlfworldEnv([game], max_steps=max_steps)

    def prepare(self, games: Any) -> None:
        """The engines of these games load from files the first run to load them wrote."""
        from ccpo_lab.backends.local import speedups

        speedups.use_disk_cache(games.root / ENGINE_CACHE)

    def episodes(self, run: RunConfig, split: str) -> EpisodeRange:
        """Held-out games (``backend.local.n_eval_games``) or OOD ones (up to MAX_GAMES)."""
        from ccpo_lab.backends.eval_contract import EpisodeRange
        from ccpo_lab.backends.local.ood import MAX_GAMES

        held = run.backend.local.n_eval_games
        val = run.protocol.val_batch_size
        if split == "in":
            if held < 1:
                raise UserError(f"{run.arm} seed {run.seed}: split 'in' has no games",
                                key="backend.local.n_eval_games", value=held,
                                valid="at least 1 held-out game, or --split out")
            return EpisodeRange(min(val, held), 1, held,
                                f"the run's {held} held-out games, backend.local.n_eval_games")
        return EpisodeRange(min(val, held or val, MAX_GAMES), 1, MAX_GAMES,
                            "games generated for the out-of-distribution split")

    def split_games(self, run: RunConfig, games: Any, split: str, n: int) -> list[Any]:
        """The held-out games, or :mod:`.ood`'s generated beside the game set."""
        if split == "in":
            return list(games.eval[:n])
        from ccpo_lab.backends.local.ood import ensure_ood_games

        return list(ensure_ood_games(games, n).games[:n])

    def draw(self, run: RunConfig, setting: EvalSetting) -> dict[str, Any]:
        """The game set's key (and the OOD set's)."""
        from ccpo_lab.backends.local.ood import OOD_VERSION, ood_key

        spec = game_spec(run)
        out: dict[str, Any] = {"game_set": spec.key()[:16]}
        if setting.split == "out":
            out["ood"] = {"key": ood_key(spec, setting.episodes)[:16], "version": OOD_VERSION}
        return out

    def summary(self, run: RunConfig) -> str:
        """The generated games' count."""
        return f"{run.backend.local.n_train_games} generated games"

    def task_metric_names(self) -> dict[str, str]:
        """The six ALFWorld task types' metric names."""
        from ccpo_lab.backends.local.prompts import TASK_METRIC_NAMES

        return dict(TASK_METRIC_NAMES)


ALFWORLD = AlfworldEnvironment()
