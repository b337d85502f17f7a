"""Wall time of ``make demo``'s commands at given git revisions, one after the other.

Run: ``.venv/bin/python benchmarks/sweep_at_revision.py REV [REV ...] [--sweep
sweeps/demo.yaml] [--keep DIR] [--override KEY=VALUE ...]``, e.g. ``... main speed`` to
compare a branch with main side by side on one machine.

For each revision in turn: ``git archive REV`` into a temporary folder, then, with this
environment's Python and that folder first on ``PYTHONPATH`` (the revision's own code, the
dependencies installed here: set-up excluded), the three commands of ``make demo`` in a
fresh results folder: ``ccpo-lab sweep SWEEP --wait``, ``ccpo-lab verify`` and
``ccpo-lab report --out``. Game generation is part of the sweep, as in ``make demo`` from a
fresh clone. Prints the wall time of each command and their total, with the load average
before and after, then the ratio of each total to the first revision's, and whether every
run's ``metrics.jsonl`` is byte-identical across the revisions (an exact speed-up leaves
them so) and, where the bytes differ, whether the training metrics are: every row's step and
every value but the machine's measurements (``timing_s/``, ``perf/``:
``ccpo_lab.runs.cost.MEASURED_PREFIXES``, logged since issue 26, so a revision before it
and one after never agree byte for byte). Never run it while other heavy jobs share the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ccpo_lab.runs.cost import MEASURED_PREFIXES

REPO = Path(__file__).resolve().parents[1]


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _export(rev: str, dest: Path) -> str:
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", commit], cwd=REPO, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    return commit


def _run(label: str, cmd: list[str], tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "RAY_AUTH_MODE": "disabled",
           "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    secs = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{label} failed with exit code {proc.returncode}")
    print(f"  {label}: {secs:.1f} s", flush=True)
    return secs


def _training(text: bytes) -> list[tuple[int, dict[str, object]]]:
    """A ``metrics.jsonl``'s rows without the machine's measurements (timings, memory)."""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [(r["step"], {k: v for k, v in r["data"].items()
                         if not k.startswith(MEASURED_PREFIXES)}) for r in rows]


def _compare(metrics: list[dict[str, bytes]]) -> None:
    """Print which runs' metrics agree across the revisions, byte for byte and apart from
    the machine's measurements."""
    runs = sorted(set().union(*metrics))
    same = [r for r in runs if all(m.get(r) == metrics[0].get(r) for m in metrics)]
    print(f"metrics.jsonl byte-identical across the revisions: {len(same)}/{len(runs)} runs")
    equal = [r for r in runs if all(r in m for m in metrics) and all(
        _training(m[r]) == _training(metrics[0][r]) for m in metrics)]
    print(f"training metrics identical (every step and value but {', '.join(MEASURED_PREFIXES)}): "
          f"{len(equal)}/{len(runs)} runs" + ("" if len(equal) == len(runs) else
                                              "; differ: " + ", ".join(
                                                  r for r in runs if r not in equal)))


def _sweep_name(tree: Path, sweep: str) -> str:
    import yaml

    return str(yaml.safe_load((tree / sweep).read_text())["name"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("revisions", nargs="+", help="git revisions (branches, tags, commits)")
    ap.add_argument("--sweep", default="sweeps/demo.yaml")
    ap.add_argument("--keep", default=None,
                    help="keep each revision's results under DIR/<n>-<rev> (default: removed)")
    ap.add_argument("--override", action="append", default=[],
                    help="a sweep override, e.g. --override protocol.total_steps=20")
    args = ap.parse_args()
    cli = [sys.executable, "-m", "ccpo_lab.cli.main"]
    totals: list[float] = []
    metrics: list[dict[str, bytes]] = []
    work = Path(tempfile.mkdtemp(prefix="ccpo-sweep-at-rev-"))
    try:
        for n, rev in enumerate(args.revisions):
            tree = work / f"tree-{n}"
            commit = _export(rev, tree)
            results = (Path(args.keep) / f"{n}-{rev.replace('/', '_')}" if args.keep
                       else work / f"results-{n}")
            results.mkdir(parents=True, exist_ok=True)
            sweep_dir = results / _sweep_name(tree, args.sweep)
            print(f"{rev} ({commit[:10]}): {_load()}", flush=True)
            total = _run("sweep --wait", [*cli, "sweep", args.sweep, *args.override,
                                          "--results", str(results), "--wait"], tree)
            total += _run("verify", [*cli, "verify", str(sweep_dir)], tree)
            total += _run("report", [*cli, "report", str(sweep_dir), "--out",
                                     str(sweep_dir / "report")], tree)
            minutes, seconds = divmod(round(total), 60)
            print(f"  total {total:.1f} s ({minutes} min {seconds} s); {_load()}", flush=True)
            totals.append(total)
            metrics.append({str(p.relative_to(sweep_dir)): p.read_bytes()
                            for p in sorted(sweep_dir.glob("*/seed-*/metrics.jsonl"))})
            shutil.rmtree(tree)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for rev, total in zip(args.revisions[1:], totals[1:], strict=True):
        print(f"{rev} / {args.revisions[0]} wall time: {total / totals[0]:.2f}")
    if len(metrics) > 1:
        _compare(metrics)


if __name__ == "__main__":
    main()
