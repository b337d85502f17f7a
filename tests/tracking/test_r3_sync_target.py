"""Reliability round 3 (issue 36), item 11: ``sync`` on a folder that is not a sweep is a
usage error and writes nothing there."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main


def test_sync_refuses_a_folder_that_is_not_a_sweep(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "x.txt").write_text("mine")
    assert main(["sync", str(folder)]) == 2
    assert "not a sweep directory" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["x.txt"]
