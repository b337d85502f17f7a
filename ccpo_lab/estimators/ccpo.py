"""CCPO: GRPO's episode term + a context-conditioned leave-one-trajectory-out step term.

Semantics (from the CCPO reference code, ``ccpo/core_ccpo.py`` at d0076f13 and the CCPO
branch of its trainer patch, on verl-agent 796ed31), per row = one agent turn;
``pen_i = invalid_penalty * [row i invalid]``, ``R`` = the trajectory's raw episode
reward (sum of its raw rewards):

Episode term: GRPO's, on ``S_i = R - pen_i`` (:class:`~ccpo_lab.estimators.grpo.GRPO`).

Targets. ``G`` = discounted return-to-go of the raw rewards. Nodes are the hard buckets
``(task_uid, anchor_obs)``; a node's value ``V(g)`` is the mean over its rows of
``gamma^(T - t) * R`` (``T`` = length of the row's trajectory, ``t`` its turn; ``R``
unpenalised). The successor of a row is the next turn of its trajectory; after the last
turn it is a terminal node worth ``success_value`` if ``|R - success_value| < 1e-9``
(success) and 0 otherwise. ``target = successor-node``: ``TGT = V(next) - pen``;
``target = return``: ``TGT = G - pen`` (the penalty of the row itself, not discounted into
earlier turns).

Buckets. ``gate = hard``: ``(task_uid, anchor_obs)``; ``gate = global``: ``(task_uid,)``
with lambda forced to 1. A bucket with fewer than two distinct trajectories credits no
row, except that with ``backoff_task`` (gate = hard) a row left uncredited is credited
against its task-wide bucket (all rows of its task: peers, median and J are the task's),
with ``rho * backoff_rho``. Credit formulas: :mod:`ccpo_lab.estimators.ccpo_credit`.

Step term. Per credited row ``c = (TGT - (lambda b_loo + (1 - lambda) b_obs)) * J/(J +
jweight_c)`` (J-weighting only when ``jweight_c > 0``); uncredited rows start at 0. Then
``edge_w * z(V(next) - V(cur))`` is added to EVERY row of a task with more than one row,
credited or not (``z`` standardises over the task's rows, unbiased std ``+ epsilon``,
whatever ``mode``; the successor value is not penalised). Then, when ``step_norm`` says so
(``mode``: under ``mode = mean_std_norm``; ``task``: always; ``none``: never), the
credited rows of each task with more than one credited row are standardised (unbiased
std ``+ epsilon``); uncredited rows keep their edge value and a lone credited row its
value. ``A = A_ep + step_advantage_w * A_step``. A constant group of values standardises
to exactly 0 (the reference, in float32, can print rounding noise there).
"""

from __future__ import annotations

import torch

from ccpo_lab.estimators.asrun import (
    episode_rewards32,
    episode_term32,
    occurrences,
    penalties32,
    standardise_credited32,
    step_returns32,
)
from ccpo_lab.estimators.base import Estimator, EstimatorOutput
from ccpo_lab.estimators.batch import StepBatch
from ccpo_lab.estimators.ccpo_credit import Credit, credit_pass
from ccpo_lab.estimators.errors import MissingFeaturesError
from ccpo_lab.estimators.features import Features, build_features
from ccpo_lab.estimators.gigpo import bucket_diagnostics
from ccpo_lab.estimators.grouping import (
    anchor_buckets,
    discounted_returns,
    episode_scores,
    episode_term,
    group_count,
    group_sum,
    row_penalties,
    zscore_in_groups,
)
from ccpo_lab.estimators.grpo import abs_mean
from ccpo_lab.estimators.params import CCPOParams

SUCCESS_TOL = 1e-9
"""A trajectory succeeded when its raw episode reward is within this of ``success_value``."""


