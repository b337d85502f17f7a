"""A slow, loop-per-row transcription of the AS-RUN semantics (tests only, issue 30).

Written from the facts in ``shared/reference/estimators.md`` ("What the published runs
computed"), not from the CCPO authors' code (it has no license) and not from ccpo-lab's
vectorised implementation. The input is the batch as the trainer passed it: ``M`` rows in
batch order, padding copies included (a copy repeats its source row's columns). Then:

- every passed row counts: in the task groups of the episode term, in the anchor buckets,
  among the peers, in the node visits and in the whitening;
- the step return ``G`` of a row is its source turn's, computed in the true turn order
  (verl-agent computes it before padding);
- for CCPO, a row's turn index ``t`` is its position among its trajectory's passed rows,
  ``T`` is the number of those rows, its successor is the next of them (the last one's is
  the terminal node), and the context block reads the trajectory's rows in that order.

numpy float64 throughout; the references work partly in float32, so comparisons allow
float32 noise.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from .naive import credit_rows, norm_groups, thermo, whiten, zscore


def _by(keys: list[Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        out[k].append(i)
    return out


def true_returns(traj: list[Any], turn: list[int], reward: np.ndarray, gamma: float
                 ) -> np.ndarray:
    """Per passed row: the discounted return-to-go of its source turn, over the unique
    turns of its trajectory in true turn order (``turn``: the true turn index)."""
    per_traj: dict[Any, dict[int, float]] = defaultdict(dict)
    for i, (tj, t) in enumerate(zip(traj, turn, strict=True)):
        per_traj[tj][t] = float(reward[i])
    g_of: dict[tuple[Any, int], float] = {}
    for tj, turns in per_traj.items():
        run = 0.0
        for t in sorted(turns, reverse=True):
            run = turns[t] + gamma * run
            g_of[(tj, t)] = run
    return np.array([g_of[(tj, t)] for tj, t in zip(traj, turn, strict=True)])


def episode_rewards(traj: list[Any], turn: list[int], reward: np.ndarray) -> np.ndarray:
    """Per passed row: its trajectory's episode reward (sum over its unique turns)."""
    tot: dict[Any, dict[int, float]] = defaultdict(dict)
    for i, (tj, t) in enumerate(zip(traj, turn, strict=True)):
        tot[tj][t] = float(reward[i])
    return np.array([sum(tot[tj].values()) for tj in traj])


def positional(traj: list[Any]) -> tuple[list[int], list[int], list[int]]:
    """Per passed row: (position t, trajectory length T, next row or -1) in batch order."""
    pos, length, nxt = [0] * len(traj), [0] * len(traj), [-1] * len(traj)
    for rows in _by(traj).values():
        for k, i in enumerate(rows):
            pos[i], length[i] = k, len(rows)
            nxt[i] = rows[k + 1] if k + 1 < len(rows) else -1
    return pos, length, nxt


def context(traj: list[Any], obs: list[str]) -> np.ndarray:
    """The 37-d context block read in batch order (position = turn)."""
    ctx = np.zeros((len(traj), 37))
    for rows in _by(traj).values():
        seen: set[str] = set()
        for t, i in enumerate(rows):
            rev = obs[i] in seen
            seen.add(obs[i])
            nu = len(seen)
            c = np.concatenate([thermo(t, 0, 30), thermo(nu, 0, 25),
                                thermo(nu / (t + 1), 0.0, 1.0), [float(rev)]])
            ctx[i] = c / max(np.linalg.norm(c), 1e-9)
    return ctx


