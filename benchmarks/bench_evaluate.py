"""``ccpo-lab evaluate`` on the demo, and what the evaluations add to ``report``'s time.

Two measurements, in one run:

1. **Evaluating the demo** (``--demo results/demo``, a finished ``make demo``): the sweep
   directory and its game set are copied to a temporary folder (its evaluations, MLflow
   store and report left out), then, with the copy's own launcher (the demo's ``local``,
   2 runs at once on 2 cores):

   - the out-of-distribution split's generation alone (the demo's held-out size, 48
     games, each checked by the planner: what the first evaluation of a sweep pays once);
   - ``ccpo-lab evaluate COPY --checkpoint final --split both --wait`` (15 jobs, 30
     evaluations of 48 games): wall time (the first one generates the split), and the
     jobs' time from start to end;
   - the same command again: nothing is redone;
   - ``--launcher inline --temperature 1.0``: every evaluation again (a new setting), in
     this one process: the CPU time of the whole work.

2. **The report's extra time** on the synthetic 1,000-run sweep of ``bench_report.py``
   (100 arms x 10 seeds, 30 evaluations each), before and after adding per-episode files:
   per run an ``in`` and an ``out`` evaluation of its final checkpoint, 48 games x 1,
   and a ``best.json`` naming another step (so 1,000 x 2 files and two checkpoint labels,
   best at the final step). ``build_report`` + JSON in-process, best of ``--repeat``
   (the goal: under 2 s with the evaluations, plots excluded), and its Markdown + LaTeX.

Run: ``.venv/bin/python benchmarks/bench_evaluate.py --demo results/demo``
(``--skip-demo`` for the report part alone; ``--arms``/``--seeds`` to change its size).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_report import build  # noqa: E402


def _copy_demo(demo: Path, dest: Path) -> Path:
    """Copy the sweep directory (without evaluations, MLflow, report) and its game set."""
    skip = {"evals", "report", "mlartifacts", "_jobs", "logs"}
    out = dest / "results" / demo.name

    def ignore(_d: str, names: list[str]) -> set[str]:
        return {n for n in names if n in skip or n.startswith("mlflow.db")}

    shutil.copytree(demo, out, ignore=ignore)
    games = demo.parent / ".games"
    shutil.copytree(games, dest / "results" / ".games",
                    ignore=lambda _d, names: {n for n in names if n.startswith(("ood-",
                                                                                 ".lock-ood"))})
    return out


def _job_cpu(sweep: Path) -> tuple[float, int]:
    """Seconds from start to end of every evaluation job (their state files), and count."""
    from datetime import datetime

    from ccpo_lab.evaluation.track import sweep_jobs

    total, n = 0.0, 0
    for job in sweep_jobs(sweep):
        st = job.read_state()
        if st.get("started") and st.get("updated"):
            total += (datetime.fromisoformat(st["updated"])
                      - datetime.fromisoformat(st["started"])).total_seconds()
            n += 1
    return total, n


def bench_demo(demo: Path) -> None:
    from ccpo_lab.backends.local.games import load_game_set
    from ccpo_lab.backends.local.ood import generate_ood

    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy_demo(demo.resolve(), Path(tmp))
        games_root = next((copy.parent / ".games").glob("games-*"))
        gs = load_game_set(games_root)
        t = time.perf_counter()
        generate_ood(Path(tmp) / "ood-alone", gs, 48, workers=1)
        print(f"out-of-distribution split, 48 games generated and checked (1 process): "
              f"{time.perf_counter() - t:.1f} s")
        base = [sys.executable, "-m", "ccpo_lab.cli.main", "evaluate", str(copy),
                "--checkpoint", "final", "--split", "both", "--wait"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        runs = (("the demo's launcher (local, 2 at once), first: generates the split", []),
                ("again: nothing to do", []),
                ("inline, one process, a new temperature (1.0): every evaluation again",
                 ["--launcher", "inline", "--temperature", "1.0"]))
        for what, extra in runs:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            out = subprocess.run([*base, *extra], capture_output=True, text=True, env=env,
                                 check=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            last = out.stdout.strip().splitlines()[-1].split(";")[0]
            where = "of the command, its jobs included" if extra else \
                "of the command alone (the pool's jobs are detached)"
            print(f"{what}: {wall:.1f} s wall, {cpu:.1f} s CPU {where}; {last}")
            if what.startswith("the demo's"):
                spent, n = _job_cpu(copy)
                print(f"  {n} jobs, {spent:.0f} s from start to end summed over jobs "
                      f"({spent / max(n, 1):.1f} s a job)")


def _add_evaluations(sweep_dir: Path, n_games: int) -> int:
    """Write an ``in`` and an ``out`` evaluation of each run's final checkpoint."""
    from ccpo_lab.evaluation.spec import EvalSetting, EvalTarget
    from ccpo_lab.runs.evals import eval_path, write_eval_file
    from ccpo_lab.runs.layout import RunDir, SweepDir

    rng = np.random.default_rng(0)
    types = ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
             "pick_two_obj_and_place"]
    n = 0
    for i, rd in enumerate(SweepDir(sweep_dir).run_dirs()):
        run = json.loads(RunDir(rd.path).run_json.read_text())
        level = 0.6 + 0.002 * (i // 10)
        best = rd.checkpoints / "best"
        best.mkdir(parents=True, exist_ok=True)
        (best / "best.json").write_text(json.dumps({"step": 150, "value": 0.7,
                                                    "file": "step-000150.pt"}))
        for split in ("in", "out"):
            games = [f"{'valid_seen' if split == 'in' else 'valid_unseen'}/{g:05d}"
                     for g in range(n_games)]
            t = EvalTarget(150, EvalSetting(split, n_games, 1, 0.4), {"split": split,
                                                                       "bench": 1})
            header = {"eval": 1, "key": t.key, "run_id": run["run_id"], "arm": run["arm"],
                      "seed": run["seed"], "backend": "local", "split": split,
                      "episodes": n_games, "repeats": 1, "temperature": 0.4,
                      "checkpoint": {"step": 150, "weights": "x"},
                      "draw": {"id": t.draw_id, "spec": dict(t.draw), "games": games}}
            won = rng.random(n_games) < level - (0.1 if split == "out" else 0.0)
            eps = [{"repeat": 0, "i": g, "game": games[g], "task_type": types[g % 6],
                    "success": bool(won[g]), "reward": 10.0 * bool(won[g]),
                    "turns": int(rng.integers(3, 12)), "invalid": 0} for g in range(n_games)]
            write_eval_file(eval_path(rd, t.key), header, eps)
            n += 1
    return n


def bench_report(arms: int, seeds: int, reps: int, repeat: int) -> None:
    from ccpo_lab.report.analysis import build_report
    from ccpo_lab.report.export import to_json
    from ccpo_lab.report.latex import to_latex
    from ccpo_lab.report.tables import to_markdown

    def measure(sweep_dir: Path) -> tuple[float, float, float, int]:
        times, cpus, renders = [], [], []
        rep = None
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            rep = build_report(sweep_dir, {"bootstrap_reps": reps})
            to_json(rep.model)
            times.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
            t = time.perf_counter()
            to_markdown(rep.model), to_latex(rep.model)
            renders.append(time.perf_counter() - t)
        assert rep is not None
        groups = len(rep.model.evaluation.groups) if rep.model.evaluation else 0
        return min(times), min(cpus), min(renders), groups

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        sweep_dir = build(Path(tmp), arms, seeds, reps)
        print(f"set-up: {arms * seeds} runs x 30 evaluations in {time.perf_counter() - t:.1f} s")
        before = measure(sweep_dir)
        t = time.perf_counter()
        n_files = _add_evaluations(sweep_dir, 48)
        print(f"added {n_files} evaluation files (48 games x 1 each) in "
              f"{time.perf_counter() - t:.1f} s")
        after = measure(sweep_dir)
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"report in-process (build + JSON), best of {repeat}: without evaluations "
          f"{before[0]:.3f} s (CPU {before[1]:.3f} s), with them {after[0]:.3f} s (CPU "
          f"{after[1]:.3f} s, {after[3]} checkpoint evaluation tables): +{after[0] - before[0]:.3f}"
          f" s, {after[0] / 2.0:.2f} x the 2 s goal")
    print(f"Markdown + LaTeX: {before[2]:.3f} s -> {after[2]:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--demo", type=Path, default=REPO / "results" / "demo")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--arms", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.skip_demo:
        if not (args.demo / "sweep.json").is_file():
            raise SystemExit(f"{args.demo}: not a finished demo (run `make demo`), or pass "
                             "--skip-demo")
        bench_demo(args.demo)
    bench_report(args.arms, args.seeds, args.reps, args.repeat)


if __name__ == "__main__":
    main()
