"""Throughput of the local backend's training loop against raw random play, same games.

Run: ``.venv/bin/python benchmarks/bench_local_backend.py [--sweep sweeps/demo.yaml]
[--arm gigpo] [--steps 10] [--raw-steps 2000] [OVERRIDES...]``.

Both measurements use the demo sweep's generated games and engines in this process, after
the engines are loaded (loading is timed separately: once per process):

- raw: random admissible actions (``help`` excluded, as the policy sees them), resets
  included, episodes of ``max_steps``;
- training: ``--steps`` full training steps of the arm (lockstep rollouts of the policy,
  reference forward, estimator, PPO update) plus the held-out evaluations the protocol
  schedules in those steps.

Prints environment steps per second of both, their ratio (goal >= 0.5), and the policy's
share of the training loop's time. For context it also times raw play on the stock
engine (:mod:`ccpo_lab.backends.local.speedups` removed, same engines): the ratio's
denominator is the sped-up engine the training loop really uses. Figures only, no
assertion.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def _raw_play(engines: list, n_steps: int, rng: np.random.Generator) -> tuple[int, float]:
    from ccpo_lab.backends.local.prompts import choices

    steps, i = 0, 0
    t0 = time.perf_counter()
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
    return steps, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sweep", default="sweeps/demo.yaml")
    ap.add_argument("--arm", default="gigpo")
    ap.add_argument("--steps", type=int, default=10, help="training steps timed")
    ap.add_argument("--raw-steps", type=int, default=2000, help="random-play steps timed")
    ap.add_argument("--stock-steps", type=int, default=300,
                    help="random-play steps timed on the stock engine (0: skip)")
    ap.add_argument("--games-cache", default=None, help="game cache (default: a temp dir)")
    ap.add_argument("overrides", nargs="*", help="sweep overrides, e.g. protocol.ppo_epochs=1")
    args = ap.parse_args()

    import torch

    from ccpo_lab.backends.local.games import ensure_games
    from ccpo_lab.backends.local.runner import game_spec
    from ccpo_lab.backends.local.trainer import Trainer
    from ccpo_lab.config.sweep import load_sweep

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
    t0 = time.perf_counter()
    train_engines = [trainer.train_pool.engine(g) for g in games.train]
    for env in train_engines:
        env.reset(0)
    for i, g in enumerate(games.eval[:p.val_batch_size]):
        trainer.eval_pool.engine(g, i // max(1, len(games.eval))).reset(0)
    print(f"engine loading (once per process): {time.perf_counter() - t0:.1f} s for "
          f"{len(train_engines) + min(len(games.eval), p.val_batch_size)} engines")

    raw_steps, raw_s = _raw_play(train_engines, args.raw_steps,
                                 np.random.default_rng(0))
    raw_rate = raw_steps / raw_s
    print(f"raw random play: {raw_steps} env steps in {raw_s:.1f} s = {raw_rate:.0f} steps/s")

    t0 = time.perf_counter()
    trainer.initialise()
    print(f"warm start: {time.perf_counter() - t0:.1f} s")
    timer = trainer.timer
    env0, pol0, n0 = timer.env, timer.policy, timer.env_steps
    eval_steps = set(p.eval_steps)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        trainer.train_step()
        if trainer.step in eval_steps:
            trainer.evaluate(trainer.step)
    wall = time.perf_counter() - t0
    steps = timer.env_steps - n0
    rate = steps / wall
    print(f"training loop: {args.steps} steps, {steps} env steps in {wall:.1f} s = "
          f"{rate:.0f} env steps/s")
    print(f"  engine {timer.env - env0:.1f} s ({(timer.env - env0) / wall:.0%}), policy "
          f"{timer.policy - pol0:.1f} s ({(timer.policy - pol0) / wall:.0%}: rollout "
          "forwards, reference forward, PPO update), other "
          f"{wall - (timer.env - env0) - (timer.policy - pol0):.1f} s")
    print(f"training / raw env steps per second: {rate / raw_rate:.2f} (goal >= 0.50)")
    print(f"policy share of the training step time: {(timer.policy - pol0) / wall:.0%}")
    if args.stock_steps:  # last: uninstalling the speed-ups empties their caches
        from ccpo_lab.backends.local import speedups

        speedups.uninstall()
        n, s = _raw_play(train_engines, args.stock_steps, np.random.default_rng(0))
        print(f"context: the stock engine (no speed-ups) plays {n / s:.0f} random steps/s on "
              f"the same games; the speed-ups make raw play {raw_rate / (n / s):.1f}x faster")


if __name__ == "__main__":
    main()
