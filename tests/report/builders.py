"""Real run directories for report, verify, import and tracking tests.

Runs are created with the project's own code (``load_sweep`` + ``resolve_run_dir`` +
``init_run_dir``); metrics and step-1 rollouts are written with ``append_metrics`` and
``write_rollouts`` from synthetic, hand-computed values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ccpo_lab.config.sweep import Sweep, load_sweep
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.runs.layout import RunDir, init_run_dir, resolve_run_dir
from ccpo_lab.runs.metrics import append_metrics
from ccpo_lab.runs.rollouts import write_rollouts

REPO = Path(__file__).resolve().parents[2]

TASK_NAMES = ("pick_and_place", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
              "pick_two_obj_and_place")


def sweep_file(tmp: Path, *, name: str = "study", arms: Sequence[str] = ("grpo", "gigpo"),
               seeds: Sequence[int] = (0, 1, 2), backend: str = "local",
               protocol: Mapping[str, Any] | None = None,
               analysis: Mapping[str, Any] | None = None, extra: str = "") -> Path:
    """Write a small sweep file (arms from the repository's ``arms/``) and return it."""
    proto = {"total_steps": 30, "test_freq": 5, "val_batch_size": 24, **(protocol or {})}
    ana = {"window_start": 20, "bootstrap_reps": 2000, **(analysis or {})}
    text = (f"name: {name}\narms: {json.dumps(list(arms))}\nseeds: {json.dumps(list(seeds))}\n"
            f"arms_dir: {REPO / 'arms'}\nbackend:\n  kind: {backend}\n"
            f"protocol: {json.dumps(proto)}\nanalysis: {json.dumps(ana)}\n{extra}")
    p = tmp / f"{name}.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def init_sweep(path: Path, results: Path, overrides: Sequence[str] = (),
               manifest: bool = True) -> tuple[Sweep, Path, dict[tuple[str, int], RunDir]]:
    """Load the sweep and initialise every run directory (and ``sweep.json``)."""
    sw = load_sweep(path, list(overrides))
    sweep_dir = sw.sweep_dir(results)
    rds = {}
    pairs = []
    for run in sw.runs:
        rd = resolve_run_dir(sweep_dir, run)
        init_run_dir(rd, run)
        rds[(run.arm, run.seed)] = rd
        pairs.append((run, rd))
    if manifest:  # the launcher's own manifest: resolved config, runs and their ids
        write_manifest(sw, sweep_dir, pairs)
    return sw, sweep_dir, rds


def log_evals(rd: RunDir, evals: Mapping[int, float], *, tasks: Mapping[int, Sequence[float]]
              | None = None, turns: Mapping[int, float] | None = None,
              train_steps: Sequence[int] = (), extra: Mapping[str, float] | None = None) -> None:
    """Append one metrics row per step: ``val/success_rate`` (and per-task, turns) at eval
    steps, a training metric at every step of ``train_steps`` (one row per step)."""
    steps = sorted(set(evals) | set(train_steps))
    for step in steps:
        data: dict[str, float] = {}
        if step in train_steps:
            data["episode/success_rate"] = 0.5
            data["episode/length/mean"] = 20.0
        if step in evals:
            data["val/success_rate"] = evals[step]
            if tasks is not None:
                data.update({f"val/{t}_success_rate": v
                             for t, v in zip(TASK_NAMES, tasks[step], strict=True)})
            if turns is not None:
                data["val/length/mean"] = turns[step]
        data.update(extra or {})
        append_metrics(rd.metrics, step, data)


def episodes(n: int = 3, *, change: tuple[int, int, str] | None = None) -> list[dict[str, Any]]:
    """``n`` step-1 episodes of two turns; ``change=(episode, turn, action)`` alters one."""
    eps = []
    for i in range(n):
        turns = [{"obs": f"task {i}: you are in a room", "admissible": ["look", "go to desk 1"],
                  "action": "look", "input_hash": f"h{i}0"},
                 {"obs": f"task {i}: you see a desk", "admissible": ["go to desk 1"],
                  "action": "go to desk 1", "input_hash": f"h{i}1"}]
        if change is not None and change[0] == i:
            turns[change[1]] = {**turns[change[1]], "action": change[2]}
        eps.append({"task_id": f"t{i:02d}", "rollout": 0, "task_type": "pick_and_place",
                    "turns": turns})
    return eps


