"""Settings of the embedded CPU backend (``backend.kind: local``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

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
    batch_world_size: int = field(default=0, metadata={"identity": "non-default"})
    """GPUs a verl run would spread each step's batch over (``n_gpus_per_node x
    nnodes``): the turn rows are padded with copies to verl-agent's divisor and
    reordered by verl's sequence-length balancing over that many partitions before the
    advantage, and the update trains on that batch, as verl-agent's ``fit`` does
    (:mod:`ccpo_lab.backends.local.verl_batch`); ``as-run`` arms then compute on it as
    the published trainers did. 0 = off: each row once, in gather order."""
    batch_micro_size: int = field(default=32, metadata={"identity": "non-default"})
    """Per-GPU micro-batch of the log-prob passes and of the actor update, which sets the
    padding divisor ``batch_micro_size x batch_world_size`` (with ``batch_world_size``)."""
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
                  "warmstart_epochs": (0, 10_000), "num_threads": (1, 1_024),
                  "batch_world_size": (0, 4_096), "batch_micro_size": (1, 65_536)}
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

    def check_protocol(self, protocol: Any, where: Callable[[str], str | None]) -> None:
        """Refuse a padding that can be undefined: verl-agent copies distinct rows, so a
        step needs at least ``divisor - 1`` rows, and a step of one-turn episodes has only
        ``train_batch_size x group_size``."""
        if self.batch_world_size == 0:
            return
        divisor = self.batch_world_size * self.batch_micro_size
        fewest = int(protocol.train_batch_size) * int(protocol.group_size)
        if divisor - 1 > fewest:
            key = "backend.local.batch_micro_size"
            raise UserError(
                f"padding to a multiple of {divisor} (batch_world_size {self.batch_world_size} "
                f"x batch_micro_size {self.batch_micro_size}) can need {divisor - 1} copies "
                f"of distinct rows, more than the {fewest} rows of a step of one-turn "
                "episodes (train_batch_size x group_size): verl-agent's padding is undefined "
                "there", file=where(key), key=key, value=self.batch_micro_size)
