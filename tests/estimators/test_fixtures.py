"""Hand-computed fixtures for every estimator and flag (issue 11 semantics).

The worked batch (one task ``T``, gamma = 0.5, invalid-action penalty 0.1); rewards are
RAW environment rewards, C's middle turn is an invalid action:

=====  =====  =========  ==========  =====  =====================  =====================
traj   turn   anchor     raw reward  R      score S = R - pen      step return G - pen
=====  =====  =========  ==========  =====  =====================  =====================
A      0,1,2  s0 s1 s2   0, 0, 10    10     10, 10, 10             2.5, 5, 10
B      0,1    s0 s1      0, 0        0      0, 0                   0, 0
C      0,1,2  s0 s2 s3   0, 0, 0     0      0, -0.1, 0             0, -0.1, 0
=====  =====  =========  ==========  =====  =====================  =====================

The penalty sits on the invalid row alone: never summed over C's trajectory (its other
rows score 0, not -0.1), never discounted into C0's return (0, not -0.05).

Buckets: s0 = {A0, B0, C0}, s1 = {A1, B1}, s2 = {A2, C1}, s3 = {C2} (singleton).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from ccpo_lab.estimators import MissingFeaturesError, StepBatch, get_estimator

from .conftest import rows

ORDER = ["A0", "A1", "A2", "B0", "B1", "C0", "C1", "C2"]


def worked(**extra: Any) -> StepBatch:
    cols = rows(("T", "A", ["s0", "s1", "s2"], [0.0, 0.0, 10.0]),
                ("T", "B", ["s0", "s1"], [0.0, 0.0]),
                ("T", "C", ["s0", "s2", "s3"], [0.0, 0.0, 0.0]),
                invalid={("C", 1)})
    return StepBatch(**{**cols, **extra})


def as_rows(values: dict[str, float]) -> np.ndarray:
    return np.array([values[k] for k in ORDER])


def z(v: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return (v - v.mean()) / (v.std(ddof=1) + eps)


SCORE = as_rows({"A0": 10, "A1": 10, "A2": 10, "B0": 0, "B1": 0, "C0": 0, "C1": -0.1,
                 "C2": 0})
EP_MEAN = (30 - 0.1) / 8
EP = SCORE - EP_MEAN  # the episode term under mean_norm
G = {"A0": 2.5, "A1": 5, "A2": 10, "B0": 0, "B1": 0, "C0": 0, "C1": -0.1, "C2": 0}
CCPO_PLAIN = dict(gamma=0.5, mode="mean_norm", edge_w=0.0, step_norm="none", rho=0.0,
                  gate="hard", target="return")


def adv(name: str, batch: StepBatch | None = None, **params: Any) -> np.ndarray:
    return get_estimator(name, **params)(batch or worked()).advantages.numpy()


# ----------------------------------------------------------------------- 1. episode score
def test_episode_score_is_per_row() -> None:
    np.testing.assert_allclose(adv("grpo", mode="mean_norm"), EP, atol=1e-12)
    np.testing.assert_allclose(adv("grpo"), (SCORE - EP_MEAN) / (SCORE.std(ddof=1) + 1e-6),
                               atol=1e-12)
    # penalty off: the raw episode reward on every row
    raw = as_rows({k: 10.0 if k[0] == "A" else 0.0 for k in ORDER})
    np.testing.assert_allclose(adv("grpo", mode="mean_norm", invalid_penalty=0.0),
                               raw - raw.mean(), atol=1e-12)


def test_grpo_singleton_group() -> None:
    cols = rows(("T", "A", ["s"], [1.0]), ("T", "B", ["s"], [3.0]), ("U", "C", ["s"], [5.0]),
                invalid={("C", 0)})
    got = adv("grpo", StepBatch(**cols))
    sd = math.sqrt(2.0)  # unbiased std of (1, 3)
    single = float(torch.tensor(1.0) + 1e-6)  # verl adds epsilon to a float32 one
    np.testing.assert_allclose(got, [-1 / (sd + 1e-6), 1 / (sd + 1e-6), 4.9 / single],
                               rtol=1e-15)
    assert np.allclose(adv("grpo", StepBatch(**cols), mode="mean_norm"), [-1, 1, 4.9])


def test_all_fail_group_with_invalid_turns_keeps_the_sign() -> None:
    # every trajectory fails (R = 0); X is clean, Y's first turn and Z's last two are
    # invalid. Per-row scores: X 0 0 0 | Y -0.1 0 | Z 0 -0.1 -0.1 (mean -0.0375): a valid
    # row is above the mean, an invalid one below, whichever trajectory it is in. (Summed
    # over the trajectory, the penalty would give Z's valid first turn a negative score.)
    cols = rows(("F", "X", ["a", "b", "c"], [0.0, 0.0, 0.0]),
                ("F", "Y", ["a", "d"], [0.0, 0.0]),
                ("F", "Z", ["a", "e", "f"], [0.0, 0.0, 0.0]),
                invalid={("Y", 0), ("Z", 1), ("Z", 2)})
    s = np.array([0, 0, 0, -0.1, 0, 0, -0.1, -0.1])
    got = adv("grpo", StepBatch(**cols))
    np.testing.assert_allclose(got, z(s), atol=1e-12)
    assert (got[np.array(cols["valid"])] > 0).all() and (got[~np.array(cols["valid"])] < 0).all()
    assert got[5] == pytest.approx(0.0375 / (s.std(ddof=1) + 1e-6))  # Z's valid first turn
    mean_norm = adv("grpo", StepBatch(**cols), mode="mean_norm")
    np.testing.assert_allclose(mean_norm, s + 0.0375, atol=1e-12)


def test_constant_group_is_exactly_zero() -> None:
    # three equal scores of -0.1 (not representable): exactly 0, not rounding noise
    cols = rows(("T", "A", ["s"], [0.0]), ("T", "B", ["s"], [0.0]), ("T", "C", ["s"], [0.0]),
                invalid={("A", 0), ("B", 0), ("C", 0)})
    for name in ("grpo", "gigpo"):
        out = get_estimator(name)(StepBatch(**cols))
        assert out.advantages.tolist() == [0.0, 0.0, 0.0], name
    # CCPO: the episode term exactly 0; the credits TGT - mean(peers) are 0 up to rounding
    out = get_estimator("ccpo")(StepBatch(**cols))
    assert out.episode_term.tolist() == [0.0, 0.0, 0.0]
    assert out.advantages.abs().max() < 1e-9


# ----------------------------------------------------------------------- 2. step return
def test_gigpo_step_return_per_row_both_modes() -> None:
    g = as_rows(G)
    bucket_mean = as_rows({"A0": 2.5 / 3, "A1": 2.5, "A2": 4.95, "B0": 2.5 / 3, "B1": 2.5,
                           "C0": 2.5 / 3, "C1": 4.95, "C2": 0})
    got = adv("gigpo", gamma=0.5, mode="mean_norm", step_advantage_w=2.0)
    np.testing.assert_allclose(got, EP + 2.0 * (g - bucket_mean), atol=1e-12)
    s0 = np.std([2.5, 0, 0], ddof=1)
    s1, s2 = np.std([5, 0], ddof=1), np.std([10, -0.1], ddof=1)
    std = as_rows({"A0": s0, "A1": s1, "A2": s2, "B0": s0, "B1": s1, "C0": s0, "C1": s2,
                   "C2": 1.0})
    out = get_estimator("gigpo", gamma=0.5)(worked())
    np.testing.assert_allclose(out.step_term.numpy(), (g - bucket_mean) / (std + 1e-6),
                               atol=1e-12)
    assert out.step_term[ORDER.index("C2")] == 0  # singleton bucket


RAW = {"A0": 2.5 - (0 + 0) / 2, "B0": 0 - (2.5 + 0) / 2, "C0": 0 - (2.5 + 0) / 2,
       "A1": 5 - 0.0, "B1": 0 - 5.0, "A2": 10 - (-0.1), "C1": -0.1 - 10, "C2": 0.0}
PEER_TRAJ = {"A0": 2, "B0": 2, "C0": 2, "A1": 1, "B1": 1, "A2": 1, "C1": 1}


def test_ccpo_return_target_is_the_penalised_step_return() -> None:
    got = adv("ccpo", **CCPO_PLAIN)
    np.testing.assert_allclose(got, EP + as_rows(RAW), atol=1e-12)


def test_ccpo_jweighting() -> None:
    want = {k: v * PEER_TRAJ[k] / (PEER_TRAJ[k] + 1.0) for k, v in RAW.items() if k != "C2"}
    got = adv("ccpo", **CCPO_PLAIN, jweight_c=1.0)
    np.testing.assert_allclose(got, EP + as_rows({**want, "C2": 0.0}), atol=1e-12)


# ----------------------------------------------------------------------- 3. node values
# successor-node values (gamma 0.5) from the UNpenalised episode reward R:
# V(g) = mean over visits of 0.5^(T - t) * R; R_A = 10, R_B = R_C = 0
V = {"s0": (0.5 ** 3 * 10 + 0.5 ** 2 * 0 + 0.5 ** 3 * 0) / 3,
     "s1": (0.5 ** 2 * 10 + 0.5 * 0) / 2,
     "s2": (0.5 * 10 + 0.5 ** 2 * 0) / 2,
     "s3": 0.5 * 0}
NEXT = {"A0": V["s1"], "A1": V["s2"], "A2": 10.0,  # A: R = success_value = 10, success
        "B0": V["s1"], "B1": 0.0,  # B failed: terminal 0
        "C0": V["s2"], "C1": V["s3"], "C2": 0.0}
CUR = {"A0": V["s0"], "A1": V["s1"], "A2": V["s2"], "B0": V["s0"], "B1": V["s1"],
       "C0": V["s0"], "C1": V["s2"], "C2": V["s3"]}


def test_ccpo_successor_node_target() -> None:
    tgt = {**NEXT, "C1": NEXT["C1"] - 0.1}  # the invalid row's own penalty
    raw = {"A0": tgt["A0"] - (tgt["B0"] + tgt["C0"]) / 2,
           "B0": tgt["B0"] - (tgt["A0"] + tgt["C0"]) / 2,
           "C0": tgt["C0"] - (tgt["A0"] + tgt["B0"]) / 2,
           "A1": tgt["A1"] - tgt["B1"], "B1": tgt["B1"] - tgt["A1"],
           "A2": tgt["A2"] - tgt["C1"], "C1": tgt["C1"] - tgt["A2"], "C2": 0.0}
    got = adv("ccpo", **{**CCPO_PLAIN, "target": "successor-node"})
    np.testing.assert_allclose(got, EP + as_rows(raw), atol=1e-12)


def test_terminal_success_is_the_episode_reward_equal_to_success_value() -> None:
    # success_value 20: A's R = 10 is not 20, so its terminal successor is worth 0 (a
    # positive episode reward alone is not a success)
    got = get_estimator("ccpo", **{**CCPO_PLAIN, "target": "successor-node",
                                   "success_value": 20.0})(worked()).step_term.numpy()
    tgt = {**NEXT, "A2": 0.0, "C1": NEXT["C1"] - 0.1}
    assert got[ORDER.index("A2")] == pytest.approx(tgt["A2"] - tgt["C1"], abs=1e-12)


# ----------------------------------------------------------------------- 4. edge term
def test_edge_term_reaches_uncredited_rows() -> None:
    gain = as_rows({k: NEXT[k] - CUR[k] for k in ORDER})
    want = as_rows(RAW) + 0.5 * z(gain)
    got = adv("ccpo", **{**CCPO_PLAIN, "edge_w": 0.5})
    np.testing.assert_allclose(got, EP + want, atol=1e-12)
    c2 = ORDER.index("C2")  # the singleton bucket: no credit, yet the edge term
    assert got[c2] - EP[c2] == pytest.approx(0.5 * z(gain)[c2]) and z(gain)[c2] != 0


def test_edge_term_after_jweighting_and_one_row_task() -> None:
    gain = as_rows({k: NEXT[k] - CUR[k] for k in ORDER})
    jw = {k: v * PEER_TRAJ.get(k, 0) / (PEER_TRAJ.get(k, 0) + 1.0) for k, v in RAW.items()}
    got = adv("ccpo", **{**CCPO_PLAIN, "edge_w": 1.0, "jweight_c": 1.0})
    np.testing.assert_allclose(got, EP + as_rows(jw) + z(gain), atol=1e-12)
    # a task with a single row gets no edge term
    lone = StepBatch(**rows(("U", "X", ["u"], [10.0])))
    assert get_estimator("ccpo", **{**CCPO_PLAIN, "edge_w": 1.0})(lone).step_term.item() == 0


# ----------------------------------------------------------------------- 5. step_norm
def test_step_norm_mode_under_mean_std_norm() -> None:
    gain = z(as_rows({k: NEXT[k] - CUR[k] for k in ORDER}))
    step = as_rows(RAW) + gain  # edge_w 1, every row
    live = [ORDER.index(k) for k in ORDER if k != "C2"]
    want = step.copy()
    want[live] = z(step[live])  # credited rows re-standardised; C2 keeps its edge value
    params = dict(gamma=0.5, rho=0.0, gate="hard", target="return", edge_w=1.0)
    out = get_estimator("ccpo", **params)(worked())  # mode=mean_std_norm, step_norm=mode
    np.testing.assert_allclose(out.step_term.numpy(), want, atol=1e-12)
    assert out.step_term[ORDER.index("C2")].item() == pytest.approx(gain[ORDER.index("C2")])
    task = get_estimator("ccpo", **params, step_norm="task")(worked())
    assert torch.equal(task.step_term, out.step_term)
    none = get_estimator("ccpo", **params, step_norm="none")(worked())
    np.testing.assert_allclose(none.step_term.numpy(), step, atol=1e-12)


def test_step_norm_mode_under_mean_norm() -> None:
    gain = z(as_rows({k: NEXT[k] - CUR[k] for k in ORDER}))
    step = as_rows(RAW) + gain
    params = dict(gamma=0.5, rho=0.0, gate="hard", target="return", edge_w=1.0,
                  mode="mean_norm")
    out = get_estimator("ccpo", **params)(worked())  # step_norm=mode: nothing re-standardised
    np.testing.assert_allclose(out.step_term.numpy(), step, atol=1e-12)
    np.testing.assert_allclose(out.advantages.numpy(), EP + step, atol=1e-12)
    task = get_estimator("ccpo", **params, step_norm="task")(worked())  # always
    live = [ORDER.index(k) for k in ORDER if k != "C2"]
    want = step.copy()
    want[live] = z(step[live])
    np.testing.assert_allclose(task.step_term.numpy(), want, atol=1e-12)


def test_lone_credited_row_keeps_its_value() -> None:
    # (every eligible bucket credits at least two rows, so the rule is tested directly)
    from ccpo_lab.estimators.grouping import zscore_in_groups

    values = torch.tensor([1.0, 3.0, 7.0, 5.0, 9.0], dtype=torch.float64)
    task = torch.tensor([0, 0, 0, 1, 1])
    credited = torch.tensor([True, True, False, True, False])
    got = zscore_in_groups(values, task, 2, 1e-6, credited, small="keep").tolist()
    sd = math.sqrt(2.0)
    assert got == [pytest.approx(-1 / (sd + 1e-6)), pytest.approx(1 / (sd + 1e-6)), 7, 5, 9]


# ----------------------------------------------------------------------- 6. backoff
def test_backoff_row_uses_task_bucket() -> None:
    # C2 (singleton bucket) against the task: peers = every row of A and B
    backoff = 0.0 - np.mean([2.5, 5, 10, 0, 0])
    got = adv("ccpo", **CCPO_PLAIN, backoff_task=True)
    np.testing.assert_allclose(got, EP + as_rows({**RAW, "C2": backoff}), atol=1e-12)
    # with J-weighting, J of the backoff row = peer trajectories in the task = 2
    jw = {k: v * PEER_TRAJ[k] / (PEER_TRAJ[k] + 1.0) for k, v in RAW.items() if k != "C2"}
    got = adv("ccpo", **CCPO_PLAIN, backoff_task=True, jweight_c=1.0)
    np.testing.assert_allclose(got, EP + as_rows({**jw, "C2": backoff * 2 / 3}), atol=1e-12)
    out = get_estimator("ccpo", **CCPO_PLAIN, backoff_task=True)(worked())
    assert out.diagnostics["backoff_frac"] == 1 / 8 and out.diagnostics["live_frac"] == 1.0


def _kernel_credit(f: np.ndarray, t: np.ndarray, i: int, peers: list[int],
                   pair_rows: list[int], peer_traj: list[str], rho: float) -> float:
    """The eb-shrunk credit of row ``i`` against ``peers`` (written out by hand)."""
    d = np.linalg.norm(f[:, None] - f[None], axis=2)
    off = [d[a, b] for x, a in enumerate(pair_rows) for b in pair_rows[x + 1:]]
    s = 0.15 * np.median(off)
    w = np.exp(-d[i, peers] / s)
    alpha = {tj: w[[k for k, p in enumerate(peer_traj) if p == tj]].sum()
             for tj in dict.fromkeys(peer_traj)}
    gbar = {tj: (w * t[peers])[[k for k, p in enumerate(peer_traj) if p == tj]].sum() / a
            for tj, a in alpha.items()}
    a = np.array(list(alpha.values()))
    b_loo = sum(alpha[tj] * gbar[tj] for tj in alpha) / a.sum()
    n_eff = a.sum() ** 2 / (a ** 2).sum()
    j = len(alpha)
    b_obs, s2 = t[peers].mean(), t[peers].var()
    gap = rho * (b_obs - b_loo)
    lam = 0.0 if abs(gap) < 1e-12 else float(
        np.clip(1 - s2 * max(1 / n_eff - 1 / j, 0) / gap ** 2, 0, 1))
    return float(t[i] - (lam * b_loo + (1 - lam) * b_obs))


def test_backoff_row_with_rho_and_backoff_rho() -> None:
    # task T: P (p, q), Q (p, r), S (s); gamma 0.5, rewards raw, no penalty in play.
    # S0 sits alone in bucket s: credited from the task bucket with rho * backoff_rho.
    cols = rows(("T", "P", ["p", "q"], [0.0, 4.0]), ("T", "Q", ["p", "r"], [0.0, 10.0]),
                ("T", "S", ["s"], [1.0]))
    raw_phi = np.array([[0.4, -0.4, 1.9], [0.3, -1.6, 1.1], [3.9, 2.8, -2.1],
                        [-3.8, -1.9, 0.1], [-7.0, -0.7, -3.7]])
    t = np.array([2.0, 4.0, 5.0, 10.0, 1.0])  # G: P (2, 4), Q (5, 10), S (1)
    params = dict(gamma=0.5, mode="mean_norm", rho=1.0, edge_w=0.0, step_norm="none",
                  phi="hidden", whiten_k=0, backoff_task=True, invalid_penalty=0.0)
    phi = torch.tensor(raw_phi)
    fc = raw_phi - raw_phi.mean(0)  # whiten_k = 0: centred and L2-normalised only
    fc = fc / np.linalg.norm(fc, axis=1, keepdims=True)
    for backoff_rho in (0.5, 1.0):
        out = get_estimator("ccpo", **params, backoff_rho=backoff_rho)(
            StepBatch(**cols, phi=phi))
        want = _kernel_credit(fc, t, 4, [0, 1, 2, 3], [0, 1, 2, 3, 4], ["P", "P", "Q", "Q"],
                              rho=1.0 * backoff_rho)
        assert out.step_term[4].item() == pytest.approx(want, abs=1e-12), backoff_rho
        # bucket p = {P0, Q0}: level 0 with the full rho
        want0 = _kernel_credit(fc, t, 0, [2], [0, 2], ["Q"], rho=1.0)
        assert out.step_term[0].item() == pytest.approx(want0, abs=1e-12)
    a = get_estimator("ccpo", **params, backoff_rho=0.5)(StepBatch(**cols, phi=phi))
    b = get_estimator("ccpo", **params, backoff_rho=1.0)(StepBatch(**cols, phi=phi))
    assert a.step_term[4] != b.step_term[4]  # backoff_rho reaches the backoff row
    level0 = [0, 2]  # P0, Q0 (rows 1, 3 and 4 are backoff rows)
    assert torch.equal(a.step_term[level0], b.step_term[level0])


# ----------------------------------------------------------------------- kernel
def global_batch(phi: Any = None) -> StepBatch:
    """Task T, trajectories X (rewards 0, 1) and Y (2, 0); gamma 0.5: G_X = (0.5, 1),
    G_Y = (2, 0). Unit features already centred: X0 e1, X1 e2, Y0 -e1, Y1 -e2."""
    cols = rows(("T", "X", ["a", "b"], [0.0, 1.0]), ("T", "Y", ["c", "d"], [2.0, 0.0]))
    if phi is None:
        phi = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]],
                           dtype=torch.float64)
    return StepBatch(**cols, phi=phi)


GLOBAL = dict(gamma=0.5, mode="mean_norm", gate="global", edge_w=0.0, step_norm="none",
              phi="hidden", whiten_k=0, tau=0.15)


def test_ccpo_global_gate_kernel() -> None:
    # pair distances: sqrt 2 (orthogonal) x4, 2 (opposite) x2 -> numpy median sqrt 2
    s = 0.15 * math.sqrt(2.0)
    w1, w2 = math.exp(-math.sqrt(2.0) / s), math.exp(-2.0 / s)
    b = {"X0": (w2 * 2 + w1 * 0) / (w1 + w2), "X1": (w1 * 2 + w2 * 0) / (w1 + w2),
         "Y0": (w2 * 0.5 + w1 * 1) / (w1 + w2), "Y1": (w1 * 0.5 + w2 * 1) / (w1 + w2)}
    step = np.array([0.5 - b["X0"], 1 - b["X1"], 2 - b["Y0"], 0 - b["Y1"]])
    ep = np.array([-0.5, -0.5, 0.5, 0.5])  # scores 1, 1, 2, 2 -> mean 1.5
    out = get_estimator("ccpo", **GLOBAL)(global_batch())
    np.testing.assert_allclose(out.advantages.numpy(), ep + step, atol=1e-12)
    assert out.diagnostics["lambda_mean"] == 1.0
    assert out.diagnostics["n_eff_mean"] == pytest.approx(1.0)  # one peer trajectory
    forced = get_estimator("ccpo", **{**GLOBAL, "rho": 0.8})(global_batch())
    np.testing.assert_allclose(forced.advantages.numpy(), out.advantages.numpy(), atol=0)


def test_ccpo_eb_shrinkage_hand() -> None:
    # one bucket, three trajectories, one row each; rho = 1, gate hard
    cols = rows(("T", "A", ["s"], [1.0]), ("T", "B", ["s"], [4.0]), ("T", "C", ["s"], [10.0]))
    phi = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
    f = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    f = f / np.linalg.norm(f, axis=1, keepdims=True)  # already centred
    t = np.array([1.0, 4.0, 10.0])
    want = [_kernel_credit(f, t, i, [j for j in range(3) if j != i], [0, 1, 2],
                           [k for j, k in enumerate("ABC") if j != i], rho=1.0)
            for i in range(3)]
    params = dict(gamma=0.5, mode="mean_norm", rho=1.0, edge_w=0.0, step_norm="none",
                  phi="hidden", whiten_k=0)
    out = get_estimator("ccpo", **params)(StepBatch(**cols, phi=phi))
    np.testing.assert_allclose(out.step_term.numpy(), want, atol=1e-12)
    assert 0 < out.diagnostics["lambda_mean"] < 1  # A and B shrink part-way, C not at all


def test_ccpo_tau_fallback_when_median_is_zero() -> None:
    # five trajectories in one bucket; four share the same features: 6 of 10 pair
    # distances are 0, so the median is 0 and the bandwidth is tau * 1.0
    cols = rows(*[("T", f"J{k}", ["s"], [float(k)]) for k in range(5)])
    phi = torch.tensor([[1.0, 0.0]] * 4 + [[0.0, 1.0]], dtype=torch.float64)
    out = get_estimator("ccpo", gamma=0.5, mode="mean_norm", gate="global", edge_w=0.0,
                        step_norm="none", phi="hidden", whiten_k=0,
                        tau=0.15)(StepBatch(**cols, phi=phi))
    w = math.exp(-2.0 / 0.15)  # the centred, normalised rows are +-(1, -1)/sqrt 2: d = 2
    t = np.arange(5.0)
    want0 = t[0] - (t[1] + t[2] + t[3] + w * t[4]) / (3 + w)
    assert out.step_term[0].item() == pytest.approx(want0, abs=1e-12)
    assert out.step_term[4].item() == pytest.approx(t[4] - t[:4].mean(), abs=1e-12)


def test_ccpo_missing_phi() -> None:
    with pytest.raises(MissingFeaturesError, match="needs the features phi"):
        get_estimator("ccpo", gate="global")(worked())
    with pytest.raises(MissingFeaturesError):
        get_estimator("ccpo", rho=0.5)(worked())
    get_estimator("ccpo", rho=0.0, gate="hard")(worked())  # phi is not needed


def test_ccpo_diagnostics_keys() -> None:
    out = get_estimator("ccpo", **CCPO_PLAIN)(worked())
    d = out.diagnostics
    for key in ("lambda_mean", "lambda_gt_half", "n_eff_mean", "live_frac", "n_buckets",
                "bucket_size_mean", "bucket_size_p90", "singleton_frac", "backoff_frac",
                "adv_ep_absmean", "adv_step_absmean", "adv_ep_over_step"):
        assert isinstance(d[key], float)
    assert d["n_buckets"] == 4 and d["singleton_frac"] == 0.25 and d["live_frac"] == 7 / 8
    assert d["bucket_size_mean"] == 2.0 and d["bucket_size_p90"] == pytest.approx(2.7)
    assert math.isnan(d["n_eff_mean"])  # no phi given
