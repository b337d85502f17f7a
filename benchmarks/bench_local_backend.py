"""Throughput of the local backend's training loop against raw random play, same games.

Run: ``.venv/bin/python benchmarks/bench_local_backend.py [--sweep sweeps/demo.yaml]
[--arm gigpo] [--steps 10] [--raw-steps 2000] [--stock-steps 300] [--rss-steps 10]
[OVERRIDES...]``.

Both measurements use the sweep's generated games and engines in this process, after the
engines are loaded (loading is timed separately: once per process):

- raw: random admissible actions (``help`` excluded, as the policy sees them), resets
  included, episodes of ``max_steps``;
- training: ``--steps`` full training steps of the arm (lockstep rollouts of the policy,
  reference forward, estimator, PPO update) plus the held-out evaluations the protocol
  schedules in those steps.

The two alternate: a block of ``--raw-steps / --steps`` random steps before each training
step (the engines are reset at every episode, so this changes nothing the trainer does), so
that both figures come from the same minutes of a machine whose speed drifts.

Prints environment steps per second of both and their ratio (goal >= 0.5), by the wall
clock and by this process's CPU time (the CPU ratio is the one to trust on a machine other
jobs share; the load average is printed), and the policy's share of the training loop with
its parts. ``--rss-steps``: the peak resident memory of one run (a fresh process that
trains the arm for that many steps, engines and warm start included, the warm start cloned
as the first arm of a seed does; goal: no more than before). For context it also times raw
play on the stock engine (:mod:`ccpo_lab.backends.local.speedups` removed, the same games
on engines opened without them, loading not timed): the ratio's denominator
is the sped-up engine the training loop really uses. Figures only, no assertion.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GOAL_RATIO = 0.5


def _raw_play(engines: list, n_steps: int, rng: np.random.Generator) -> tuple[int, float, float]:
    """``(env steps, wall s, cpu s)`` of random play until ``n_steps`` steps are taken."""
    from ccpo_lab.backends.local.prompts import choices

    steps, i = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    while steps < n_steps:
        env = engines[i % len(engines)]
        i += 1
        adm = choices(env.reset(0).admissible)
        while True:
            result = env.step(adm[int(rng.integers(len(adm)))])
            steps += 1
            if result.done:
                break
            adm = choices(result.admissible)
    return steps, time.perf_counter() - t0, time.process_time() - c0


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f} on {} CPUs".format(*os.getloadavg(),
                                                                 os.cpu_count())


def _clone_warm_start() -> None:
    """Make this process clone its warm start instead of loading a shared one (the first
    arm of each seed does; the figures are those of that run)."""
    from ccpo_lab.backends.local import warmstart

    warmstart._load = lambda path: None  # type: ignore[assignment]


def _one_run(args: argparse.Namespace) -> None:
    """Child mode: train the arm for ``--rss-steps`` steps in a fresh run directory and
    print this process's peak resident memory."""
    _clone_warm_start()
    from ccpo_lab.backends.local.runner import train
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.layout import RunDir, init_run_dir

    games = f"backend.local.games_cache={args.games_cache}"
    sw = load_sweep(args.sweep, [*args.overrides, f"protocol.total_steps={args.rss_steps}",
                                 games])
    run = next(r for r in sw.runs if r.arm == args.arm)
    with tempfile.TemporaryDirectory(prefix="ccpo-bench-run-") as tmp:
        rd = RunDir(Path(tmp) / run.arm / f"seed-{run.seed}")
        init_run_dir(rd, run)
        summary = train(run, rd)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"PEAK_RSS_MIB {peak_kib / 1024:.1f} STEPS {summary['steps']} "
          f"WALL {summary['wall_s']}")


