"""Shared fixtures."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# GPU slots of the tests lock in their own directory, not the machine's
os.environ.setdefault("CCPO_LAB_GPU_LOCK_DIR", tempfile.mkdtemp(prefix="ccpo-lab-test-locks-"))


@pytest.fixture
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A temporary project: copies of arms/ and sweeps/."""
    shutil.copytree(REPO / "arms", tmp_path / "arms")
    shutil.copytree(REPO / "sweeps", tmp_path / "sweeps")
    return tmp_path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to assert nothing was written)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def wait_until(pred: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
    """Poll ``pred`` every ``every`` seconds until it returns something true (returned);
    fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
