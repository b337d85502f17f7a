"""Training protocol: the hyper-parameters every arm of a sweep shares.

Defaults are the ALFWorld reference protocol (``shared/reference/protocol.md``,
the GiGPO / G2PO scripts that the CCPO arms follow). The local CPU backend uses
a small protocol set in its sweep file.
"""

from __future__ import annotations

from dataclasses import dataclass

LIMITS: dict[str, tuple[float, float, bool]] = {
    "total_steps": (1, 100_000, False),
    "train_batch_size": (1, 65_536, False),
    "group_size": (1, 1_024, False),
    "val_batch_size": (1, 1_000_000, False),
    "test_freq": (1, 100_000, False),
    "save_freq": (1, 100_000, False),
    "max_steps": (1, 10_000, False),
    "history_length": (0, 1_000, False),
    "max_prompt_length": (1, 1_048_576, False),
    "max_response_length": (1, 1_048_576, False),
    "ppo_mini_batch_size": (1, 1_048_576, False),
    "ppo_epochs": (1, 1_000, False),
    "lr": (0, 1.0, True),
    "clip_ratio": (0, 10.0, False),
    "kl_loss_coef": (0, 1_000.0, False),
    "entropy_coeff": (0, 1_000.0, False),
    "invalid_action_penalty": (0, 1_000_000.0, False),
    "train_temperature": (0, 100.0, True),
    "val_temperature": (0, 100.0, True),
    "env_seed": (0, 2**31 - 1, False),
}
"""``field: (low, high, low_open)``: the range of every numeric field, checked when a sweep
is loaded (``high`` inclusive). Far beyond any study (the reference runs 150 steps), but
finite: a run dies at start, not hours later, and never from an absurd size
(``total_steps=1e9`` would allocate its evaluation schedule)."""


@dataclass(frozen=True)
class ProtocolConfig:
    """Training and evaluation hyper-parameters (result-relevant: part of the run identity)."""

    total_steps: int = 150
    """Training steps (``trainer.total_epochs`` in verl-agent: one batch per step)."""
    train_batch_size: int = 16
    """Tasks per training step (``data.train_batch_size``)."""
    group_size: int = 8
    """Rollouts per task, the GRPO group (``env.rollout.n``)."""
    val_batch_size: int = 128
    """Held-out episodes per evaluation (``data.val_batch_size``)."""
    test_freq: int = 5
    """Evaluate every this many steps (and before training, at step 0)."""
    save_freq: int = 10
    """Checkpoint every this many steps."""
    max_steps: int = 50
    """Environment steps per episode (``env.max_steps``)."""
    history_length: int = 2
    """Previous turns shown in the prompt (``env.history_length``)."""
    max_prompt_length: int = 2048
    """Prompt tokens (``data.max_prompt_length``)."""
    max_response_length: int = 512
    """Response tokens (``data.max_response_length``)."""
    lr: float = 1e-6
    """Actor learning rate, constant (``actor_rollout_ref.actor.optim.lr``)."""
    ppo_mini_batch_size: int = 256
    """PPO mini-batch (verl's ``actor_rollout_ref.actor.ppo_mini_batch_size``)."""
    ppo_epochs: int = 1
    """Passes over each batch."""
    clip_ratio: float = 0.2
    """PPO clip range."""
    use_kl_loss: bool = True
    """KL to the frozen reference policy in the loss."""
    kl_loss_coef: float = 0.01
    """Coefficient of the KL loss."""
    kl_loss_type: str = "low_var_kl"
    """KL estimator (``low_var_kl``: k3, clipped)."""
    entropy_coeff: float = 0.001
    """Entropy bonus (``actor.entropy_coeff``; the reference scripts leave verl-agent's
    default, 0.001)."""
    invalid_action_penalty: float = 0.1
    """Subtracted from the step reward of an inadmissible action."""
    train_temperature: float = 1.0
    """Sampling temperature of training rollouts."""
    val_temperature: float = 0.4
    """Sampling temperature of held-out evaluation (``val_kwargs.temperature``)."""
    env_seed: int = 0
    """Environment seed offset (``env.seed``); the run seed is added to it."""

    @property
    def episodes_per_step(self) -> int:
        """Training episodes per step (train_batch_size x group_size)."""
        return self.train_batch_size * self.group_size

    @property
    def eval_steps(self) -> list[int]:
        """Steps at which held-out evaluation happens (0, test_freq, ..., total_steps)."""
        steps = list(range(0, self.total_steps + 1, self.test_freq))
        if steps[-1] != self.total_steps:
            steps.append(self.total_steps)
        return steps
