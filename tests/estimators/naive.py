"""A slow, loop-per-row transcription of the estimator semantics (tests only).

Written from the issue text (issue 11: the semantics of verl-agent 796ed31 and of the CCPO
authors' trainer) and the module docstrings, independently of the vectorised
implementation: numpy float64, an exact decomposition for whitening (a full SVD, or
``eigh`` of the covariance when the batch has more rows than dimensions: the same
subspace), direct pairwise differences.
Rewards are raw; ``invalid_penalty`` is subtracted from the invalid row's own episode
score and step return (and successor-node target), never from other rows. Used to
cross-check the real estimators on random batches.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np


def _rows_by(keys: list[Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        out[k].append(i)
    return out


def _trajectories(traj: list[Any], step: list[int]) -> dict[Any, list[int]]:
    by = _rows_by(traj)
    return {k: sorted(v, key=lambda i: step[i]) for k, v in by.items()}


def returns(traj: list[Any], step: list[int], reward: np.ndarray, gamma: float) -> np.ndarray:
    g = np.zeros(len(reward))
    for rows in _trajectories(traj, step).values():
        run = 0.0
        for i in reversed(rows):
            run = reward[i] + gamma * run
            g[i] = run
    return g


def scores(traj: list[Any], reward: np.ndarray) -> np.ndarray:
    tot: dict[Any, float] = defaultdict(float)
    for i, t in enumerate(traj):
        tot[t] += reward[i]
    return np.array([tot[t] for t in traj])


def norm_groups(values: np.ndarray, keys: list[Any], mode: str, eps: float,
                singleton_zero_mean: bool) -> np.ndarray:
    out = np.zeros(len(values))
    for rows in _rows_by(keys).values():
        v = values[rows]
        if len(rows) == 1:  # verl: mean torch.tensor(0.0), std torch.tensor(1.0) (float32)
            mean = 0.0 if singleton_zero_mean else v[0]
            denom = float(np.float32(1.0) + np.float32(eps))
        elif np.all(v == v[0]):  # a constant group: exactly 0
            continue
        else:
            mean = v.mean()
            denom = v.std(ddof=1) + eps
        out[rows] = (v - mean) / denom if mode == "mean_std_norm" else v - mean
    return out


def zscore(v: np.ndarray, eps: float) -> np.ndarray:
    """(v - mean) / (unbiased std + eps) of >= 2 values; a constant vector gives 0."""
    if np.all(v == v[0]):
        return np.zeros(len(v))
    return (v - v.mean()) / (v.std(ddof=1) + eps)


def whiten(x: np.ndarray, k: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 2:
        return x
    x = x - x.mean(0, keepdims=True)
    if k > 0 and x.shape[0] > k:
        if x.shape[0] > x.shape[1]:
            _, vecs = np.linalg.eigh(x.T @ x)
            vt = vecs[:, ::-1].T
        else:
            _, _, vt = np.linalg.svd(x, full_matrices=False)
        x = x - x @ vt[:k].T @ vt[:k]
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)


def thermo(v: float, lo: float, hi: float) -> np.ndarray:
    out = np.zeros(12)
    f = (float(v) - lo) / max(hi - lo, 1e-9)
    out[: int(np.clip(f, 0.0, 1.0) * 12)] = 1.0
    return out


def context(traj: list[Any], step: list[int], obs: list[str]) -> np.ndarray:
    ctx = np.zeros((len(traj), 37))
    for rows in _trajectories(traj, step).values():
        seen: set[str] = set()
        for t, i in enumerate(rows):
            rev = obs[i] in seen
            seen.add(obs[i])
            nu = len(seen)
            c = np.concatenate([thermo(t, 0, 30), thermo(nu, 0, 25),
                                thermo(nu / (t + 1), 0.0, 1.0), [float(rev)]])
            ctx[i] = c / max(np.linalg.norm(c), 1e-9)
    return ctx


def features(p: dict[str, Any], traj: list[Any], step: list[int], obs: list[str],
             phi: np.ndarray) -> np.ndarray:
    f = whiten(phi, p["whiten_k"])
    if p["phi"] == "hidden+ctx" and p["ctx_w"] > 0:
        f = np.concatenate([f, p["ctx_w"] * context(traj, step, obs)], axis=1)
        f = f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-9)
    return f


def credit_rows(rows: list[int], query: list[int], traj: list[Any], tgt: np.ndarray,
                feats: np.ndarray | None, p: dict[str, Any], rho: float, force: bool
                ) -> dict[int, tuple[float, float]]:
    """Credit of each query row of one bucket: row -> (raw credit, J)."""
    out: dict[int, tuple[float, float]] = {}
    if len({traj[i] for i in rows}) < 2:
        return out
    tau = 1.0
    if feats is not None:
        dist = {(a, b): float(np.linalg.norm(feats[a] - feats[b])) for a in rows for b in rows}
        off = [dist[(rows[x], rows[y])] for x in range(len(rows))
               for y in range(x + 1, len(rows))]
        med = float(np.median(off))
        tau = (med if med > 1e-9 else 1.0) * max(p["tau"], 1e-6)
    for i in query:
        peers = [b for b in rows if traj[b] != traj[i]]
        per: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for b in peers:
            w = np.exp(-dist[(i, b)] / tau) if feats is not None else 1.0
            per[traj[b]][0] += w * tgt[b]
            per[traj[b]][1] += w
        alpha = np.array([v[1] for v in per.values()])
        g = np.array([v[0] / max(v[1], 1e-12) for v in per.values()])
        b_loo = (alpha * g).sum() / max(alpha.sum(), 1e-12)
        n_eff = alpha.sum() ** 2 / max((alpha ** 2).sum(), 1e-12)
        j = float(len(per))
        vals = tgt[peers]
        b_obs = vals.mean()
        s2 = float(np.var(vals)) if len(vals) > 1 else 0.0
        if force:
            lam = 1.0
        else:
            var_gain = max(1 / max(n_eff, 1e-9) - 1 / max(j, 1e-9), 0.0)
            d = rho * (b_obs - b_loo)
            lam = 0.0 if abs(d) < 1e-12 else min(1.0, max(0.0, 1 - s2 * var_gain / d ** 2))
        out[i] = (tgt[i] - (lam * b_loo + (1 - lam) * b_obs), j)
    return out


def ccpo_step(p: dict[str, Any], task: list[Any], traj: list[Any], step: list[int],
              obs: list[str], reward: np.ndarray, valid: np.ndarray,
              phi: np.ndarray | None) -> np.ndarray:
    n = len(task)
    r_ep = scores(traj, reward)  # raw episode reward: node values never see the penalty
    pen = p["invalid_penalty"] * (1.0 - valid.astype(float))
    trajs = _trajectories(traj, step)
    nodes = [(task[i], obs[i]) for i in range(n)]
    acc: dict[Any, list[float]] = defaultdict(list)
    for i in range(n):
        length = len(trajs[traj[i]])
        acc[nodes[i]].append(p["gamma"] ** (length - step[i]) * r_ep[i])
    value = {k: float(np.mean(v)) for k, v in acc.items()}
    v_next, v_cur = np.zeros(n), np.zeros(n)
    for rows in trajs.values():
        for pos, i in enumerate(rows):
            v_cur[i] = value[nodes[i]]
            if pos + 1 < len(rows):
                v_next[i] = value[nodes[rows[pos + 1]]]
            else:
                success = abs(r_ep[i] - p["success_value"]) < 1e-9
                v_next[i] = p["success_value"] if success else 0.0
    if p["target"] == "successor-node":
        tgt = v_next - pen
    else:
        tgt = returns(traj, step, reward, p["gamma"]) - pen
    feats = features(p, traj, step, obs, phi) if phi is not None else None
    credit: dict[int, tuple[float, float]] = {}
    if p["gate"] == "global":
        for rows in _rows_by(task).values():
            credit.update(credit_rows(rows, rows, traj, tgt, feats, p, p["rho"], True))
    else:
        for rows in _rows_by(nodes).values():
            credit.update(credit_rows(rows, rows, traj, tgt, feats, p, p["rho"], False))
        if p["backoff_task"]:
            for rows in _rows_by(task).values():
                todo = [i for i in rows if i not in credit]
                if todo:
                    credit.update(credit_rows(rows, todo, traj, tgt, feats, p,
                                              p["rho"] * p["backoff_rho"], False))
    s = np.zeros(n)
    for i, (raw, j) in credit.items():
        s[i] = raw * j / (j + p["jweight_c"]) if p["jweight_c"] > 0 else raw
    if p["edge_w"] > 0:  # every row of a task with > 1 rows, credited or not
        gain = v_next - v_cur
        for rows in _rows_by(task).values():
            if len(rows) > 1:
                s[rows] += p["edge_w"] * zscore(gain[rows], p["epsilon"])
    if p["step_norm"] == "task" or (p["step_norm"] == "mode"
                                    and p["mode"] == "mean_std_norm"):
        for rows in _rows_by(task).values():
            live = [i for i in rows if i in credit]
            if len(live) >= 2:  # a lone credited row keeps its value
                s[live] = zscore(s[live], p["epsilon"])
    return s


def naive_advantages(name: str, p: dict[str, Any], task: list[Any], traj: list[Any],
                     step: list[int], obs: list[str], reward: np.ndarray, valid: np.ndarray,
                     phi: np.ndarray | None = None) -> np.ndarray:
    """The advantages of estimator ``name`` with resolved parameters ``p``: ``(N,)``.

    ``reward``: raw environment rewards (no penalty); ``valid``: admissible actions.
    """
    reward = np.asarray(reward, dtype=np.float64)
    valid = np.asarray(valid)
    pen = p["invalid_penalty"] * (1.0 - valid.astype(float))
    a_ep = norm_groups(scores(traj, reward) - pen, list(task), p["mode"], p["epsilon"], True)
    if name == "grpo":
        return a_ep
    if name == "gigpo":
        g = returns(traj, step, reward, p["gamma"]) - pen
        nodes = [(task[i], obs[i]) for i in range(len(task))]
        return a_ep + p["step_advantage_w"] * norm_groups(g, nodes, p["mode"], p["epsilon"],
                                                          False)
    step_term = ccpo_step(p, task, traj, step, obs, reward, valid, phi)
    return a_ep + p["step_advantage_w"] * step_term
