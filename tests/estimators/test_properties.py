"""Property tests (hypothesis): agreement with the loop implementation and with verl,
row-permutation invariance, phi-independence at rho = 0, lambda = 1 under the global
gate, finite outputs on degenerate batches, float32 and float64."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccpo_lab.estimators import StepBatch, get_estimator

from .conftest import random_columns
from .naive import naive_advantages

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

ccpo_flags = st.fixed_dictionaries({
    "gate": st.sampled_from(["hard", "global"]),
    "target": st.sampled_from(["return", "successor-node"]),
    "rho": st.sampled_from([0.0, 0.6]),
    "backoff_task": st.booleans(),
    "backoff_rho": st.sampled_from([1.0, 0.5]),
    "jweight_c": st.sampled_from([0.0, 1.0]),
    "edge_w": st.sampled_from([0.0, 1.0]),
    "step_norm": st.sampled_from(["mode", "task", "none"]),
    "invalid_penalty": st.sampled_from([0.1, 0.0, 0.25]),
    "phi": st.sampled_from(["hidden", "hidden+ctx"]),
    "whiten_k": st.sampled_from([0, 1]),
    "mode": st.sampled_from(["mean_std_norm", "mean_norm"]),
    "tau": st.sampled_from([0.15, 1.0]),
    "step_advantage_w": st.sampled_from([1.0, 0.5]),
})
shapes = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "n_tasks": st.integers(1, 3),
    "n_traj": st.integers(1, 4),
    "max_len": st.integers(1, 5),
    "n_obs": st.integers(1, 4),
})


def columns(shape: dict[str, int], d: int = 6) -> dict[str, Any]:
    rng = np.random.default_rng(shape["seed"])
    return random_columns(rng, shape["n_tasks"], shape["n_traj"], shape["max_len"],
                          shape["n_obs"], d=d)


def batch_of(cols: dict[str, Any], dtype: torch.dtype = torch.float64,
             with_phi: bool = True) -> StepBatch:
    return StepBatch(task_uid=cols["task_uid"], traj_uid=cols["traj_uid"], step=cols["step"],
                     anchor_obs=cols["anchor_obs"],
                     reward=torch.tensor(cols["reward"], dtype=dtype), valid=cols["valid"],
                     phi=torch.tensor(cols["phi"], dtype=torch.float64) if with_phi else None)


def naive(name: str, params: dict[str, Any], cols: dict[str, Any]) -> np.ndarray:
    return naive_advantages(name, params, cols["task_uid"], cols["traj_uid"], cols["step"],
                            cols["anchor_obs"], cols["reward"], cols["valid"], cols["phi"])


@SETTINGS
@given(shape=shapes, flags=ccpo_flags)
def test_ccpo_matches_loop_implementation(shape: dict[str, int], flags: dict[str, Any]) -> None:
    cols = columns(shape)
    est = get_estimator("ccpo", **flags)
    got = est(batch_of(cols)).advantages.numpy()
    # 1e-7: a task whose credits are all equal is standardised by a std of rounding noise
    # (~1e-16) plus epsilon (1e-6), which lifts that noise to ~1e-10 on either side
    np.testing.assert_allclose(got, naive("ccpo", est.params, cols), rtol=1e-7, atol=1e-7)


@SETTINGS
@given(shape=shapes, mode=st.sampled_from(["mean_std_norm", "mean_norm"]),
       name=st.sampled_from(["grpo", "gigpo"]), penalty=st.sampled_from([0.1, 0.0, 0.25]))
def test_grpo_gigpo_match_loop_implementation(shape: dict[str, int], mode: str,
                                              name: str, penalty: float) -> None:
    cols = columns(shape)
    est = get_estimator(name, mode=mode, invalid_penalty=penalty)
    got = est(batch_of(cols, with_phi=False)).advantages.numpy()
    np.testing.assert_allclose(got, naive(name, est.params, cols), rtol=1e-10, atol=1e-10)


@SETTINGS
@given(shape=shapes, mode=st.sampled_from(["mean_std_norm", "mean_norm"]),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_grpo_equals_verl(shape: dict[str, int], mode: str, dtype: torch.dtype) -> None:
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    cols = columns(shape)
    penalty = 0.1
    if dtype == torch.float32:
        # a dyadic penalty (1/8): every float32 score is exact, so both sides see the same
        # scores (a group of equal non-representable scores is exactly 0 here and float32
        # rounding noise in verl: tests/estimators/test_verl_reference.py)
        penalty = 0.125
    out = get_estimator("grpo", mode=mode, invalid_penalty=penalty)(
        batch_of(cols, dtype, with_phi=False))
    # verl-agent's per-row score on the last response token: the episode reward R (sum of
    # the raw rewards) minus the row's own penalty
    n = len(cols["task_uid"])
    episode = {}
    for tj, r in zip(cols["traj_uid"], cols["reward"], strict=True):
        episode[tj] = episode.get(tj, 0.0) + float(r)
    score = [episode[tj] - penalty * (not ok)
             for tj, ok in zip(cols["traj_uid"], cols["valid"], strict=True)]
    tlr = torch.zeros(n, 3, dtype=dtype)
    tlr[:, 1] = torch.tensor(score, dtype=dtype)
    mask = torch.ones(n, 3, dtype=dtype)
    want, _ = core_algos.compute_grpo_outcome_advantage(
        tlr, mask, np.asarray(cols["task_uid"], dtype=object),
        norm_adv_by_std_in_grpo=mode == "mean_std_norm")
    assert out.advantages.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    np.testing.assert_allclose(out.advantages.numpy(), want[:, 0].numpy(), rtol=tol, atol=tol)


@SETTINGS
@given(shape=shapes, flags=ccpo_flags, perm_seed=st.integers(0, 2**32 - 1))
def test_row_permutation_invariance(shape: dict[str, int], flags: dict[str, Any],
                                    perm_seed: int) -> None:
    cols = columns(shape)
    perm = np.random.default_rng(perm_seed).permutation(len(cols["task_uid"]))
    shuffled = {k: (v[perm] if isinstance(v, np.ndarray) else [v[i] for i in perm])
                for k, v in cols.items()}
    est = get_estimator("ccpo", **flags)
    a = est(batch_of(cols)).advantages.numpy()
    b = est(batch_of(shuffled)).advantages.numpy()
    np.testing.assert_allclose(b, a[perm], rtol=1e-7, atol=1e-7)


@SETTINGS
@given(shape=shapes, flags=ccpo_flags)
def test_rho0_hard_gate_is_independent_of_phi(shape: dict[str, int],
                                              flags: dict[str, Any]) -> None:
    cols = columns(shape)
    est = get_estimator("ccpo", **{**flags, "gate": "hard", "rho": 0.0})
    with_phi = est(batch_of(cols)).advantages
    other = dict(cols, phi=np.random.default_rng(shape["seed"] + 1).normal(size=cols["phi"].shape))
    assert torch.equal(with_phi, est(batch_of(other)).advantages)
    assert torch.equal(with_phi, est(batch_of(cols, with_phi=False)).advantages)


@SETTINGS
@given(shape=shapes, flags=ccpo_flags)
def test_global_gate_forces_lambda_one(shape: dict[str, int], flags: dict[str, Any]) -> None:
    cols = columns(shape)
    a = get_estimator("ccpo", **{**flags, "gate": "global", "rho": 0.0})(batch_of(cols))
    b = get_estimator("ccpo", **{**flags, "gate": "global", "rho": 3.0})(batch_of(cols))
    assert torch.equal(a.advantages, b.advantages)
    lam = a.diagnostics["lambda_mean"]
    assert lam == 1.0 or (np.isnan(lam) and a.diagnostics["live_frac"] == 0)


def degenerate(kind: str) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    cols = random_columns(rng, n_tasks=2, n_traj=3, max_len=4, n_obs=2, d=5)
    n = len(cols["task_uid"])
    if kind == "equal-rewards":
        cols["reward"] = np.full(n, 1.0)
    elif kind == "one-trajectory":
        keep = [i for i in range(n) if cols["traj_uid"][i] == cols["traj_uid"][0]]
        cols = {k: (v[keep] if isinstance(v, np.ndarray) else [v[i] for i in keep])
                for k, v in cols.items()}
    elif kind == "all-singletons":
        cols["anchor_obs"] = [f"unique-{i}" for i in range(n)]
    elif kind == "identical-features":
        cols["phi"] = np.tile(cols["phi"][:1], (n, 1))
    elif kind == "zero-features":
        cols["phi"] = np.zeros_like(cols["phi"])
    return cols


ARMS = [("grpo", {}), ("gigpo", {}),
        ("ccpo", {"gate": "global", "target": "successor-node"}),
        ("ccpo", {"gate": "hard"}),
        ("ccpo", {"gate": "hard", "backoff_task": True, "jweight_c": 1.0}),
        ("ccpo", {"gate": "hard", "rho": 0.7, "backoff_task": True}),
        ("ccpo", {"gate": "global", "whiten_k": 3, "phi": "hidden"})]


@pytest.mark.parametrize("kind", ["equal-rewards", "one-trajectory", "all-singletons",
                                  "identical-features", "zero-features"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_degenerate_batches_are_finite(kind: str, dtype: torch.dtype) -> None:
    cols = degenerate(kind)
    for name, params in ARMS:
        est = get_estimator(name, **params)
        out = est(batch_of(cols, dtype))
        assert out.advantages.dtype == dtype
        assert bool(torch.isfinite(out.advantages).all()), (kind, name, params)
        if kind in ("identical-features", "zero-features", "equal-rewards"):
            np.testing.assert_allclose(out.advantages.to(torch.float64).numpy(),
                                       naive(name, est.params, cols), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("name", "params"), ARMS)
def test_float32_close_to_float64(name: str, params: dict[str, Any]) -> None:
    cols = random_columns(np.random.default_rng(3), d=6)
    est = get_estimator(name, **params)
    a32 = est(batch_of(cols, torch.float32)).advantages
    a64 = est(batch_of(cols, torch.float64)).advantages
    assert a32.dtype == torch.float32 and a64.dtype == torch.float64
    np.testing.assert_allclose(a32.numpy(), a64.numpy(), rtol=1e-4, atol=1e-4)
