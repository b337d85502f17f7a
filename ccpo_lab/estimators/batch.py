"""StepBatch: the rows an estimator sees, one per agent turn, validated on construction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ccpo_lab.estimators.errors import BatchError
from ccpo_lab.estimators.grouping import factorize

_FLOATS = (torch.float32, torch.float64)


def _device_of(*values: Any) -> torch.device:
    for v in values:
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")


def _as_numpy(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        return values
    return np.asarray(list(values) if not isinstance(values, str) else values)


def _ids(values: Any, name: str, n: int, *, strings_only: bool = False) -> tuple[np.ndarray, Any]:
    arr = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else (
        values if isinstance(values, np.ndarray) else np.asarray(list(values), dtype=object))
    if arr.ndim != 1 or len(arr) != n:
        raise BatchError(f"expected shape ({n},), got {tuple(arr.shape)}", key=name)
    if arr.dtype.kind == "f":
        raise BatchError("expected str or int ids, got floats", key=name)
    codes, uniques = factorize(arr, name)
    allowed = (str,) if strings_only else (str, int, np.integer)
    for u in uniques:  # unique values only, not rows
        if isinstance(u, bool) or not isinstance(u, allowed):
            kind = "str" if strings_only else "str or int"
            raise BatchError(f"expected {kind} values", key=name, value=u)
    return codes, uniques


@dataclass(frozen=True, eq=False, repr=False)
class StepBatch:
    """One row per agent turn, rows in any order.

    Arguments (``N`` rows):

    - ``task_uid``: ``(N,)`` str or int, the task group (verl's ``uid``);
    - ``traj_uid``: ``(N,)`` str or int, the rollout; a trajectory lies in one task;
    - ``step``: ``(N,)`` int, the 0-based turn index inside the trajectory; every
      trajectory has turns ``0..T-1`` exactly once;
    - ``anchor_obs``: ``(N,)`` str, the observation the action was taken in;
    - ``reward``: ``(N,)`` float32 or float64 raw environment reward of the turn, with no
      invalid-action penalty applied (the estimators apply their ``invalid_penalty``;
      a list of numbers becomes float64);
    - ``valid``: ``(N,)`` bool, whether the action was admissible (an invalid row is
      penalised by the estimator's ``invalid_penalty``);
    - ``phi``: optional ``(N, d)`` float features (float16/bfloat16 are upcast to float32);
    - ``rows``: optional ``(M,)`` int, the batch the trainer really passed, as indices of
      these rows in the trainer's order (after verl's load balancing), a row appearing
      once more for each padding copy verl-agent made of it (``adjust_batch``); every row
      appears at least once. None: each row once, in the order given. Estimators return
      one advantage per passed row (``M``); an ``as-run`` estimator computes on the passed
      batch itself (copies counted, the rows' positions read as the reference reads them).

    Invalid input raises :class:`~ccpo_lab.estimators.errors.BatchError` naming the field.
    After construction ``reward``, ``step``, ``valid`` and ``phi`` are torch tensors on the
    device of the first tensor argument, and the integer codes below are available.
    """

    task_uid: Sequence[str | int]
    traj_uid: Sequence[str | int]
    step: Any
    anchor_obs: Sequence[str]
    reward: Any
    valid: Any
    phi: Any = None
    rows: Any = None

    n: int = field(init=False)
    """Number of rows."""
    task_index: torch.Tensor = field(init=False)
    """``(N,)`` int64 task code in ``[0, n_tasks)``."""
    traj_index: torch.Tensor = field(init=False)
    """``(N,)`` int64 trajectory code in ``[0, n_traj)``."""
    obs_index: torch.Tensor = field(init=False)
    """``(N,)`` int64 code of ``anchor_obs`` (batch-wide) in ``[0, n_obs)``."""
    step_index: torch.Tensor = field(init=False)
    """``(N,)`` int64 turn index (same as ``step``)."""
    next_row: torch.Tensor = field(init=False)
    """``(N,)`` int64 row of the next turn of the same trajectory, -1 after the last."""
    traj_task: torch.Tensor = field(init=False)
    """``(n_traj,)`` task code of each trajectory."""
    traj_len: torch.Tensor = field(init=False)
    """``(n_traj,)`` number of turns of each trajectory."""
    n_tasks: int = field(init=False)
    n_traj: int = field(init=False)
    n_obs: int = field(init=False)
    task_names: np.ndarray = field(init=False)
    """``(n_tasks,)`` the task ids, indexed by code."""
    traj_names: np.ndarray = field(init=False)
    """``(n_traj,)`` the trajectory ids, indexed by code."""
    passed: torch.Tensor = field(init=False)
    """``(M,)`` int64 the passed batch as row indices (``rows``, or ``arange(N)``)."""
    n_passed: int = field(init=False)
    """``M``: rows of the passed batch (``N`` plus the padding copies)."""

    def __post_init__(self) -> None:
        put = object.__setattr__
        try:
            n = len(self.task_uid)
        except TypeError as err:
            raise BatchError("expected a sequence", key="task_uid") from err
        if n == 0:
            raise BatchError("a StepBatch needs at least one row", key="task_uid")
        device = _device_of(self.reward, self.phi, self.step, self.valid)
        task, task_names = _ids(self.task_uid, "task_uid", n)
        traj, traj_names = _ids(self.traj_uid, "traj_uid", n)
        obs, _ = _ids(self.anchor_obs, "anchor_obs", n, strings_only=True)
        put(self, "step", self._steps(n, device))
        put(self, "reward", self._rewards(n, device))
        put(self, "valid", self._valid(n, device))
        put(self, "phi", self._phi(n, device))
        put(self, "n", n)
        put(self, "n_tasks", len(task_names))
        put(self, "n_traj", len(traj_names))
        put(self, "n_obs", int(obs.max()) + 1)
        put(self, "task_names", task_names)
        put(self, "traj_names", traj_names)
        put(self, "task_index", torch.as_tensor(task, device=device))
        put(self, "traj_index", torch.as_tensor(traj, device=device))
        put(self, "obs_index", torch.as_tensor(obs, device=device))
        put(self, "step_index", self.step)
        passed = self._passed(n, device)
        put(self, "passed", passed)
        put(self, "n_passed", int(passed.numel()))
        self._check_trajectories()

    # -- field conversion --------------------------------------------------------------
    def _steps(self, n: int, device: torch.device) -> torch.Tensor:
        arr = _as_numpy(self.step)
        if arr.shape != (n,):
            raise BatchError(f"expected shape ({n},), got {tuple(arr.shape)}", key="step")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
                raise BatchError("expected integer turn indices", key="step")
        elif arr.dtype.kind not in "iu":
            raise BatchError(f"expected integer turn indices, got dtype {arr.dtype}", key="step")
        arr = arr.astype(np.int64)
        if arr.min() < 0:
            raise BatchError("turn indices must be >= 0", key="step", value=int(arr.min()))
        return torch.as_tensor(arr, device=device)

    def _rewards(self, n: int, device: torch.device) -> torch.Tensor:
        r = self.reward
        if isinstance(r, torch.Tensor):
            if r.dtype not in _FLOATS:
                if r.dtype.is_floating_point or r.dtype == torch.bool:
                    raise BatchError(f"expected float32 or float64, got {r.dtype}", key="reward")
                r = r.to(torch.float64)
            r = r.detach()
        else:
            arr = _as_numpy(r)
            if arr.dtype.kind == "b" or arr.dtype.kind not in "fiu":
                raise BatchError(f"expected float rewards, got dtype {arr.dtype}", key="reward")
            if arr.dtype not in (np.float32, np.float64):
                arr = arr.astype(np.float64)
            r = torch.as_tensor(arr, device=device)
        if tuple(r.shape) != (n,):
            raise BatchError(f"expected shape ({n},), got {tuple(r.shape)}", key="reward")
        if not bool(torch.isfinite(r).all()):
            raise BatchError("rewards must be finite", key="reward")
        return r.to(device)

    def _valid(self, n: int, device: torch.device) -> torch.Tensor:
        arr = _as_numpy(self.valid)
        if arr.shape != (n,):
            raise BatchError(f"expected shape ({n},), got {tuple(arr.shape)}", key="valid")
        if arr.dtype.kind != "b" and (
            arr.dtype.kind not in "iuf" or not np.all((arr == 0) | (arr == 1))
        ):
            raise BatchError("expected booleans (or 0/1)", key="valid")
        return torch.as_tensor(arr.astype(bool), device=device)

    def _phi(self, n: int, device: torch.device) -> torch.Tensor | None:
        if self.phi is None:
            return None
        p = self.phi
        if not isinstance(p, torch.Tensor):
            arr = _as_numpy(p)
            if arr.dtype.kind not in "fiu":
                raise BatchError(f"expected float features, got dtype {arr.dtype}", key="phi")
            p = torch.as_tensor(arr)
        p = p.detach()
        if p.ndim != 2 or p.shape[0] != n or p.shape[1] < 1:
            raise BatchError(f"expected shape ({n}, d) with d >= 1, got {tuple(p.shape)}",
                             key="phi")
        if p.dtype not in _FLOATS:
            p = p.to(torch.float32)
        if not bool(torch.isfinite(p).all()):
            raise BatchError("features must be finite", key="phi")
        return p.to(device)

    def _passed(self, n: int, device: torch.device) -> torch.Tensor:
        if self.rows is None:
            return torch.arange(n, device=device)
        arr = _as_numpy(self.rows)
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise BatchError(f"expected a 1-d array of row indices, got shape "
                             f"{tuple(arr.shape)} dtype {arr.dtype}", key="rows")
        arr = arr.astype(np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            bad = int(arr[(arr < 0) | (arr >= n)][0])
            raise BatchError(f"row index out of range [0, {n})", key="rows", value=bad)
        seen = np.bincount(arr, minlength=n)
        if (seen == 0).any():
            raise BatchError("every row must be passed at least once (copies are extra)",
                             key="rows", value=int(np.flatnonzero(seen == 0)[0]))
        return torch.as_tensor(arr, device=device)

    # -- trajectory structure ----------------------------------------------------------
    def _check_trajectories(self) -> None:
        put = object.__setattr__
        traj, task, step = self.traj_index, self.task_index, self.step_index
        nt = self.n_traj
        lo = torch.full((nt,), self.n_tasks, dtype=torch.int64, device=traj.device)
        hi = torch.full((nt,), -1, dtype=torch.int64, device=traj.device)
        lo.scatter_reduce_(0, traj, task, "amin")
        hi.scatter_reduce_(0, traj, task, "amax")
        split = torch.nonzero(lo != hi).flatten()
        if split.numel():
            j = int(split[0])
            raise BatchError(
                f"trajectory {self.traj_names[j]!r} is spread over two tasks "
                f"({self.task_names[int(lo[j])]!r} and {self.task_names[int(hi[j])]!r})",
                key="traj_uid")
        width = int(step.max()) + 1
        order = torch.argsort(traj * width + step, stable=True)
        t_sorted, s_sorted = traj[order], step[order]
        dup = (t_sorted[1:] == t_sorted[:-1]) & (s_sorted[1:] == s_sorted[:-1])
        if bool(dup.any()):
            p = int(torch.nonzero(dup).flatten()[0])
            raise BatchError(
                f"trajectory {self.traj_names[int(t_sorted[p])]!r} has turn "
                f"{int(s_sorted[p])} twice (duplicate (traj_uid, step) pair)", key="step")
        length = torch.bincount(traj, minlength=nt)
        top = torch.full((nt,), -1, dtype=torch.int64, device=traj.device)
        top.scatter_reduce_(0, traj, step, "amax")
        gap = torch.nonzero(top != length - 1).flatten()
        if gap.numel():
            j = int(gap[0])
            have = sorted(int(s) for s in step[traj == j].tolist())
            missing = sorted(set(range(have[-1] + 1)) - set(have))
            raise BatchError(
                f"trajectory {self.traj_names[j]!r} has turns {have[:12]}"
                f"{'...' if len(have) > 12 else ''}: missing turn {missing[0]} "
                "(turns must be 0..T-1 without gaps)", key="step")
        nxt = torch.full_like(order, -1)
        same = t_sorted[1:] == t_sorted[:-1]
        nxt[order[:-1]] = torch.where(same, order[1:], torch.full_like(order[1:], -1))
        put(self, "next_row", nxt)
        put(self, "traj_task", lo)
        put(self, "traj_len", length)

    def __repr__(self) -> str:
        phi = None if self.phi is None else tuple(self.phi.shape)
        passed = "" if self.rows is None else f", passed={self.n_passed}"
        return (f"StepBatch(rows={self.n}{passed}, tasks={self.n_tasks}, "
                f"trajectories={self.n_traj}, reward={self.reward.dtype}, phi={phi})")
