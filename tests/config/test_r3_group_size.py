"""Reliability round 3 (issue 36), item 11: a group of one rollout is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError


def test_a_group_of_one_is_refused_naming_the_key(workdir: Path) -> None:
    with pytest.raises(UserError, match="zero advantage") as err:
        load_sweep(workdir / "sweeps" / "smoke.yaml", ["protocol.group_size=1"])
    assert "protocol.group_size" in str(err.value)
    assert load_sweep(workdir / "sweeps" / "smoke.yaml", ["protocol.group_size=2"])
