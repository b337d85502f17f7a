"""A big verl log through ``import``, ``status``, ``report`` and ``sync``: time and peak memory.

Issue 15 measured a 200 MB verl console log: ``import`` 34 s at 1.36 GB peak, ``status``
on that run 4 s and 1.17 GB, ``sync`` 3.4 M of 5.4 M values in 10 minutes without a word.
This benchmark makes such a log (``make_verl_log.py``), then runs each command as its own
process and reads the process's peak resident memory (``wait4``'s ``ru_maxrss``):

- ``import`` of the whole log, ``status`` and ``report --format json`` on the result;
- ``sync`` of the first ``--sync-mb`` MB of the log imported as its own sweep (a full
  sync of 200 MB takes MLflow's sqlite store many minutes): values/s, peak memory, and
  how many progress lines it printed.

``--baseline DIR`` runs the same commands with another checkout's code (e.g. a worktree
of main: ``git worktree add --detach /tmp/base main``), in the same run, for before/after
ratios. Goal: memory that does not grow with the log (streamed), and progress on a long
sync. Run: ``.venv/bin/python benchmarks/bench_big_log.py [--mb 200] [--baseline DIR]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from make_verl_log import write_log  # noqa: E402


def run(code: Path, args: list[str], cwd: Path) -> tuple[float, float, int, str, str]:
    """``ccpo-lab ARGS`` with the code of checkout ``code``: (seconds, peak MB, exit code,
    stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(code), "RAY_AUTH_MODE": "disabled"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                             env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (wall, usage.ru_maxrss / 1024, p.returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"))


def head(src: Path, dest: Path, mb: float) -> Path:
    """The first ``mb`` MB of ``src`` (whole lines) as ``dest``."""
    with src.open("rb") as f, dest.open("wb") as g:
        g.write(f.read(int(mb * 1e6)))
        g.write(f.readline())
    return dest


def measure(name: str, code: Path, log: Path, small: Path, work: Path) -> list[str]:
    """The four commands with one checkout's code; one line each."""
    root = work / name
    root.mkdir()
    lines = []

    def row(what: str, args: list[str], extra: str = "") -> tuple[str, str]:
        wall, mb, rc, out, err = run(code, args, root)
        lines.append(f"{name:>9} {what:<26} {wall:8.1f} s {mb:8.0f} MB  rc {rc}{extra}")
        if rc != 0:
            lines.append(f"          stderr: {err.strip().splitlines()[-1:]}")
        return out, err

    sweep = root / "big"
    row(f"import {log.stat().st_size / 1e6:.0f} MB log",
        ["import", str(sweep), str(log), "--arm", "grpo", "--seed", "0"])
    row("status", ["status", str(sweep)])
    row("report --format json", ["report", str(sweep), "--format", "json", "--window-start",
                                 "0", "--bootstrap-reps", "1000"])
    small_sweep = root / "small"
    row(f"import {small.stat().st_size / 1e6:.0f} MB log",
        ["import", str(small_sweep), str(small), "--arm", "grpo", "--seed", "0"])
    t = time.perf_counter()
    out, err = row("sync of it", ["sync", str(small_sweep)])
    wall = time.perf_counter() - t
    sent = next((int(w.replace(",", "")) for w in [out.split(" metric values sent")[0]
                                                   .rsplit(" ", 1)[-1]] if w.isdigit()), 0)
    progress = sum("metric values sent in" in ln for ln in err.splitlines())
    lines.append(f"{'':>9} {'':<26} {sent:,} values, {sent / wall:,.0f} values/s, "
                 f"{progress} progress lines")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=200.0, help="size of the log")
    ap.add_argument("--sync-mb", type=float, default=10.0, help="size of the synced log")
    ap.add_argument("--log", type=Path, default=None, help="reuse this log (made if absent)")
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-big-log-") as tmp:
        work = Path(tmp)
        log = args.log or work / "verl.log"
        if not log.exists():
            t = time.perf_counter()
            stats = write_log(log, args.mb)
            print(f"log: {stats} in {time.perf_counter() - t:.0f} s")
        small = head(log, work / "small.log", args.sync_mb)
        print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (other "
              "processes inflate wall times; memory is steady)")
        print(f"{'code':>9} {'command':<26} {'wall':>10} {'peak RSS':>11}")
        trees = [("this", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
        for name, code in trees:
            for line in measure(name, code, log, small, work):
                print(line, flush=True)
            shutil.rmtree(work / name, ignore_errors=True)


if __name__ == "__main__":
    main()
