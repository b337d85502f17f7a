"""Reliability round 3 (issue 36), item 6: a ``report --out`` killed (SIGKILL: no handler
runs) before any rename of its swap leaves the old report or the new one in place, and
the next ``report --out`` deletes no file ccpo-lab did not write (``my-notes.txt``,
carried over from the old report)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ccpo_lab.report import directory as D

# A report --out in a child process that kills itself just before its k-th rename
# (os.rename, or the atomic exchange where there is one).
CHILD = r"""
import os, signal, sys
from pathlib import Path
from ccpo_lab.report import directory as D

out, k = Path(sys.argv[1]), int(sys.argv[2])
calls = [0]

def dying(fn):
    def call(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **kw)
    return call

D.os.rename = dying(os.rename)
if hasattr(D, "_exchange"):
    D._exchange = dying(D._exchange)

def fill(tmp):
    (tmp / "report.md").write_text("the new report\n")
    return [tmp / "report.md"]

D.write_report_dir(out, fill)
"""


def _fill(text: str) -> Callable[[Path], list[Path]]:
    def fill(tmp: Path) -> list[Path]:
        (tmp / "report.md").write_text(text)
        return [tmp / "report.md"]
    return fill


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_report_killed_before_any_rename_loses_nothing(tmp_path: Path, k: int) -> None:
    out = tmp_path / "report"
    D.write_report_dir(out, _fill("the old report\n"))
    (out / "my-notes.txt").write_text("mine\n")
    child = subprocess.run([sys.executable, "-c", CHILD, str(out), str(k)],
                           capture_output=True, timeout=120)
    assert child.returncode in (0, -signal.SIGKILL), child.stderr.decode()
    # at every instant: the old report or the new one, never absent
    assert (out / "report.md").read_text() in ("the old report\n", "the new report\n")
    D.write_report_dir(out, _fill("the next report\n"))  # tidies the killed one's leftovers
    assert (out / "report.md").read_text() == "the next report\n"
    notes = list(tmp_path.rglob("my-notes.txt"))
    assert [p.read_text() for p in notes] == ["mine\n"], notes  # kept, wherever it is