def ccpo_step_as_run(p: dict[str, Any], task: list[Any], traj: list[Any], turn: list[int],
                     obs: list[str], reward: np.ndarray, valid: np.ndarray,
                     phi: np.ndarray | None) -> tuple[np.ndarray, set[int]]:
    """The CCPO step term before its standardisation, and the credited rows."""
    n = len(task)
    r_ep = episode_rewards(traj, turn, reward)
    pen = p["invalid_penalty"] * (1.0 - valid.astype(float))
    pos, length, nxt = positional(traj)
    nodes = [(task[i], obs[i]) for i in range(n)]
    visits: dict[Any, list[float]] = defaultdict(list)
    for i in range(n):
        visits[nodes[i]].append(p["gamma"] ** (length[i] - pos[i]) * r_ep[i])
    value = {k: float(np.mean(v)) for k, v in visits.items()}
    v_cur = np.array([value[nodes[i]] for i in range(n)])
    v_next = np.array([value[nodes[nxt[i]]] if nxt[i] >= 0 else
                       (p["success_value"] if abs(r_ep[i] - p["success_value"]) < 1e-9
                        else 0.0) for i in range(n)])
    if p["target"] == "successor-node":
        tgt = v_next - pen
    else:
        tgt = true_returns(traj, turn, reward, p["gamma"]) - pen
    feats = None
    if phi is not None:
        feats = whiten(phi, p["whiten_k"])
        if p["phi"] == "hidden+ctx" and p["ctx_w"] > 0:
            feats = np.concatenate([feats, p["ctx_w"] * context(traj, obs)], axis=1)
            feats = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-9)
    credit: dict[int, tuple[float, float]] = {}
    if p["gate"] == "global":
        for rows in _by(list(task)).values():
            credit.update(credit_rows(rows, rows, traj, tgt, feats, p, p["rho"], True))
    else:
        for rows in _by(nodes).values():
            credit.update(credit_rows(rows, rows, traj, tgt, feats, p, p["rho"], False))
        if p["backoff_task"]:
            for rows in _by(list(task)).values():
                todo = [i for i in rows if i not in credit]
                if todo:
                    credit.update(credit_rows(rows, todo, traj, tgt, feats, p,
                                              p["rho"] * p["backoff_rho"], False))
    s = np.zeros(n)
    for i, (raw, j) in credit.items():
        s[i] = raw * j / (j + p["jweight_c"]) if p["jweight_c"] > 0 else raw
    if p["edge_w"] > 0:
        gain = v_next - v_cur
        for rows in _by(list(task)).values():
            if len(rows) > 1:
                s[rows] += p["edge_w"] * zscore(gain[rows], p["epsilon"])
    return s, set(credit)


def as_run_advantages(name: str, p: dict[str, Any], task: list[Any], traj: list[Any],
                      turn: list[int], obs: list[str], reward: np.ndarray, valid: np.ndarray,
                      phi: np.ndarray | None = None) -> np.ndarray:
    """As-run advantages of the ``M`` passed rows (batch order, copies included).

    ``turn``: each row's true turn index (a copy: its source's); ``reward``: raw per-turn
    rewards; ``valid``: admissible actions; ``p``: resolved parameters.
    """
    reward = np.asarray(reward, dtype=np.float64)
    valid = np.asarray(valid)
    pen = p["invalid_penalty"] * (1.0 - valid.astype(float))
    score = episode_rewards(traj, turn, reward) - pen
    a_ep = norm_groups(score, list(task), p["mode"], p["epsilon"], True)
    if name == "grpo":
        return a_ep
    if name == "gigpo":
        g = true_returns(traj, turn, reward, p["gamma"]) - pen
        nodes = [(task[i], obs[i]) for i in range(len(task))]
        return a_ep + p["step_advantage_w"] * norm_groups(g, nodes, p["mode"], p["epsilon"],
                                                          False)
    s, credited = ccpo_step_as_run(p, task, traj, turn, obs, reward, valid, phi)
    if p["step_norm"] == "task" or (p["step_norm"] == "mode"
                                    and p["mode"] == "mean_std_norm"):
        for rows in _by(list(task)).values():
            live = [i for i in rows if i in credited]
            if len(live) >= 2:
                s[live] = zscore(s[live], p["epsilon"])
    return a_ep + p["step_advantage_w"] * s
