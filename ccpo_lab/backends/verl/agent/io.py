"""What the hooks write into the run directory, as plain functions (no verl import).

- :class:`RunFileLogger`: verl's ``file`` logger for the run's ``metrics.jsonl``, appending
  (verl's own opens the file with ``"wb"`` and would erase a resumed run's history), one
  line per step, steps already recorded before a restart skipped, ``state.json`` updated;
- :func:`turn_indices`: the 0-based turn index of each row of a rollout batch;
- :func:`step1_episodes`: the step-1 rollouts in ccpo-lab's episode format.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ccpo_lab.backends.verl.agent.env import ENV_METRICS, ENV_RUN_DIR


def _scalar(value: Any) -> float | int | None:
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else None
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return _scalar(value.item())
    return None


class RunFileLogger:
    """Appends ``{"step": N, "data": {...}}`` lines (verl's FileLogger format)."""

    def __init__(self, path: str | Path | None = None, run_dir: str | Path | None = None):
        from ccpo_lab.runs.metrics import read_metrics

        path = path or os.environ.get(ENV_METRICS)
        run_dir = run_dir or os.environ.get(ENV_RUN_DIR)
        if path is None:
            if run_dir is None:
                raise RuntimeError(f"{ENV_METRICS} and {ENV_RUN_DIR} are unset: nowhere to log")
            path = Path(run_dir) / "metrics.jsonl"
        self.path = Path(path)
        self.run_dir = Path(run_dir) if run_dir else None
        rows = read_metrics(self.path)
        self.last_step = max((int(r["step"]) for r in rows), default=-1)

    def log(self, data: Mapping[str, Any], step: int) -> None:
        """Append the scalar metrics of ``step`` (non-scalars dropped); skip a logged step."""
        from ccpo_lab.runs.metrics import append_metrics

        step = int(step)
        if step <= self.last_step:
            return
        clean = {str(k): v for k, v in ((k, _scalar(v)) for k, v in data.items())
                 if v is not None}
        append_metrics(self.path, step, clean)
        self.last_step = step
        if self.run_dir is not None:
            from ccpo_lab.runs.layout import RunDir

            with contextlib.suppress(OSError):
                RunDir(self.run_dir).write_state("running", step=step)

    def finish(self) -> None:
        """Nothing to close (every line is flushed and synced)."""


def turn_indices(traj_uid: Sequence[Any]) -> np.ndarray:
    """``(N,)`` int64: how many earlier rows share each row's ``traj_uid``.

    verl-agent gathers a trajectory's turns in order, so this is the turn index.
    """
    seen: dict[Any, int] = {}
    out = np.empty(len(traj_uid), dtype=np.int64)
    for i, t in enumerate(traj_uid):
        k = seen.get(t, 0)
        out[i] = k
        seen[t] = k + 1
    return out


def step1_episodes(*, traj_uid: Sequence[Any], turn: Sequence[int], anchor_obs: Sequence[Any],
                   actions: Sequence[str], prompt_ids: Sequence[Sequence[int]],
                   valid: Sequence[Any], rewards: Sequence[Any],
                   group_size: int, task_type: str = "alfworld") -> list[dict[str, Any]]:
    """Episodes of one rollout batch (rows in gather order: trajectory by trajectory).

    The random ``uid`` / ``traj_uid`` strings are not recorded (they differ between runs):
    a trajectory is named by the order it appears in (environment index ``e``), as
    ``task_id = task-<e // group_size>`` and ``rollout = e % group_size``. Per turn:
    ``obs`` (the anchor observation), ``action`` (decoded response), ``input_hash`` (hash
    of the prompt token ids), ``valid`` and ``reward`` (the environment's).
    """
    from ccpo_lab.runs.rollouts import hash_tokens

    order: dict[Any, int] = {}
    episodes: list[dict[str, Any]] = []
    for i, t in enumerate(traj_uid):
        if t not in order:
            e = len(order)
            order[t] = e
            episodes.append({"task_id": f"task-{e // max(group_size, 1):04d}",
                             "rollout": e % max(group_size, 1), "task_type": task_type,
                             "turns": []})
        turns = episodes[order[t]]["turns"]
        turns.append({"t": int(turn[i]), "obs": str(anchor_obs[i]), "action": str(actions[i]),
                      "input_hash": hash_tokens([int(x) for x in prompt_ids[i]]),
                      "valid": bool(valid[i]), "reward": float(rewards[i])})
    for ep in episodes:
        ep["turns"].sort(key=lambda x: x["t"])
    return episodes


def record_step1(run_dir: str | Path, episodes: Sequence[Mapping[str, Any]],
                 step: int = 1) -> str:
    """Write ``rollouts/step-<step>.jsonl`` and, for step 1, ``run.json["step1"]``; return
    the fingerprint."""
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.runs.rollouts import rollout_file, write_rollouts

    rd = RunDir(Path(run_dir))
    fp = write_rollouts(rd.rollouts, episodes, step)
    if step == 1:
        rd.update_run(step1={"fingerprint": fp, "episodes": len(episodes),
                             "file": str(rollout_file(Path("rollouts")))})
    return fp
