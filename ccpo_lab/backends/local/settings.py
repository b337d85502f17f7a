"""Settings of the embedded CPU backend (``backend.kind: local``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ccpo_lab.errors import UserError

POLICY_ENCODERS = ("conv", "gru")
"""Values of ``backend.local.encoder`` (see :class:`LocalBackendConfig`)."""


@dataclass(frozen=True)
class LocalBackendConfig:
    """The CPU backend: generated ALFWorld games on the real engine and a small policy."""

    ignored_protocol: ClassVar[Mapping[str, str]] = {
        "max_response_length": "the policy picks one of the admissible actions; it "
                               "generates no response",
    }
    """Protocol keys this backend does not read, and why: a sweep that sets one (to other
    than its default) is refused, since it would change the run id and nothing else."""

    n_train_games: int = 24
    """Generated training games."""
    n_eval_games: int = 24
    """Generated held-out games."""
    games_seed: int = 0
    """Seed of the game generator (the same games for every arm and seed)."""
    n_receptacles: int = 4
    """Receptacles per generated room."""
    n_distractors: int = 2
    """Distractor objects per generated room."""
    closed_fraction: float = 0.3
    """Chance that a receptacle of a generated room is an openable one (starts closed)."""
    max_plan_len: int = 12
    """Generated games whose expert plan is longer are redrawn."""
    vocab_size: int = 2048
    """Hash buckets of the policy's word tokenizer."""
    embed_dim: int = 64
    """Policy token-embedding width."""
    hidden_dim: int = 128
    """Policy encoder width (also the width of CCPO's ``phi``)."""
    encoder: str = "conv"
    """How the policy reads the prompt and the actions (one of :data:`POLICY_ENCODERS`):
    ``conv``, a causal convolution over the prompt's words summarised per segment and a
    bag of each action's words; ``gru``, GRUs over both (the first policy: 3-4x slower on
    CPU, since a GRU steps through the prompt's ~100 words one at a time)."""
    warmstart_demos: int = 0
    """Expert demonstrations (planner solutions of training games, replayed on the engine)
    the initial policy is behaviour-cloned on before RL; 0 = RL from a random policy. The
    reference policy is the warm-started one, as an instruction-tuned model is on GPUs."""
    warmstart_epochs: int = 0
    """Passes over the demonstrations (Adam, lr ``warmstart_lr``)."""
    warmstart_lr: float = 3.0e-3
    """Learning rate of the behaviour-cloning warm start."""
    num_threads: int = 1
    """torch CPU threads per run."""
    games_cache: str | None = field(default=None, metadata={"identity": False})
    """Folder holding generated game sets (content-addressed); default
    ``<results>/.games``. Not part of the run identity."""

    def validate(self, file: str | Callable[[str], str | None] | None = None) -> None:
        """Raise :class:`~ccpo_lab.errors.UserError` naming the first out-of-range field.

        ``file``: the file the settings came from, or ``where(key) -> file`` (the sweep
        loader's: a key set on the command line names it). Called when a sweep is loaded,
        so ``--dry-run`` catches what the game generator would refuse on the node.
        """
        where = file if callable(file) else (lambda _k: file)

        def bad(name: str, why: str) -> UserError:
            key = f"backend.local.{name}"
            return UserError(why, file=where(key), key=key, value=getattr(self, name))

        ranges = {"n_train_games": (1, 100_000), "n_eval_games": (0, 100_000),
                  "games_seed": (0, 2**31 - 1), "max_plan_len": (1, 1_000),
                  "vocab_size": (16, 1_048_576), "embed_dim": (1, 4_096),
                  "hidden_dim": (1, 8_192), "warmstart_demos": (0, 1_000_000),
                  "warmstart_epochs": (0, 10_000), "num_threads": (1, 1_024)}
        for name, (low, high) in ranges.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise bad(name, f"must be an integer in {low}..{high}")
        for name, low, high in (("n_receptacles", 3, 12), ("n_distractors", 0, 10)):
            if not low <= getattr(self, name) <= high:
                raise bad(name, f"must be in {low}..{high} (the game generator's range)")
        if self.encoder not in POLICY_ENCODERS:
            raise bad("encoder", f"must be one of {', '.join(POLICY_ENCODERS)}")
        if not 0.0 <= self.closed_fraction <= 1.0:
            raise bad("closed_fraction", "must be in [0, 1]")
        if not 0 < self.warmstart_lr <= 10.0:
            raise bad("warmstart_lr", "must be in (0, 10]")
