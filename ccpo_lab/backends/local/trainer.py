"""One run's training state and its steps: rollouts, advantages, PPO-clip + KL update, eval.

A step mirrors ``shared/reference/protocol.md`` at small scale: ``train_batch_size`` distinct
training games x ``group_size`` rollouts at ``train_temperature``; rows (one per turn) go
through the arm's estimator via the public API (``get_estimator``); the loss is verl's
PPO-clip (with dual clip) plus ``kl_loss_coef`` x the ``kl_loss_type`` estimate of the KL to
the frozen reference; Adam. Held-out evaluation plays ``val_batch_size`` episodes of the
held-out games at ``val_temperature`` with a generator keyed by (seed, step), so it never
perturbs training and every arm of a seed is evaluated with the same draws.

Every random draw comes from ``self.rng`` (numpy: tasks, actions) or ``self.tgen`` (torch:
initialisation, mini-batch order), both saved in checkpoints.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ccpo_lab.backends.local.envs import environment_of
from ccpo_lab.backends.local.envs.alfworld.environment import ENGINE_CACHE  # noqa: F401
from ccpo_lab.backends.local.policy import ActionScorer, PolicyShape, chosen_logprobs, collate
from ccpo_lab.backends.local.ppo import UpdateBatch, ppo_update
from ccpo_lab.backends.local.prompts import PromptSettings
from ccpo_lab.backends.local.rollout import (
    EnginePool,
    Episode,
    Timer,
    episode_metrics,
    play,
    success_metrics,
)
from ccpo_lab.backends.local.verl_batch import PaddingUndefined, passed_rows
from ccpo_lab.backends.local.warmstart import warm_start
from ccpo_lab.errors import UserError
from ccpo_lab.estimators import StepBatch, get_estimator

if TYPE_CHECKING:
    from ccpo_lab.backends.local.envs.base import GameSet
    from ccpo_lab.config.schema import RunConfig

TRAIN_TAG = 0x7A1
EVAL_TAG = 0xE7A
PAD_TAG = 0xAD7
"""Keys the generator of the padding copies (with the run seed and the step)."""
WARMSTART_CACHE = ".warmstart"
"""Folder of a game set holding the warm-started policies its runs share (see
:mod:`.warmstart`)."""


class Trainer:
    """Policy, frozen reference, optimiser, generators and step counter of one run."""

    def __init__(self, run: RunConfig, games: GameSet, estimator: Any = None) -> None:
        self.run = run
        self.games = games
        self.env = environment_of(run)
        self.env.prepare(games)
        p, cfg = run.protocol, run.backend.local
        self.prompts = PromptSettings(p.history_length, p.max_prompt_length, cfg.vocab_size,
                                      view=self.env.view)
        self.tgen = torch.Generator().manual_seed(int(run.seed) * 1_000_003 + TRAIN_TAG)
        self.rng = np.random.default_rng([TRAIN_TAG, int(p.env_seed) + int(run.seed)])
        shape = PolicyShape(cfg.vocab_size, cfg.embed_dim, cfg.hidden_dim, cfg.encoder)
        self.policy = ActionScorer(shape, self.tgen)
        self.ref = self._frozen_copy()
        # fused: ~4x the speed of the default per-parameter loop on CPU
        self.optim = torch.optim.Adam(self.policy.parameters(), lr=p.lr, fused=True)
        self.estimator = estimator if estimator is not None else get_estimator(
            run.estimator.name, **dict(run.estimator.params))
        self.step = 0
        self.train_pool = EnginePool(p.max_steps, self.env.open_engine)
        self.eval_pool = EnginePool(p.max_steps, self.env.open_engine)
        self.timer = Timer()
        self.warm_start_provenance: dict[str, Any] | None = None
        """Where :meth:`initialise`'s warm start came from (for ``run.json``)."""

    def _frozen_copy(self) -> ActionScorer:
        ref = copy.deepcopy(self.policy).eval()
        for q in ref.parameters():
            q.requires_grad_(False)
        return ref

    def initialise(self) -> dict[str, float]:
        """Fresh start: the optional warm start, then the reference := the initial policy.

        Not called on resume (the checkpoint holds both). Returns warm-start statistics.
        """
        cfg = self.run.backend.local
        t0 = time.perf_counter()
        demos, epochs = self.env.warm_start(self.run)
        done = warm_start(self.policy, self.games.train, self.train_pool, self.prompts,
                          demos, epochs, cfg.warmstart_lr,
                          self.run.seed, self.tgen, cache=self.games.root / WARMSTART_CACHE)
        self.timer.add("warm_start", time.perf_counter() - t0)
        self.warm_start_provenance = done.provenance()
        self.ref = self._frozen_copy()
        return dict(done.stats)

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (see :mod:`.checkpoint`)."""
        return {"step": self.step, "policy": self.policy.state_dict(),
                "ref": self.ref.state_dict(), "optim": self.optim.state_dict(),
                "rng": self.rng.bit_generator.state, "tgen": self.tgen.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.step = int(state["step"])
        self.policy.load_state_dict(state["policy"])
        self.ref.load_state_dict(state["ref"])
        self.optim.load_state_dict(state["optim"])
        self.rng.bit_generator.state = state["rng"]
        self.tgen.set_state(state["tgen"])

    # -- rollouts ---------------------------------------------------------------------------
    def collect(self, step: int) -> list[Episode]:
        """The training episodes of ``step``: distinct games x ``group_size`` rollouts.

        The games of a round play in lockstep (one policy batch); rounds (rollout indices)
        follow one another on the same engines, so a run opens one engine per game: opening
        one costs about as much as 10-15 steps, more than batching rollouts saves.
        """
        p = self.run.protocol
        train = self.games.train
        b = min(p.train_batch_size, len(train))
        tasks = self.rng.choice(len(train), size=b, replace=False)
        games = [train[int(t)] for t in tasks]
        uids = [f"{step}-{slot}" for slot in range(b)]
        self.policy.eval()
        episodes: list[Episode] = []
        logits_cache: dict = {}  # the policy does not change within a step's rollouts
        for r in range(p.group_size):
            episodes += play(self.policy, self.train_pool, games, uids, [r] * b,
                             p.train_temperature, self.rng, self.prompts, self.timer,
                             slots=[0] * b, logits_cache=logits_cache)
        return episodes

    def evaluate(self, step: int) -> dict[str, float]:
        """Held-out success at ``step``: ``val/success_rate``, per task type, ``val/length``."""
        p = self.run.protocol
        held = self.games.eval
        if not held:
            return {}
        rng = np.random.default_rng([EVAL_TAG, int(self.run.seed), int(step)])
        n = p.val_batch_size
        self.policy.eval()
        episodes = play(self.policy, self.eval_pool, [held[i % len(held)] for i in range(n)],
                        [f"val-{i}" for i in range(n)], [i // len(held) for i in range(n)],
                        p.val_temperature, rng, self.prompts, self.timer)  # slot = rollout
        return success_metrics(episodes, "val", self.env.task_metric_names())

    # -- update -----------------------------------------------------------------------------
    def train_step(self, on_rollouts: Callable[[int, list[Episode]], None] | None = None
                   ) -> dict[str, float]:
        """Run step ``self.step + 1``: rollouts, advantages, update. Returns its metrics.

        ``on_rollouts(step, episodes)`` is called after the rollouts, before any update.
        """
        k = self.step + 1
        p = self.run.protocol
        episodes = self.collect(k)
        if on_rollouts is not None:
            on_rollouts(k, episodes)
        metrics = episode_metrics(episodes, p.invalid_action_penalty,
                                  self.env.task_metric_names())
        t0 = time.perf_counter()
        rows = [(e, t, turn) for e in episodes for t, turn in enumerate(e.turns)]
        inputs = collate([turn.inputs for _, _, turn in rows])
        chosen = torch.tensor([turn.chosen for _, _, turn in rows], dtype=torch.int64)
        old_logp = torch.tensor([turn.logprob for _, _, turn in rows], dtype=torch.float32)
        ref_logp, phi = self._reference(inputs, chosen)
        t1 = time.perf_counter()
        self.timer.add("reference", t1 - t0)
        passed = self._passed(inputs, k)
        adv, diag = self._advantages(rows, phi, passed)
        metrics.update({f"adv/{name}": float(v) for name, v in diag.items()})
        batch = self._update_batch(UpdateBatch(inputs, chosen, old_logp, ref_logp, adv),
                                   passed, metrics)
        t2 = time.perf_counter()
        self.timer.add("estimator", t2 - t1)
        metrics.update(ppo_update(self.policy, self.optim, batch, self.run.protocol,
                                  self.tgen))
        self.timer.add("update", time.perf_counter() - t2)
        self.step = k
        return metrics

    def _reference(self, inputs: Any, chosen: torch.Tensor, chunk: int = 256
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference log-probs (N,) and ``phi`` (N, H): the frozen encoder's last state."""
        logps, phis = [], []
        with torch.inference_mode(), self.ref.frozen():
            for s in range(0, len(chosen), chunk):
                rows = torch.arange(s, min(s + chunk, len(chosen)))
                logits, h = self.ref(inputs.select(rows))
                logps.append(chosen_logprobs(logits, chosen[rows],
                                             self.run.protocol.train_temperature)[0])
                phis.append(h)
        return torch.cat(logps), torch.cat(phis)

    def _passed(self, inputs: Any, step: int) -> np.ndarray | None:
        """``(M,)`` the batch verl-agent's ``fit`` would pass to the advantage (padded with
        copies and load-balanced: :mod:`.verl_batch`) when ``batch_world_size`` is set,
        else None. The copies are drawn from a generator of their own, keyed by (seed,
        step), so the rollouts' generators and step-1 identity are untouched."""
        cfg = self.run.backend.local
        if cfg.batch_world_size == 0:
            return None
        rng = np.random.default_rng([PAD_TAG, int(self.run.seed), int(step)])
        # attention_mask.sum(-1) of verl's row: the prompt's tokens and the response's;
        # here the response is the chosen action, one token (see .ppo)
        seqlens = (inputs.lengths + 1).tolist()
        try:
            return passed_rows(seqlens, cfg.batch_world_size, cfg.batch_micro_size, rng)
        except PaddingUndefined as err:
            raise UserError(f"step {step}: {err} (verl-agent's padding is undefined)",
                            key="backend.local.batch_micro_size",
                            value=cfg.batch_micro_size) from None

    @staticmethod
    def _update_batch(turns: UpdateBatch, passed: np.ndarray | None,
                      metrics: dict[str, float]) -> UpdateBatch:
        """What the update trains on: ``turns`` (one per turn row, ``adv`` already
        ``(M,)``) or, with ``passed`` (``(M,)`` row indices), the passed batch, copies
        included, as verl-agent's actor update trains on it; logs ``adv/padding_rows``
        (the copies) and ``adv/passed_rows`` (``M``)."""
        if passed is None:
            return turns
        idx = torch.as_tensor(passed)
        metrics.update({"adv/padding_rows": float(len(passed) - len(turns.chosen)),
                        "adv/passed_rows": float(len(passed))})
        return UpdateBatch(turns.inputs.select(idx), turns.chosen[idx], turns.old_logp[idx],
                           turns.ref_logp[idx], turns.adv)

    def _advantages(self, rows: Sequence[tuple[Episode, int, Any]], phi: torch.Tensor,
                    passed: np.ndarray | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """Advantages from the arm's estimator, one per row (N,) or, with ``passed``
        (``(M,)`` row indices), one per passed row (M,); and its diagnostics.

        Raw turn rewards and validity go in; the estimator applies its ``invalid_penalty``
        (the protocol's ``invalid_action_penalty``, bound at run resolution)."""
        batch = StepBatch(
            task_uid=[e.task_uid for e, _, _ in rows],
            traj_uid=[f"{e.task_uid}-{e.rollout}" for e, _, _ in rows],
            step=np.array([t for _, t, _ in rows], dtype=np.int64),
            anchor_obs=[turn.observation for _, _, turn in rows],
            reward=torch.tensor([turn.reward for _, _, turn in rows], dtype=torch.float64),
            valid=np.array([turn.valid for _, _, turn in rows], dtype=bool),
            phi=phi, rows=passed,
        )
        out = self.estimator(batch)
        return out.advantages.detach().to(torch.float32), dict(out.diagnostics)
