"""One very long line: peak memory of ``report``, ``status``, ``sync`` and ``import``.

Issue 27 (item 10) measured a 200 MB run of NUL bytes at the end of ``metrics.jsonl`` (what
a power loss leaves): ``report``, ``status`` and ``sync`` took 446-627 MB; ``import`` of a
file with one 200 MB line 828 MB, while the README says import streams in about 50 MB.
The run-file gateway reads lines a chunk at a time and skips (names) a line longer than
4 MiB, so the peak should not grow with the line.

Each command runs as its own process; its peak resident memory is ``wait4``'s
``ru_maxrss``. Cases, on a small imported run (one arm, one seed, ``--rows`` rows):

- ``status``, ``report --format json`` and ``sync`` on the run, without and then with
  ``--mb`` MB of NUL bytes appended to its ``metrics.jsonl`` (the difference is what the
  tail costs);
- ``import`` of a JSONL log whose second line is ``--mb`` MB long and of a console log with
  one such line among its step lines (each imported without it, the line named).

``--baseline DIR`` runs the same commands with another checkout's code (e.g. ``git archive
main | tar -x -C /tmp/base``), in the same run, for before/after figures.
Run: ``.venv/bin/python benchmarks/bench_long_lines.py [--mb 200] [--baseline DIR]``.
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

REPO = Path(__file__).resolve().parents[1]


def run(code: Path, args: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """``ccpo-lab ARGS`` with the code of checkout ``code``: (seconds, peak MB, exit code,
    the last line of standard error)."""
    env = {**os.environ, "PYTHONPATH": str(code), "RAY_AUTH_MODE": "disabled"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                             env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        err.seek(0)
        last = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
        return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), last


def write_log(path: Path, rows: int) -> None:
    """A clean verl file-logger JSONL: held-out evaluations every 5 steps."""
    with path.open("w") as f:
        for s in range(rows):
            data = {"episode/success_rate": 0.5, "actor/loss": 0.1 * (s % 7)}
            if s % 5 == 0:
                data["val/success_rate"] = min(1.0, 0.2 + s / (2 * rows))
            f.write(json.dumps({"step": s, "data": data}) + "\n")


def long_line(f: object, mb: float, byte: bytes) -> None:
    """``mb`` MB of ``byte`` written to binary file ``f``, a MB at a time."""
    block = byte * (1 << 20)
    left = int(mb * (1 << 20))
    while left > 0:
        f.write(block[:left])  # type: ignore[attr-defined]
        left -= len(block)


def measure(name: str, code: Path, work: Path, mb: float, rows: int) -> list[str]:
    """Every case with one checkout's code; one line each."""
    root = work / name
    root.mkdir()
    lines = []

    def row(what: str, args: list[str]) -> None:
        wall, peak, rc, last = run(code, args, root)
        lines.append(f"{name:>9} {what:<40} {wall:7.1f} s {peak:7.0f} MB  rc {rc}")
        if rc != 0:
            lines.append(f"{'':>9}   {last[:150]}")

    log = root / "run.jsonl"
    write_log(log, rows)
    sweep = root / "study"
    row("import (clean log)", ["import", str(sweep), str(log), "--arm", "grpo", "--seed", "0"])
    for tail in ("", f"+ {mb:g} MB NUL tail"):
        if tail:
            with (sweep / "grpo" / "seed-0" / "metrics.jsonl").open("ab") as f:
                long_line(f, mb, b"\0")
        row(f"status {tail}", ["status", str(sweep)])
        row(f"report --format json {tail}", ["report", str(sweep), "--format", "json",
                                             "--window-start", "0", "--bootstrap-reps",
                                             "1000"])
        row(f"sync {tail}", ["sync", str(sweep)])
    jsonl = root / "long.jsonl"
    with jsonl.open("wb") as f:
        f.write(b'{"step": 0, "data": {"val/success_rate": 0.25}}\n{"step": 1, "data": {"x": "')
        long_line(f, mb, b"a")
        f.write(b'"}}\n')
    row(f"import JSONL, one {mb:g} MB line", ["import", str(root / "i1"), str(jsonl), "--arm",
                                              "grpo", "--seed", "0"])
    console = root / "long.log"
    with console.open("wb") as f:
        f.write(b"step:0 - val/success_rate:0.25\n")
        long_line(f, mb, b"#")
        f.write(b"\nstep:1 - val/success_rate:0.5\n")
    row(f"import console, one {mb:g} MB line", ["import", str(root / "i2"), str(console),
                                                "--arm", "grpo", "--seed", "0"])
    shutil.rmtree(root)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="Length of the long line (MB).")
    ap.add_argument("--rows", type=int, default=200, help="Rows of the run's metrics.")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="Another checkout to measure in the same run (before/after).")
    a = ap.parse_args()
    load = os.getloadavg()[0]
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), "unknown CPU")
    print(f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} CPUs, load {load:.1f}; "
          f"peak resident memory (wait4 ru_maxrss) of each command as its own process")
    with tempfile.TemporaryDirectory(prefix="ccpo-bench-long-") as tmp:
        out = []
        if a.baseline is not None:
            out += measure("baseline", a.baseline.resolve(), Path(tmp), a.mb, a.rows)
        out += measure("this", REPO, Path(tmp), a.mb, a.rows)
    print("\n".join(out))


if __name__ == "__main__":
    main()
