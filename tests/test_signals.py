"""Stop signals held off a critical section (ccpo_lab.signals): the CI failure where a
SIGHUP inside ``torch.save`` tore a checkpoint and the run was recorded ``failed``."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from ccpo_lab.backends.local.checkpoint import latest_checkpoint, save_checkpoint
from ccpo_lab.runs.execute import Stopped, stop_on
from ccpo_lab.signals import deferred


def test_a_signal_in_the_block_is_delivered_after_it() -> None:
    done = []
    with pytest.raises(Stopped) as e, stop_on(signal.SIGHUP):
        with deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGHUP)  # twice: delivered once
            done.append("the block ran to its end")
        done.append("not reached: the stop raises as the block exits")
    assert done == ["the block ran to its end"]
    assert e.value.signum == signal.SIGHUP
    assert signal.getsignal(signal.SIGHUP) is not None  # stop_on restored its own


def test_without_a_signal_nothing_changes() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with deferred():
        pass
    assert {s: signal.getsignal(s) for s in before} == before


class _KillsWhilePickled:
    """Sends the process SIGHUP while torch.save pickles it: the stop lands mid-write."""

    def __reduce__(self) -> tuple[Any, ...]:
        os.kill(os.getpid(), signal.SIGHUP)
        return (dict, ())


def test_a_stop_during_a_checkpoint_leaves_it_whole(tmp_path: Path) -> None:
    state = {"w": torch.arange(200_000, dtype=torch.float32), "hook": _KillsWhilePickled()}
    with pytest.raises(Stopped), stop_on(signal.SIGHUP):
        save_checkpoint(tmp_path, 3, state)
    path = latest_checkpoint(tmp_path)
    assert path is not None and path.name.endswith(".pt")
    back = torch.load(path, weights_only=False)
    assert torch.equal(back["w"], state["w"]) and back["hook"] == {}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no partial left
