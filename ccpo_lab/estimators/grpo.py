"""GRPO: the group-normalised episode score alone (verl's ``compute_grpo_outcome_advantage``
fed verl-agent's per-row scores)."""

from __future__ import annotations

import torch

from ccpo_lab.estimators.asrun import episode_term32
from ccpo_lab.estimators.base import Estimator, EstimatorOutput
from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.grouping import episode_scores, episode_term, row_penalties
from ccpo_lab.estimators.params import GRPOParams


def abs_mean(values: torch.Tensor) -> float:
    """Mean absolute value of a 1-d tensor; NaN when empty."""
    return float(values.abs().mean()) if values.numel() else float("nan")


class GRPO(Estimator):
    """Episode term only: ``(S - mean_task) / (std_task + epsilon)`` over the task's rows.

    ``S_i = R(traj_i) - invalid_penalty * [row i invalid]``: the trajectory's episode
    reward (sum of its raw rewards), less the penalty of this row's own action, as
    verl-agent's reward manager and ``apply_invalid_action_penalty`` leave it on the row's
    last response token. Statistics run over the rows of each task group (a singleton
    group has mean 0, std 1; the standard deviation is unbiased; a constant group gives
    0). ``mode=mean_norm`` drops the division. ``gamma`` is unused.

    As run (:meth:`compute_as_run`): verl's ``compute_grpo_outcome_advantage`` as verl-agent
    calls it, on the passed batch (every copy counts in its group), in float32.
    """

    config: GRPOParams

    def compute(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        score = episode_scores(batch.reward.to(torch.float64), batch) - row_penalties(
            batch, cfg.invalid_penalty)
        a_ep = episode_term(score, batch, cfg.mode, cfg.epsilon)
        dtype = batch.reward.dtype
        diag = {"adv_ep_absmean": abs_mean(a_ep), "n_tasks": float(batch.n_tasks),
                "n_trajectories": float(batch.n_traj)}
        return EstimatorOutput(advantages=a_ep.to(dtype), diagnostics=diag,
                               episode_term=a_ep.to(dtype),
                               step_term=torch.zeros_like(batch.reward))

    def compute_as_run(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        a_ep = episode_term32(batch, cfg.invalid_penalty, cfg.mode, cfg.epsilon)
        diag = {"adv_ep_absmean": abs_mean(a_ep), "n_tasks": float(batch.n_tasks),
                "n_trajectories": float(batch.n_traj), "passed_rows": float(batch.n_passed)}
        return EstimatorOutput(advantages=a_ep, diagnostics=diag, episode_term=a_ep,
                               step_term=torch.zeros_like(a_ep))
