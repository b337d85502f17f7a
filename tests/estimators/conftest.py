"""Shared fixtures and batch builders for the estimator tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


def rows(*trajectories: tuple[str, str, list[str], list[float]],
         invalid: set[tuple[str, int]] | None = None) -> dict[str, Any]:
    """Batch columns from ``(task, traj, observations, rewards)`` tuples (turns 0..T-1)."""
    invalid = invalid or set()
    out: dict[str, list[Any]] = {k: [] for k in
                                 ("task_uid", "traj_uid", "step", "anchor_obs", "reward", "valid")}
    for task, traj, obs, rew in trajectories:
        assert len(obs) == len(rew)
        for t, (o, r) in enumerate(zip(obs, rew, strict=True)):
            out["task_uid"].append(task)
            out["traj_uid"].append(traj)
            out["step"].append(t)
            out["anchor_obs"].append(o)
            out["reward"].append(r)
            out["valid"].append((traj, t) not in invalid)
    return out


def random_columns(rng: np.random.Generator, n_tasks: int = 3, n_traj: int = 4,
                   max_len: int = 6, n_obs: int = 4, d: int = 8,
                   shuffle: bool = True) -> dict[str, Any]:
    """A random batch with shared start observations, revisits, successes and invalid
    actions (raw rewards: 10 at the last turn of a success, else 0; 20% invalid)."""
    cols: dict[str, list[Any]] = {k: [] for k in
                                  ("task_uid", "traj_uid", "step", "anchor_obs", "reward", "valid")}
    for t in range(n_tasks):
        for j in range(n_traj):
            length = int(rng.integers(1, max_len + 1))
            success = bool(rng.random() < 0.5)
            for s in range(length):
                ok = bool(rng.random() < 0.8)
                cols["task_uid"].append(f"t{t}")
                cols["traj_uid"].append(f"t{t}-j{j}")
                cols["step"].append(s)
                cols["anchor_obs"].append("start" if s == 0 else f"o{int(rng.integers(n_obs))}")
                cols["reward"].append(10.0 if success and s == length - 1 else 0.0)
                cols["valid"].append(ok)
    n = len(cols["task_uid"])
    out: dict[str, Any] = dict(cols)
    out["reward"] = np.asarray(cols["reward"])
    out["valid"] = np.asarray(cols["valid"])
    out["phi"] = rng.normal(size=(n, d)) + 3.0 * rng.normal(size=(1, d))
    if shuffle:
        perm = rng.permutation(n)
        out = {k: (v[perm] if isinstance(v, np.ndarray) else [v[i] for i in perm])
               for k, v in out.items()}
    return out


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed-seed generator."""
    return np.random.default_rng(1234)


def agent_columns(rng: np.random.Generator, n_tasks: int = 6, n_traj: int = 4,
                  max_len: int = 12, n_loc: int = 5, p_invalid: float = 0.1, d: int = 8,
                  one_trajectory_task: bool = True) -> dict[str, Any]:
    """A verl-agent-shaped ALFWorld batch, rows in verl-agent's gather order (trajectory by
    trajectory, turns in order).

    A success ends with raw reward 10 at a random turn, a failure runs ``max_len`` turns;
    ``p_invalid`` of the actions are invalid (the next observation is then "Nothing
    happens."); the observations walk over ``n_loc`` locations per task with revisits
    (so buckets of every size, singletons included); the first observation is shared by
    a task's trajectories. With ``one_trajectory_task`` the last task has one trajectory.
    ``phi``: ``(N, d)`` features with a per-observation component and a common offset.
    """
    cols: dict[str, list[Any]] = {k: [] for k in
                                  ("task_uid", "traj_uid", "step", "anchor_obs", "reward", "valid")}
    for t in range(n_tasks):
        trajs = 1 if one_trajectory_task and t == n_tasks - 1 else n_traj
        start = f"task {t}: you are in the middle of a room"
        for j in range(trajs):
            success = bool(rng.random() < 0.5)
            length = int(rng.integers(1, max_len + 1)) if success else max_len
            here = start
            for s in range(length):
                ok = bool(rng.random() >= p_invalid)
                cols["task_uid"].append(f"uid-{t}")
                cols["traj_uid"].append(f"traj-{t}-{j}")
                cols["step"].append(s)
                cols["anchor_obs"].append(here)
                cols["reward"].append(10.0 if success and s == length - 1 else 0.0)
                cols["valid"].append(ok)
                here = "Nothing happens." if not ok else \
                    f"task {t}: you arrive at location {int(rng.integers(n_loc))}"
    n = len(cols["task_uid"])
    out: dict[str, Any] = dict(cols)
    out["reward"] = np.asarray(cols["reward"])
    out["valid"] = np.asarray(cols["valid"])
    uniq = {o: i for i, o in enumerate(dict.fromkeys(cols["anchor_obs"]))}
    table = rng.normal(size=(len(uniq), d))
    out["phi"] = (table[[uniq[o] for o in cols["anchor_obs"]]] + 0.3 * rng.normal(size=(n, d))
                  + 3.0 * rng.normal(size=(1, d)))
    return out
