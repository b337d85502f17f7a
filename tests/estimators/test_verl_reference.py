"""The shipped arms against the reference trainers' semantics (issue 11).

- the five shipped arms (as ``arms/*.yaml`` resolve them) equal the loop transcription
  of the semantics (:mod:`.naive`) to 1e-5 on verl-agent-shaped batches with invalid
  actions, revisits, singleton buckets and a one-trajectory task, rows in gather or in
  balanced (shuffled) order;
- GRPO through the verl adapter equals verl 0.9.1's ``compute_grpo_outcome_advantage``
  fed verl-agent's per-row scores, on a real ``DataProto``;
- on a batch padded as verl-agent's ``adjust_batch`` pads it, how far ccpo-lab's GRPO
  (unique rows; copies share their row's advantage) is from verl's (copies counted);
- with ``CCPO_LAB_VERL_AGENT`` pointing at a verl-agent checkout (796ed31): GRPO and
  GiGPO through ccpo-lab's hook equal verl-agent's own functions on the same batch.

verl computes in float32 and ccpo-lab in float64: a group of equal scores that float32
cannot represent (all rows invalid, all -0.1) gives rounding noise in verl and exactly 0
here (the one intended difference); those groups are checked apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ccpo_lab.config.arms import arm_names, load_arm
from ccpo_lab.estimators import StepBatch, get_estimator

from .conftest import agent_columns
from .naive import naive_advantages

REPO = Path(__file__).resolve().parents[2]
SHIPPED = arm_names(REPO / "arms")
ENV_CHECKOUT = "CCPO_LAB_VERL_AGENT"
STEP_KEY = "ccpo_lab_step"
PENALTY = 0.1


def shuffled(cols: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    perm = rng.permutation(len(cols["task_uid"]))
    return {k: (v[perm] if isinstance(v, np.ndarray) else [v[i] for i in perm])
            for k, v in cols.items()}


def step_batch(cols: dict[str, Any], dtype: torch.dtype = torch.float64) -> StepBatch:
    return StepBatch(task_uid=cols["task_uid"], traj_uid=cols["traj_uid"], step=cols["step"],
                     anchor_obs=cols["anchor_obs"],
                     reward=torch.tensor(cols["reward"], dtype=dtype), valid=cols["valid"],
                     phi=torch.tensor(cols["phi"], dtype=torch.float64))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("arm", SHIPPED)
def test_shipped_arm_equals_the_reference_semantics(arm: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cols = agent_columns(rng, n_tasks=5, n_traj=4, max_len=10, n_loc=4, p_invalid=0.15)
    assert not cols["valid"].all() and len(set(cols["task_uid"])) == 5
    if seed % 2:
        cols = shuffled(cols, rng)  # verl's balance_batch reorders the rows
    a = load_arm(arm, REPO / "arms").estimator
    got = get_estimator(a.name, **a.params)(step_batch(cols)).advantages.numpy()
    if a.params["semantics"] == "as-run":  # the rows as passed, in this order (issue 30)
        from .naive_asrun import as_run_advantages
        from .test_as_run import noisy_rows

        want = as_run_advantages(a.name, a.params, cols["task_uid"], cols["traj_uid"],
                                 cols["step"], cols["anchor_obs"], cols["reward"],
                                 cols["valid"], cols["phi"])
        keep = ~noisy_rows(cols)
        np.testing.assert_allclose(got[keep], want[keep], rtol=1e-4, atol=1e-4)
        return
    want = naive_advantages(a.name, a.params, cols["task_uid"], cols["traj_uid"], cols["step"],
                            cols["anchor_obs"], cols["reward"], cols["valid"], cols["phi"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- verl's DataProto
def agent_arrays(cols: dict[str, Any], rng: np.random.Generator, penalty: float = PENALTY,
                 gamma: float = 0.95, prompt_len: int = 6, resp_len: int = 5
                 ) -> dict[str, np.ndarray]:
    """A verl-agent training batch as arrays: tensors of the rollout (left-padded prompts,
    right-padded responses) and the non-tensor columns its multi-turn loop writes."""
    n = len(cols["task_uid"])
    plen = rng.integers(1, prompt_len + 1, size=n)
    rlen = rng.integers(1, resp_len + 1, size=n)
    pmask = (np.arange(prompt_len)[None, :] >= prompt_len - plen[:, None]).astype(np.int64)
    rmask = (np.arange(resp_len)[None, :] < rlen[:, None]).astype(np.int64)
    prompts = rng.integers(3, 100, size=(n, prompt_len)) * pmask
    responses = rng.integers(3, 100, size=(n, resp_len)) * rmask
    attention = np.concatenate([pmask, rmask], axis=1)
    episode: dict[str, float] = {}
    length: dict[str, int] = {}
    for tj, r in zip(cols["traj_uid"], cols["reward"], strict=True):
        episode[tj] = episode.get(tj, 0.0) + float(r)
        length[tj] = length.get(tj, 0) + 1
    traj = list(cols["traj_uid"])
    return {
        "prompts": prompts, "responses": responses,
        "input_ids": np.concatenate([prompts, responses], axis=1),
        "attention_mask": attention,
        "position_ids": np.clip(np.cumsum(attention, axis=1) - 1, 0, None),
        "uid": np.asarray(cols["task_uid"], dtype=object),
        "traj_uid": np.asarray(traj, dtype=object),
        "anchor_obs": np.asarray(cols["anchor_obs"], dtype=object),
        "rewards": np.asarray([np.float32(r) for r in cols["reward"]], dtype=object),
        "is_action_valid": np.asarray(cols["valid"], dtype=bool),
        "active_masks": np.ones(n, dtype=object),
        "episode_rewards": np.asarray([np.float32(episode[t]) for t in traj], dtype=object),
        "episode_lengths": np.asarray([np.float32(length[t]) for t in traj], dtype=object),
        "data_source": np.asarray(["alfworld"] * n, dtype=object),
        STEP_KEY: np.asarray(cols["step"], dtype=np.int64),
        "penalty": np.asarray(penalty), "gamma": np.asarray(gamma),
    }


def dataproto(arrays: dict[str, np.ndarray]) -> Any:
    """verl 0.9.1's DataProto of :func:`agent_arrays`, with verl-agent's token-level
    rewards: the episode reward on the last response token, minus the row's penalty."""
    from verl import DataProto

    tensor_keys = ("prompts", "responses", "input_ids", "attention_mask", "position_ids")
    tensors = {k: torch.from_numpy(arrays[k]) for k in tensor_keys}
    resp = tensors["responses"].shape[1]
    mask = tensors["attention_mask"][:, -resp:]
    tensors["response_mask"] = mask
    last = mask.sum(-1) - 1
    score = torch.tensor([float(r) for r in arrays["episode_rewards"]], dtype=torch.float32)
    score = score - float(arrays["penalty"]) * torch.from_numpy(
        ~arrays["is_action_valid"]).to(torch.float32)
    tlr = torch.zeros(mask.shape, dtype=torch.float32)
    tlr[torch.arange(len(score)), last] = score
    tensors["token_level_rewards"] = tlr
    non = {k: v for k, v in arrays.items() if k not in tensor_keys + ("penalty", "gamma")}
    return DataProto.from_dict(tensors=tensors, non_tensors=non)


