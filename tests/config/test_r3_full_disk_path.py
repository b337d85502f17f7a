"""Reliability round 3 (issue 36), item 11: a write that fails for want of space names the
file it was writing (ENOSPC carries no file name of its own)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ccpo_lab import atomic
from ccpo_lab.config import yamlio


def test_a_failed_write_names_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    target = tmp_path / "sweep.json"
    with pytest.raises(OSError) as err:
        yamlio.atomic_write_json(target, {"a": 1})
    monkeypatch.setattr(atomic.os, "fsync", real_fsync)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(target)
    assert not list(tmp_path.iterdir())  # no temporary file left