def write_step1(rd: RunDir, eps: Sequence[Mapping[str, Any]]) -> str:
    """Write step-1 rollouts and record their fingerprint in ``run.json``, as backends do."""
    fp = write_rollouts(rd.rollouts, eps)
    rd.update_run(step1={"fingerprint": fp, "episodes": len(eps),
                         "file": "rollouts/step-000001.jsonl"})
    return fp


DEMO_ARMS = ("grpo", "gigpo", "ccpo-global-successor", "ccpo-return-hard",
             "ccpo-return-hard-fbjw")
DEMO_WINDOW = {  # per-seed converged-window targets (fractions), like the demo's report
    "grpo": (0.469, 0.396, 0.443),
    "gigpo": (0.511, 0.422, 0.495),
    "ccpo-global-successor": (0.365, 0.280, 0.381),
    "ccpo-return-hard": (0.579, 0.316, 0.464),
    "ccpo-return-hard-fbjw": (0.594, 0.319, 0.494),
}
TASK_FACTORS = (1.55, 1.15, 1.2, 1.05, 1.05, 0.0)  # Pick .. Pick2 (Pick2 never solved)


def demo_like_study(tmp: Path, results: Path, *, seed: int = 0,
                    arms: Sequence[str] = DEMO_ARMS) -> Path:
    """A realistic 5-arm x 3-seed study like ``sweeps/demo.yaml``'s, without training.

    60 steps, 48 held-out episodes (8 per task type) every 10 steps, window step >= 30;
    every arm starts from the same warm start (20.8% at step 0, identical step-1
    rollouts) and rises towards its seed's plateau (:data:`DEMO_WINDOW`) with binomial
    evaluation noise; per-task successes are counts out of 8 that add up to the overall
    rate; runs are completed, with training start and end times in ``state.json`` and the
    same attempt (one CPU) in ``run.json["cost"]``.
    """
    import numpy as np

    from ccpo_lab.config.yamlio import atomic_write_json

    rng = np.random.default_rng(seed)
    p = sweep_file(tmp, name="demo", arms=arms, seeds=(0, 1, 2),
                   protocol={"total_steps": 60, "test_freq": 10, "val_batch_size": 48},
                   analysis={"window_start": 30, "reference": "grpo", "bootstrap_reps": 10000})
    _, sweep_dir, rds = init_sweep(p, results)
    steps = (0, 10, 20, 30, 40, 50, 60)
    factors = np.array(TASK_FACTORS) / np.mean(TASK_FACTORS)
    # common random numbers: the same held-out games and seed give every arm the same draws
    draws = {(s, step): rng.random((6, 8)) for s in (0, 1, 2) for step in steps}
    for i, ((arm, s), rd) in enumerate(sorted(rds.items())):
        plateau = DEMO_WINDOW[arm][s]
        evals, tasks, turns = {}, {}, {}
        for step in steps:
            frac = min(1.0, (1 - np.exp(-step / 12.0)) / (1 - np.exp(-30 / 12.0)))
            p_now = 0.208 + (plateau - 0.208) * frac
            counts = (draws[(s, step)] < np.clip(p_now * factors, 0.0, 1.0)[:, None]).sum(axis=1)
            if step == 0:
                counts = np.array([3, 2, 1, 2, 2, 0])  # the shared warm start: 10/48
            tasks[step] = tuple(counts / 8.0)
            evals[step] = float(counts.sum() / 48.0)
            turns[step] = float(11.5 - 5.0 * evals[step] + 0.1 * draws[(s, step)][0, 0])
        log_evals(rd, evals, tasks=tasks, turns=turns, train_steps=range(1, 61),
                  extra={"val/n_episodes": 48})
        write_step1(rd, episodes())
        start = 1_764_500_000 + 300 * i  # 2025-11-30, runs two at a time
        end = start + 240 + int(rng.integers(0, 60))
        atomic_write_json(rd.state_json, {
            "state": "completed", "step": 60, "total_steps": 60,
            "started": _iso(start), "updated": _iso(end)})
        rd.update_run(cost={"device": "CPU", "attempts": [  # one CPU thread, as the demo
            {"started": _iso(start), "ended": _iso(end), "host": "test", "device": "CPU",
             "devices": 1, "nodes": 1, "end": "completed"}]})
    return sweep_dir


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
