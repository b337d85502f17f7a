"""The CPU backend's batch pipeline against verl's own code at the pinned commit (issue 30).

``balanced_order`` must give the order ``_balance_batch`` gives: verl's
``get_seqlen_balanced_partitions`` (``verl/utils/seqlen_balancing.py`` of the checkout
``CCPO_LAB_VERL_AGENT`` names, loaded from its file: the environment's own ``verl`` may
be another version), concatenated. ``pad_rows`` must make verl-agent's ``adjust_batch``
padding: as many copies, of distinct rows, to the same divisor.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ccpo_lab.backends.local.verl_batch import balanced_order, pad_rows, size_divisor

pytestmark = pytest.mark.verl_agent


def _module(rel: str, name: str) -> ModuleType:
    checkout = os.environ.get("CCPO_LAB_VERL_AGENT")
    path = Path(checkout or "/nonexistent") / rel
    if not path.is_file():
        pytest.skip(f"CCPO_LAB_VERL_AGENT does not point at a verl-agent checkout ({path})")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_balanced_order_is_verls(k: int) -> None:
    verl = _module("verl/utils/seqlen_balancing.py", "_pinned_seqlen_balancing")
    rng = np.random.default_rng(100 + k)
    for trial in range(40):
        n = k * int(rng.integers(1, 40))
        # few distinct lengths too: ties exercise verl's tie-breaking
        high = 6 if trial % 3 == 0 else 2000
        lens = rng.integers(1, high, size=n).tolist()
        parts = verl.get_seqlen_balanced_partitions(lens, k_partitions=k, equal_size=True)
        want = [j for part in parts for j in part]
        assert balanced_order(lens, k).tolist() == want, (k, trial, lens)


def test_padding_is_adjust_batchs() -> None:
    """``adjust_batch`` with verl-agent's config keys, on a stand-in batch whose
    ``select_idxs``/``concat`` record the rows (it draws from the global ``np.random``:
    ccpo-lab's CPU backend draws from a seeded Generator instead, so the copies are
    other rows, as many and as distinct)."""
    pytest.importorskip("omegaconf")
    utils_src = Path(os.environ.get("CCPO_LAB_VERL_AGENT", "/nonexistent")) / \
        "agent_system/multi_turn_rollout/utils.py"
    if not utils_src.is_file():
        pytest.skip("CCPO_LAB_VERL_AGENT does not point at a verl-agent checkout")
    from omegaconf import OmegaConf

    source = utils_src.read_text(encoding="utf-8")
    start = source.index("def adjust_batch(")
    end = source.index("\ndef ", start + 1)
    namespace: dict = {"np": np, "DataProto": _Rows, "torch": None}
    exec(compile(source[start:end], str(utils_src), "exec"), namespace)  # noqa: S102
    adjust = namespace["adjust_batch"]
    for world, micro, n in ((2, 8, 37), (8, 32, 1000), (4, 16, 64), (1, 32, 77)):
        config = OmegaConf.create({
            "trainer": {"n_gpus_per_node": world, "nnodes": 1},
            "algorithm": {"use_kl_in_reward": False},
            "actor_rollout_ref": {"actor": {"use_kl_loss": True,
                                            "ppo_micro_batch_size_per_gpu": micro},
                                  "ref": {"log_prob_micro_batch_size_per_gpu": micro},
                                  "rollout": {"log_prob_micro_batch_size_per_gpu": micro}}})
        np.random.seed(n)
        theirs = adjust(config, _Rows(list(range(n)))).rows
        ours = pad_rows(n, size_divisor(world, micro, micro), np.random.default_rng(n))
        assert len(ours) == len(theirs) and ours[:n].tolist() == theirs[:n]
        assert len(set(theirs[n:])) == len(theirs) - n == len(set(ours[n:].tolist()))


class _Rows:
    """What ``adjust_batch`` touches of a DataProto: ``len``, ``select_idxs``, ``concat``."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows
        self.non_tensor_batch: dict = {}

    def __len__(self) -> int:
        return len(self.rows)

    def select_idxs(self, idx: np.ndarray) -> _Rows:
        return _Rows([self.rows[i] for i in idx])

    @staticmethod
    def concat(parts: list[_Rows]) -> _Rows:
        return _Rows([r for p in parts for r in p.rows])