def _peak_rss(args: argparse.Namespace, cache: Path) -> None:
    cmd = [sys.executable, __file__, "--one-run", "--sweep", args.sweep, "--arm", args.arm,
           "--rss-steps", str(args.rss_steps), "--games-cache", str(cache), *args.overrides]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("PEAK_RSS_MIB"))
    _, mib, _, steps, _, wall = line.split()
    print(f"peak memory of one run ({args.arm}, {steps} steps from a fresh process, engines "
          f"and warm start included): {float(mib):.0f} MiB resident ({float(wall):.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", default="sweeps/demo.yaml")
    ap.add_argument("--arm", default="gigpo")
    ap.add_argument("--steps", type=int, default=10, help="training steps timed")
    ap.add_argument("--raw-steps", type=int, default=2000, help="random-play steps timed")
    ap.add_argument("--stock-steps", type=int, default=300,
                    help="random-play steps timed on the stock engine (0: skip)")
    ap.add_argument("--rss-steps", type=int, default=10,
                    help="steps of the run whose peak memory is measured (0: skip)")
    ap.add_argument("--games-cache", default=None, help="game cache (default: a temp dir)")
    ap.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*", help="sweep overrides, e.g. protocol.ppo_epochs=1")
    args = ap.parse_args()
    if args.one_run:
        _one_run(args)
        return

    import torch

    from ccpo_lab.backends.local.games import ensure_games
    from ccpo_lab.backends.local.runner import game_spec
    from ccpo_lab.backends.local.trainer import Trainer
    from ccpo_lab.config.sweep import load_sweep

    print(_load())
    _clone_warm_start()
    sw = load_sweep(args.sweep, args.overrides)
    run = next(r for r in sw.runs if r.arm == args.arm)
    p, cfg = run.protocol, run.backend.local
    torch.set_num_threads(cfg.num_threads)
    cache = Path(args.games_cache or tempfile.mkdtemp(prefix="ccpo-bench-games-"))
    t0 = time.perf_counter()
    games = ensure_games(cache, game_spec(run))
    print(f"games: {len(games.train)} train + {len(games.eval)} held-out "
          f"({time.perf_counter() - t0:.1f} s to generate or load)")

    trainer = Trainer(run, games)
    t0, c0 = time.perf_counter(), time.process_time()
    train_engines = [trainer.train_pool.engine(g) for g in games.train]
    for env in train_engines:
        env.reset(0)
    for i, g in enumerate(games.eval[:p.val_batch_size]):
        trainer.eval_pool.engine(g, i // max(1, len(games.eval))).reset(0)
    n_engines = len(train_engines) + min(len(games.eval), p.val_batch_size)
    print(f"engine loading (once per process): {time.perf_counter() - t0:.1f} s "
          f"({time.process_time() - c0:.1f} s CPU) for {n_engines} engines")

    t0 = time.perf_counter()
    trainer.initialise()
    print(f"warm start: {time.perf_counter() - t0:.1f} s")
    # raw play and training alternate, a block of raw play before each training step, so
    # that both see the same machine (a shared machine's speed drifts within a minute)
    rng = np.random.default_rng(0)
    block = -(-args.raw_steps // args.steps)
    raw_steps, raw_s, raw_cpu = 0, 0.0, 0.0
    timer = trainer.timer
    before = timer.snapshot()
    eval_steps = set(p.eval_steps)
    wall, cpu = 0.0, 0.0
    for _ in range(args.steps):
        n, s, c = _raw_play(train_engines, block, rng)
        raw_steps, raw_s, raw_cpu = raw_steps + n, raw_s + s, raw_cpu + c
        t0, c0 = time.perf_counter(), time.process_time()
        trainer.train_step()
        if trainer.step in eval_steps:
            trainer.evaluate(trainer.step)
        wall, cpu = wall + time.perf_counter() - t0, cpu + time.process_time() - c0
    raw_rate, raw_cpu_rate = raw_steps / raw_s, raw_steps / raw_cpu
    print(f"raw random play: {raw_steps} env steps in {raw_s:.1f} s = {raw_rate:.0f} steps/s "
          f"({raw_cpu_rate:.0f} per CPU second), in {args.steps} blocks between the "
          f"training steps")
    spent = timer.snapshot() - before
    rate, cpu_rate = spent.env_steps / wall, spent.env_steps / cpu
    print(f"training loop: {args.steps} steps, {spent.env_steps} env steps in {wall:.1f} s = "
          f"{rate:.0f} env steps/s ({cpu_rate:.0f} per CPU second)")
    print(f"  engine {spent.env:.1f} s ({spent.env / wall:.0%}), policy {spent.policy:.1f} s "
          f"({spent.policy / wall:.0%}), other {wall - spent.env - spent.policy:.1f} s")
    print("  policy parts: " + ", ".join(
        f"{name} {secs:.1f} s ({secs / wall:.0%})" for name, secs in spent.policy_parts()))
    print(f"training / raw env steps per second: {rate / raw_rate:.2f} "
          f"(goal >= {GOAL_RATIO:.2f}); by CPU time: {cpu_rate / raw_cpu_rate:.2f}")
    print(f"policy share of the training step time: {spent.policy / wall:.0%}")
    print(_load())
    if args.rss_steps:
        _peak_rss(args, cache)
    if args.stock_steps:  # last: uninstalling the speed-ups empties their caches
        from ccpo_lab.backends.local import speedups
        from ccpo_lab.backends.local.env import AlfworldEnv

        speedups.uninstall()
        stock = [AlfworldEnv([g], max_steps=p.max_steps, fast=False) for g in games.train]
        for env in stock:  # loading is not timed
            env.reset(0)
        n, s, _ = _raw_play(stock, args.stock_steps, np.random.default_rng(0))
        print(f"context: the stock engine (no speed-ups) plays {n / s:.0f} random steps/s on "
              f"the same games; the speed-ups make raw play {raw_rate / (n / s):.1f}x faster")


if __name__ == "__main__":
    main()
