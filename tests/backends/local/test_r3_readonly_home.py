"""Reliability round 3 (issue 36), item 11: a home where ``~/.cache`` cannot be made does
not stop the CPU backend at ``import alfworld``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_alfworld_imports_with_a_home_that_cannot_hold_a_cache(tmp_path: Path) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")  # ~/.cache under a file: cannot be made, even by root
    env = {k: v for k, v in os.environ.items() if k not in ("ALFWORLD_DATA", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), TMPDIR=str(tmp_path))
    code = ("import ccpo_lab.backends.local\nimport alfworld.info\n"
            "print(alfworld.info.ALFWORLD_DATA)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(tmp_path / f"ccpo-lab-alfworld-{os.getuid()}")