def constant_groups(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows of groups (``keys``) of >= 2 rows whose ``values`` are all equal."""
    out = np.zeros(len(keys), dtype=bool)
    for k in set(keys.tolist()):
        rows = keys == k
        out[rows] = rows.sum() > 1 and bool(np.all(values[rows] == values[rows][0]))
    return out


EPS32 = float(np.finfo(np.float32).eps)


def float32_bound(keys: np.ndarray, values: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Per row, what float32 arithmetic can resolve of a group-standardised value:
    ``4 eps32 max|v| / (std + eps)`` over the row's group (``keys``). A group of scores
    near 10 with a std of 0.03 (ten successes and one invalid action) gives ~1.6e-4:
    the reference itself cannot be closer than that to the exact value there."""
    out = np.zeros(len(keys))
    for k in set(keys.tolist()):
        rows = keys == k
        v = values[rows].astype(np.float64)
        std = v.std(ddof=1) if len(v) > 1 else 1.0
        out[rows] = 4 * EPS32 * np.abs(v).max() / (std + eps)
    return out


def compare(ours: np.ndarray, theirs: np.ndarray, const: np.ndarray, tol: float = 1e-5,
            bound: np.ndarray | None = None) -> float:
    """Assert agreement to ``tol`` (plus the reference's float32 ``bound`` per row, when
    given) off the constant groups and ours == 0 on them; return the largest difference
    off them."""
    assert (ours[const] == 0).all()
    limit = tol + (0.0 if bound is None else bound)
    diff = np.abs(ours - theirs)
    bad = ~const & (diff > limit + tol * np.abs(theirs))
    assert not bad.any(), (f"{int(bad.sum())} rows differ beyond {tol} (+ float32 bound): "
                           f"max {diff[bad].max():.3g} at rows {np.flatnonzero(bad)[:8]}")
    return float(diff[~const].max())


@pytest.mark.parametrize("seed", range(4))
def test_grpo_through_the_adapter_equals_verl(seed: int) -> None:
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    from ccpo_lab.backends.verl.agent import advantage as adapter

    rng = np.random.default_rng(100 + seed)
    cols = shuffled(agent_columns(rng, n_tasks=6, n_traj=8, max_len=20, p_invalid=0.1), rng)
    arrays = agent_arrays(cols, rng)
    data = dataproto(arrays)
    mask = data.batch["response_mask"]
    want, _ = core_algos.compute_grpo_outcome_advantage(
        data.batch["token_level_rewards"], mask, index=data.non_tensor_batch["uid"])
    keys = adapter.DataProtoKeys(step=STEP_KEY, reward="rewards")
    adv, _ = adapter.compute_token_advantages(data, "grpo", {"invalid_penalty": PENALTY},
                                              keys=keys)
    assert adv.shape == want.shape and adv.dtype == torch.float32
    assert bool((adv[mask == 0] == 0).all())
    score = data.batch["token_level_rewards"].sum(-1).numpy()
    task = np.asarray(cols["task_uid"])
    compare(adv[:, 0].numpy(), want[:, 0].numpy(), constant_groups(task, score),
            bound=float32_bound(task, score))


def pad_like_adjust_batch(data: Any, divisor: int, rng: np.random.Generator) -> Any:
    """verl-agent's ``adjust_batch(mode="copy")``: random distinct rows appended until the
    batch size is a multiple of ``divisor``."""
    from verl import DataProto

    extra = (-len(data)) % divisor
    dup = rng.choice(len(data), extra, replace=False)
    return DataProto.concat([data, data.select_idxs(dup)])


def test_padded_batch_difference_from_verl() -> None:
    # ALFWorld-sized: 16 tasks x 8 rollouts, up to 50 turns; padded to a multiple of 256
    # (8 GPUs x micro-batch 32). verl counts the copies in each group's mean and std;
    # ccpo-lab computes on the unique rows and gives each copy its row's advantage.
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    from omegaconf import OmegaConf

    from ccpo_lab.backends.verl.agent import patches as P

    rng = np.random.default_rng(11)
    cols = agent_columns(rng, n_tasks=16, n_traj=8, max_len=50, n_loc=25, p_invalid=0.1,
                         one_trajectory_task=False)
    data = dataproto(agent_arrays(cols, rng))
    padded = pad_like_adjust_batch(data, 256, rng)
    n, extra = len(data), len(padded) - len(data)
    assert 0 < extra < 256
    want, _ = core_algos.compute_grpo_outcome_advantage(
        padded.batch["token_level_rewards"], padded.batch["response_mask"],
        index=padded.non_tensor_batch["uid"])
    config = OmegaConf.create({"actor_rollout_ref": {"actor": {
        "use_invalid_action_penalty": True, "invalid_action_penalty_coef": PENALTY}}})
    P.STATE = P.HookState()
    ours = P.ccpo_lab_advantage(padded, "grpo", {}, config).batch["advantages"][:, 0]
    unpadded, _ = core_algos.compute_grpo_outcome_advantage(
        data.batch["token_level_rewards"], data.batch["response_mask"],
        index=data.non_tensor_batch["uid"])
    score = data.batch["token_level_rewards"].sum(-1).numpy()
    task = np.asarray(cols["task_uid"])
    compare(ours[:n].numpy(), unpadded[:, 0].numpy(), constant_groups(task, score),
            bound=float32_bound(task, score))  # = verl without the copies
    torch.testing.assert_close(ours[n:], ours[torch.as_tensor(
        [int(np.flatnonzero((np.asarray(cols["traj_uid"]) == t)
                            & (np.asarray(cols["step"]) == s))[0])
         for t, s in zip(padded.non_tensor_batch["traj_uid"][n:],
                         padded.non_tensor_batch[STEP_KEY][n:], strict=True)])])
    diff = (ours - want[:, 0]).abs()
    rel = float(diff.max() / want[:, 0].abs().max())
    print(f"\npadded batch: {n} rows + {extra} copies ({extra / n:.1%}); |ccpo-lab - verl| "
          f"max {float(diff.max()):.4f}, mean {float(diff.mean()):.5f} (max |A| "
          f"{float(want[:, 0].abs().max()):.2f}: {rel:.2%})")
    # the copies move each group's statistics a little: a visible, bounded difference
    assert 1e-4 < float(diff.max()) < 0.25


# ----------------------------------------------------------------------- verl-agent itself
@pytest.mark.verl_agent
@pytest.mark.parametrize("seed", range(3))
def test_hook_equals_verl_agent_own_functions(seed: int, tmp_path: Path) -> None:
    checkout = os.environ.get(ENV_CHECKOUT)
    if not checkout:
        pytest.skip(f"{ENV_CHECKOUT} does not point at a verl-agent checkout")
    if not (Path(checkout) / "gigpo" / "core_gigpo.py").is_file():
        pytest.skip(f"{ENV_CHECKOUT}={checkout} holds no gigpo/core_gigpo.py")
    rng = np.random.default_rng(200 + seed)
    cols = agent_columns(rng, n_tasks=6, n_traj=8, max_len=20, n_loc=6, p_invalid=0.1)
    arrays = agent_arrays(cols, rng)
    src, dst = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(src, **arrays)
    script = Path(__file__).with_name("verl_agent_reference.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), checkout, str(src), str(dst)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(np.load(dst))
    task = np.asarray(cols["task_uid"])
    bucket = np.asarray([f"{t}|{o}" for t, o in zip(task, cols["anchor_obs"], strict=True)])
    ep_bound = float32_bound(task, out["score"])
    const_ep = constant_groups(task, out["score"])
    worst_grpo = compare(out["ccpo_lab_grpo"], out["verl_agent_grpo"], const_ep,
                         bound=ep_bound)
    # GiGPO = episode term + step term: rows in a constant episode group or a constant
    # step bucket (verl-agent: float32 noise there, ccpo-lab: 0) are reported apart
    const_step = constant_groups(bucket, out["step_rewards"])
    both = const_ep | const_step
    step_bound = float32_bound(bucket, out["step_rewards"])
    worst_gigpo = compare(np.where(both, 0.0, out["ccpo_lab_gigpo"]),
                          np.where(both, 0.0, out["verl_agent_gigpo"]), both,
                          bound=ep_bound + step_bound)
    diff = np.abs(out["ccpo_lab_gigpo"] - out["verl_agent_gigpo"])
    noise = float(diff[both].max()) if both.any() else 0.0
    raw = max(float(np.abs(out["ccpo_lab_grpo"] - out["verl_agent_grpo"]).max()),
              float(diff[~both].max()))
    within = int((np.maximum(np.abs(out["ccpo_lab_grpo"] - out["verl_agent_grpo"]),
                             np.where(both, 0.0, diff)) <= 1e-5).sum())
    print(f"\nverl-agent {checkout}: {len(task)} rows; max |ccpo-lab - verl-agent| GRPO "
          f"{worst_grpo:.2e}, GiGPO {worst_gigpo:.2e} ({within}/{len(task)} rows within "
          f"1e-5; the others within the reference's float32 resolution; max {raw:.2e}); "
          f"float32 noise on constant groups {noise:.2e} ({int(both.sum())} rows)")


def test_hook_takes_the_trainers_penalty() -> None:
    from omegaconf import OmegaConf

    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.estimators import ParamError

    def config(use: bool, coef: float) -> Any:
        return OmegaConf.create({"actor_rollout_ref": {"actor": {
            "use_invalid_action_penalty": use, "invalid_action_penalty_coef": coef}}})

    assert P.estimator_params({}, config(True, 0.25)) == {"invalid_penalty": 0.25}
    assert P.estimator_params({"invalid_penalty": 0.0}, config(False, 0.1)) == {
        "invalid_penalty": 0.0}
    with pytest.raises(ParamError, match="differs from the trainer's invalid-action penalty"):
        P.estimator_params({"invalid_penalty": 0.1}, config(False, 0.1))


# ------------------------------------------------------------ as run (issue 30): the real batch
def run_reference(checkout: str, arrays: dict[str, np.ndarray], tmp_path: Path,
                  *extra: str) -> dict[str, np.ndarray]:
    src, dst = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(src, **arrays)
    script = Path(__file__).with_name("verl_agent_reference.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), checkout, str(src), str(dst), *extra],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(dst, allow_pickle=False))


def checkout_or_skip() -> str:
    checkout = os.environ.get(ENV_CHECKOUT)
    if not checkout or not (Path(checkout) / "gigpo" / "core_gigpo.py").is_file():
        pytest.skip(f"{ENV_CHECKOUT} does not point at a verl-agent checkout")
    return checkout


@pytest.mark.verl_agent
@pytest.mark.parametrize(("seed", "world", "micro"), [(0, 2, 8), (1, 4, 16), (2, 8, 32)])
def test_as_run_equals_verl_agent_on_the_batch_fit_passes(seed: int, world: int, micro: int,
                                                           tmp_path: Path) -> None:
    """GRPO and GiGPO as run (ccpo-lab's hook) against verl-agent's own functions on a
    batch padded by verl-agent's ``adjust_batch`` and reordered by verl's
    ``get_seqlen_balanced_partitions``; the published CCPO arms as run against the
    transcription of the authors' semantics (:mod:`.naive_asrun`) on the same rows."""
    from .naive_asrun import as_run_advantages

    checkout = checkout_or_skip()
    rng = np.random.default_rng(300 + seed)
    cols = agent_columns(rng, n_tasks=8, n_traj=6, max_len=25, n_loc=8, p_invalid=0.1,
                         d=16)
    arrays = {**agent_arrays(cols, rng), "phi": cols["phi"].astype(np.float32)}
    out = run_reference(checkout, arrays, tmp_path, str(world), str(micro), str(seed))
    n, m = len(cols["task_uid"]), len(out["uid"])
    assert m % (world * micro) == 0 and m > n  # padded; and reordered:
    assert not np.array_equal(out["traj_uid"][:n], np.asarray(cols["traj_uid"]))
    worst: dict[str, float] = {}
    for name in ("grpo", "gigpo"):
        diff = np.abs(out[f"ccpo_lab_{name}_as_run"] - out[f"verl_agent_{name}"])
        worst[f"{name} as-run"] = float(diff.max())
        assert float(diff.max()) <= 1e-6, (name, float(diff.max()))
        worst[f"{name} described"] = float(np.abs(out[f"ccpo_lab_{name}"]
                                                  - out[f"verl_agent_{name}"]).max())
    task, traj = list(out["uid"]), list(out["traj_uid"])
    turn = [int(t) for t in out[STEP_KEY]]
    for arm in ("ccpo_return_hard", "ccpo_global_successor", "ccpo_return_hard_fbjw"):
        flags = {"ccpo_return_hard": {}, "ccpo_return_hard_fbjw": {"backoff_task": True,
                                                                   "jweight_c": 1.0},
                 "ccpo_global_successor": {"gate": "global", "target": "successor-node"}}
        from ccpo_lab.estimators import resolve_params
        p = resolve_params("ccpo", {"gamma": 0.95, **flags[arm], "semantics": "as-run"})
        want = as_run_advantages("ccpo", p, task, traj, turn, list(out["anchor_obs"]),
                                 out["rewards"], out["is_action_valid"],
                                 out["phi"].astype(np.float64))
        got = out[f"ccpo_lab_{arm}_as_run"]
        noisy = noisy_episode_rows(task, traj, turn, out["rewards"], out["is_action_valid"])
        diff = np.abs(got - want)[~noisy]
        worst[f"{arm} as-run vs transcription"] = float(diff.max())
        assert float(diff.max()) <= 1e-4, (arm, float(diff.max()))
        worst[f"{arm} described vs as-run"] = float(np.abs(out[f"ccpo_lab_{arm}"] - got).max())
    print(f"\npassed batch: {n} rows + {m - n} copies, {world} partitions; max |diff| "
          + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))


def noisy_episode_rows(task: list[str], traj: list[str], turn: list[int], rewards: np.ndarray,
                       valid: np.ndarray, penalty: float = PENALTY) -> np.ndarray:
    """Rows of tasks whose passed rows all carry one score (float32 noise, exact 0)."""
    total: dict[str, dict[int, float]] = {}
    for tj, t, r in zip(traj, turn, rewards, strict=True):
        total.setdefault(tj, {})[t] = float(r)
    score = np.array([sum(total[tj].values()) for tj in traj]) - penalty * (
        1.0 - np.asarray(valid, dtype=float))
    return constant_groups(np.asarray(task), score)
