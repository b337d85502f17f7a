"""``ccpo-lab report --format json`` over 1,000 runs x 30 evaluations, 10,000 resamples.

Goal: <= 2 s on 2 cores. Builds a sweep directory of 100 arms x 10 seeds with the real
layout (``load_sweep`` + ``init_run_dir``); each run's ``metrics.jsonl`` has 150 training
rows of 40 metrics, 30 of which (every 5 steps) also carry the held-out metrics (overall,
six task types, turns), written in ``append_metrics``' exact format (without its per-line
fsync, to keep the set-up short). Then measures, in one run:

- the report in-process (``build_report`` + JSON), cold file cache aside: first and best
  of ``--repeat``, with the part spent reading the runs, and the Markdown and LaTeX
  rendering of the typed report;
- the whole command (``python -m ccpo_lab.cli.main report DIR --format json``), which adds
  interpreter start-up and imports (numpy, scipy.stats);
- ``import ccpo_lab.stats`` alone, for scale.

Run: ``.venv/bin/python benchmarks/bench_report.py [--arms 100] [--seeds 10] [--reps 10000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TASKS = ("pick_and_place", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
         "pick_two_obj_and_place")
N_TRAIN_KEYS = 40


def build(root: Path, n_arms: int, n_seeds: int, reps: int) -> Path:
    """Create the synthetic sweep directory; return it."""
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir

    arms_dir = root / "arms"
    arms_dir.mkdir()
    names = [f"arm-{i:03d}" for i in range(n_arms)]
    for name in names:
        (arms_dir / f"{name}.yaml").write_text("estimator:\n  name: grpo\n")
    sweep = root / "bench.yaml"
    sweep.write_text(f"name: bench\narms: {json.dumps(names)}\n"
                     f"seeds: {json.dumps(list(range(n_seeds)))}\narms_dir: {arms_dir}\n"
                     "backend: {kind: local}\nprotocol: {total_steps: 150, test_freq: 5}\n"
                     f"analysis: {{window_start: 70, bootstrap_reps: {reps}}}\n")
    sw = load_sweep(sweep)
    sweep_dir = sw.sweep_dir(root / "results")
    rng = np.random.default_rng(0)
    train_keys = [f"train/metric_{k:02d}" for k in range(N_TRAIN_KEYS)]
    for i, run in enumerate(sw.runs):
        rd = resolve_run_dir(sweep_dir, run)
        init_run_dir(rd, run)
        level = 0.6 + 0.002 * (i // n_seeds)
        lines = []
        for step in range(1, 151):
            data = {k: float(v) for k, v in zip(train_keys, rng.random(N_TRAIN_KEYS),
                                                strict=True)}
            if step % 5 == 0:
                data["val/success_rate"] = float(np.clip(level + 0.05 * rng.standard_normal(),
                                                         0, 1))
                data.update({f"val/{t}_success_rate": float(v)
                             for t, v in zip(TASKS, rng.random(6), strict=True)})
                data["val/length/mean"] = float(10 + rng.random())
            lines.append(json.dumps({"step": step, "data": data}, sort_keys=True) + "\n")
        rd.metrics.write_text("".join(lines), encoding="utf-8")
    (sweep_dir / "sweep.json").write_text(json.dumps({"sweep": "bench", "arms": names}))
    return sweep_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arms", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10_000, help="bootstrap resamples")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="keep the synthetic sweep here "
                    "(reused when it exists) instead of a temporary directory")
    args = ap.parse_args()
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.collect import load_run
    from ccpo_lab.report.export import to_json
    from ccpo_lab.report.latex import to_latex
    from ccpo_lab.report.tables import to_markdown
    from ccpo_lab.runs.layout import SweepDir

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = args.dir or Path(tmp)
        sweep_dir = root / "results" / "bench"
        if not sweep_dir.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            sweep_dir = build(root, args.arms, args.seeds, args.reps)
        n_runs = args.arms * args.seeds
        print(f"set-up: {n_runs} runs x 30 evaluations (150 rows x {N_TRAIN_KEYS + 8} metrics "
              f"max) in {time.perf_counter() - t0:.1f} s")
        times, reads, cpus, renders = [], [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            newest = SweepDir(sweep_dir).newest()[0]
            for f in newest.values():
                load_run(f, ["val/success_rate"])
            reads.append(time.perf_counter() - t)
            t, c = time.perf_counter(), time.process_time()
            rep = build_report(sweep_dir, {"bootstrap_reps": args.reps})
            text = to_json(rep.model)
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            t = time.perf_counter()
            to_markdown(rep.model), to_latex(rep.model)
            renders.append(time.perf_counter() - t)
        assert json.loads(text)["bootstrap_reps"] == args.reps
        cli = [sys.executable, "-m", "ccpo_lab.cli.main", "report", str(sweep_dir), "--format",
               "json", "--bootstrap-reps", str(args.reps)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        walls, child_cpu = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(cli, capture_output=True, check=True, env=env).stdout
            walls.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            child_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime
                             - before.ru_stime)
        assert json.loads(out)["arms"][0]["n_seeds"] == args.seeds
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import ccpo_lab.stats"], check=True, env=env)
        imp = time.perf_counter() - t
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other processes "
          "inflate wall times; CPU times are steadier)")
    print(f"{args.arms} arms x {args.seeds} seeds, "
          f"{args.reps} bootstrap resamples (the IQM's per arm from 8 seeds; the mean's "
          "and P(X > Y)'s from 18)")
    print(f"report in-process (build + JSON): first {times[0]:.3f} s, best {min(times):.3f} s"
          f"  -> {min(times) / 2.0:.2f} x the 2 s goal; CPU best {min(cpus):.3f} s")
    print(f"  of which reading the runs:        best {min(reads):.3f} s")
    print(f"Markdown + LaTeX tables:            best {min(renders):.3f} s")
    print(f"whole command (start-up + imports): median {statistics.median(walls):.3f} s"
          f"  -> {statistics.median(walls) / 2.0:.2f} x the 2 s goal; CPU median "
          f"{statistics.median(child_cpu):.3f} s")
    print(f"python -c 'import ccpo_lab.stats':  {imp:.3f} s")


if __name__ == "__main__":
    main()