def node_values(batch: StepBatch, episode_reward: torch.Tensor, node: torch.Tensor,
                n_nodes: int, gamma: float, success_value: float
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(V(next), V(current))`` per row, ``(N,)`` float64 each.

    ``episode_reward``: ``(N,)`` raw episode rewards ``R`` (no penalty); ``node``:
    ``(N,)`` hard-bucket ids in ``[0, n_nodes)``. See the module docstring.
    """
    t = batch.step_index.to(torch.float64)
    length = batch.traj_len[batch.traj_index].to(torch.float64)
    visit = torch.pow(gamma, length - t) * episode_reward
    value = group_sum(visit, node, n_nodes) / group_count(node, n_nodes).clamp_min(1)
    nxt = batch.next_row
    success = (episode_reward - success_value).abs() < SUCCESS_TOL
    terminal = torch.where(success, torch.full_like(episode_reward, success_value),
                           torch.zeros_like(episode_reward))
    v_next = torch.where(nxt >= 0, value[node[nxt.clamp_min(0)]], terminal)
    return v_next, value[node]


class CCPO(Estimator):
    """Episode term unchanged; the step term of the module docstring.

    As run (:meth:`compute_as_run`), what the CCPO authors' trainer computed on the
    passed batch (:mod:`ccpo_lab.estimators.asrun`): the episode term as verl-agent's
    ``episode_norm_reward`` (float32, copies counted); the step term on the occurrences of
    the passed batch, each row's turn index, successor and ``T - t`` taken from its
    position among its trajectory's passed rows (copies are extra turns; node values,
    buckets, peers, the context block and the whitening all see them), the return target
    the true-order step return verl-agent computed before padding; float64 as the
    authors' numpy, then float32 for their per-task standardisation of the credited rows
    (``torch.mean`` / ``torch.std`` in batch order) and the sum.
    """

    config: CCPOParams

    def compute(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        self._check_features(batch)
        reward = batch.reward.to(torch.float64)
        r_ep = episode_scores(reward, batch)
        pen = row_penalties(batch, cfg.invalid_penalty)
        a_ep = episode_term(r_ep - pen, batch, cfg.mode, cfg.epsilon)
        g = discounted_returns(reward, batch, cfg.gamma) - pen
        step, credit, level, node, n_nodes = self._step_term(batch, r_ep, pen, g)
        if self._standardises():
            step = zscore_in_groups(step, batch.task_index, batch.n_tasks, cfg.epsilon,
                                    credit.credited, small="keep")
        adv = a_ep + cfg.step_advantage_w * step
        diag = self._diagnostics(batch, credit, level, node, n_nodes, a_ep, step)
        dtype = batch.reward.dtype
        return EstimatorOutput(advantages=adv.to(dtype), diagnostics=diag,
                               episode_term=a_ep.to(dtype), step_term=step.to(dtype))

    def compute_as_run(self, batch: StepBatch) -> EstimatorOutput:
        cfg = self.config
        self._check_features(batch)
        occ = occurrences(batch)
        src = batch.passed.cpu()
        a_ep = episode_term32(batch, cfg.invalid_penalty, cfg.mode, cfg.epsilon)
        r_ep = episode_rewards32(batch).to(torch.float64)[src]
        pen = row_penalties(occ, cfg.invalid_penalty)
        g = (step_returns32(batch, cfg.gamma)
             - penalties32(batch, cfg.invalid_penalty))[src].to(torch.float64)
        step, credit, level, node, n_nodes = self._step_term(occ, r_ep, pen, g,
                                                             torch.float64)
        step32 = step.to(torch.float32)
        if self._standardises():
            step32 = standardise_credited32(step32, occ.task_index, credit.credited,
                                            cfg.epsilon)
        adv = a_ep + cfg.step_advantage_w * step32
        diag = self._diagnostics(occ, credit, level, node, n_nodes, a_ep.double(),
                                 step32.double())
        diag["passed_rows"] = float(batch.n_passed)
        return EstimatorOutput(advantages=adv, diagnostics=diag, episode_term=a_ep,
                               step_term=step32)

    def _check_features(self, batch: StepBatch) -> None:
        if self.config.needs_features() and batch.phi is None:
            raise MissingFeaturesError(
                "this CCPO configuration needs the features phi (gate=global or rho > 0 "
                "uses the kernel baseline) and the batch has none", key="phi",
                detail="pass StepBatch(phi=...) (the reference policy's hidden states, "
                "(N, d)), or use gate=hard with rho=0, where phi does not matter")

    def _standardises(self) -> bool:
        cfg = self.config
        return cfg.step_norm == "task" or (cfg.step_norm == "mode"
                                           and cfg.mode == "mean_std_norm")

    def _step_term(self, batch: StepBatch, r_ep: torch.Tensor, pen: torch.Tensor,
                   g: torch.Tensor, feat_dtype: torch.dtype | None = None
                   ) -> tuple[torch.Tensor, Credit, torch.Tensor, torch.Tensor, int]:
        """The step term before its standardisation, ``(N,)`` float64, with the credit,
        the levels and the hard buckets. ``r_ep``, ``pen``, ``g``: ``(N,)`` float64
        episode rewards, penalties and penalised step returns of ``batch``'s rows."""
        cfg = self.config
        node, n_nodes = anchor_buckets(batch)
        v_next = v_cur = None
        if cfg.target == "successor-node" or cfg.edge_w > 0:
            v_next, v_cur = node_values(batch, r_ep, node, n_nodes, cfg.gamma,
                                        cfg.success_value)
        if cfg.target == "successor-node":
            assert v_next is not None
            tgt = v_next - pen
        else:
            tgt = g
        feats = None
        if batch.phi is not None:
            first = node if cfg.gate == "hard" else batch.task_index
            order = torch.arange(batch.n, device=node.device)
            for key in (batch.step_index, batch.traj_index, first):
                order = order[torch.argsort(key[order], stable=True)]
            feats = build_features(batch, cfg.whiten_k, cfg.phi, cfg.ctx_w, order,
                                   feat_dtype)
        credit, level = self._credit(batch, node, n_nodes, tgt, feats)
        lam = credit.lam
        raw = tgt - (lam * credit.b_loo + (1.0 - lam) * credit.b_obs)
        if cfg.jweight_c > 0:
            raw = raw * credit.j / (credit.j + cfg.jweight_c)
        step = torch.where(credit.credited, raw, torch.zeros_like(raw))
        if cfg.edge_w > 0:
            assert v_next is not None and v_cur is not None
            step = step + cfg.edge_w * zscore_in_groups(v_next - v_cur, batch.task_index,
                                                        batch.n_tasks, cfg.epsilon)
        return step, credit, level, node, n_nodes

    def _credit(self, batch: StepBatch, node: torch.Tensor, n_nodes: int, tgt: torch.Tensor,
                feats: Features | None) -> tuple[Credit, torch.Tensor]:
        """Run the level-0 pass and, under ``backoff_task``, the task-wide pass.

        Returns the merged :class:`Credit` and ``(N,)`` int64 levels (-1: no credit,
        0: own bucket, 1: task backoff).
        """
        cfg = self.config
        traj, step = batch.traj_index, batch.step_index
        everyone = torch.ones(batch.n, dtype=torch.bool, device=tgt.device)
        if cfg.gate == "global":
            out = credit_pass(batch.task_index, batch.n_tasks, traj, step, tgt, everyone,
                              feats, cfg.tau, cfg.rho, force_lambda=True)
        else:
            out = credit_pass(node, n_nodes, traj, step, tgt, everyone, feats, cfg.tau,
                              cfg.rho, force_lambda=False)
        level = torch.where(out.credited, 0, -1)
        if cfg.gate == "hard" and cfg.backoff_task and not bool(out.credited.all()):
            # with rho = 0 the task-wide kernel could only feed n_eff of a few rows: skipped
            back = credit_pass(batch.task_index, batch.n_tasks, traj, step, tgt,
                               ~out.credited, feats, cfg.tau,
                               cfg.rho * cfg.backoff_rho, force_lambda=False,
                               kernel_for_diagnostics=False)
            m = back.credited
            for name in ("b_loo", "b_obs", "lam", "n_eff", "j"):
                getattr(out, name)[m] = getattr(back, name)[m]
            out.credited |= m
            level = torch.where(m, 1, level)
        return out, level

    def _diagnostics(self, batch: StepBatch, credit: Credit, level: torch.Tensor,
                     node: torch.Tensor, n_nodes: int, a_ep: torch.Tensor,
                     step: torch.Tensor) -> dict[str, float]:
        on = credit.credited
        lam = credit.lam[on]
        nan = float("nan")
        ep, st = abs_mean(a_ep), abs_mean(step[on])
        diag = {
            "lambda_mean": float(lam.mean()) if lam.numel() else nan,
            "lambda_gt_half": float((lam > 0.5).to(torch.float64).mean()) if lam.numel()
            else nan,
            "n_eff_mean": float(credit.n_eff[on].nanmean()) if lam.numel() else nan,
            "j_mean": float(credit.j[on].mean()) if lam.numel() else nan,
            "live_frac": float(on.to(torch.float64).mean()),
            "backoff_frac": float((level == 1).to(torch.float64).mean()),
            **bucket_diagnostics(group_count(node, n_nodes)),
            "adv_ep_absmean": ep,
            "adv_step_absmean": st,
            "adv_ep_over_step": ep / st if st == st and st > 1e-9 else nan,
        }
        return diag
