"""GiGPO: episode term + anchor-state step term (verl-agent's ``core_gigpo.py``)."""

from __future__ import annotations

import torch

from ccpo_lab.estimators.asrun import (
    anchor_groups,
    episode_term32,
    penalties32,
    step_returns32,
    verl_normalise,
)
from ccpo_lab.estimators.base import Estimator, EstimatorOutput
from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.grouping import (
    anchor_buckets,
    discounted_returns,
    episode_scores,
    episode_term,
    group_count,
    normalise_in_groups,
    percentile,
    row_penalties,
)
from ccpo_lab.estimators.grpo import abs_mean
from ccpo_lab.estimators.params import GiGPOParams


def bucket_diagnostics(sizes: torch.Tensor) -> dict[str, float]:
    """Number, mean size, p90 size and singleton fraction of anchor buckets.

    ``sizes``: ``(B,)`` rows per bucket.
    """
    s = sizes.to(torch.float64)
    return {"n_buckets": float(s.numel()), "bucket_size_mean": float(s.mean()),
            "bucket_size_p90": percentile(s, 90.0),
            "singleton_frac": float((s <= 1).to(torch.float64).mean())}


class GiGPO(Estimator):
    """``A = A_ep + step_advantage_w * A_step``.

    ``A_ep``: GRPO's episode term (:class:`~ccpo_lab.estimators.grpo.GRPO`). ``A_step``:
    the step return ``G_t - invalid_penalty * [row t invalid]`` (``G`` the discounted
    return-to-go of the raw rewards; the penalty is not discounted into earlier turns, as
    verl-agent subtracts it from ``step_rewards`` after computing them) normalised inside
    its anchor bucket ``(task_uid, anchor_obs)``; the bucket mean includes the row itself,
    the standard deviation is unbiased, and a singleton bucket gives 0 (GiGPO's
    ``step_norm_reward``).

    As run (:meth:`compute_as_run`): verl-agent's ``compute_gigpo_outcome_advantage`` on the
    passed batch, in float32: the copies count in the task groups and the anchor buckets;
    each row's step return is the one verl-agent computed before padding (true turn order).
    """

    config: GiGPOParams

    def compute(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        reward = batch.reward.to(torch.float64)
        pen = row_penalties(batch, cfg.invalid_penalty)
        a_ep = episode_term(episode_scores(reward, batch) - pen, batch, cfg.mode, cfg.epsilon)
        g = discounted_returns(reward, batch, cfg.gamma) - pen
        bucket, nb = anchor_buckets(batch)
        a_step = normalise_in_groups(g, bucket, nb, cfg.mode, cfg.epsilon, singleton="self")
        adv = a_ep + cfg.step_advantage_w * a_step
        diag = {"adv_ep_absmean": abs_mean(a_ep), "adv_step_absmean": abs_mean(a_step),
                **bucket_diagnostics(group_count(bucket, nb))}
        dtype = batch.reward.dtype
        return EstimatorOutput(advantages=adv.to(dtype), diagnostics=diag,
                               episode_term=a_ep.to(dtype), step_term=a_step.to(dtype))

    def compute_as_run(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        a_ep = episode_term32(batch, cfg.invalid_penalty, cfg.mode, cfg.epsilon)
        g = (step_returns32(batch, cfg.gamma) - penalties32(batch, cfg.invalid_penalty))
        bucket = anchor_groups(batch)
        a_step = verl_normalise(g[batch.passed.cpu()], bucket, cfg.mode, cfg.epsilon,
                                singleton="self")
        adv = a_ep + cfg.step_advantage_w * a_step
        diag = {"adv_ep_absmean": abs_mean(a_ep), "adv_step_absmean": abs_mean(a_step),
                "passed_rows": float(batch.n_passed),
                **bucket_diagnostics(torch.bincount(bucket))}
        return EstimatorOutput(advantages=adv, diagnostics=diag, episode_term=a_ep,
                               step_term=a_step)
