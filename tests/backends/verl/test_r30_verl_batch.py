"""The CPU backend's batch pipeline against verl-agent's own code (issue 30).

One subprocess puts the checkout ``CCPO_LAB_VERL_AGENT`` names (796ed31) FIRST on
``sys.path`` (its ``verl`` shadows the environment's PyPI verl 0.9.1, which is why it is a
process of its own) and runs, on real ``DataProto`` batches whose ``row`` column records
each row's original index:

- ``RayPPOTrainer._balance_batch`` itself (seqlens = ``attention_mask.sum(-1)``, verl's
  ``get_seqlen_balanced_partitions`` over ``world_size`` partitions, ``reorder``), with a
  stand-in trainer that has only ``actor_rollout_wg.world_size``;
- ``agent_system.multi_turn_rollout.utils.adjust_batch`` (mode ``copy``) after
  ``np.random.seed(s)``;
- both in ``fit``'s order (pad, then balance).

ccpo-lab's :mod:`ccpo_lab.backends.local.verl_batch` must give the same row indices:
:func:`balanced_order` exactly (ties included); :func:`pad_rows` and :func:`passed_rows`
exactly when fed ``np.random.RandomState(s)``, the generator ``np.random.seed(s)`` seeds
(the CPU backend's runs feed a seeded ``Generator``: the same count and structure, other
rows).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ccpo_lab.backends.local.verl_batch import (
    balanced_order,
    pad_rows,
    passed_rows,
    size_divisor,
)

pytestmark = [pytest.mark.verl_agent, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
ENV_CHECKOUT = "CCPO_LAB_VERL_AGENT"

VERL_SIDE = r'''
import importlib.abc, importlib.machinery, importlib.util, json, sys, types
checkout = sys.argv[1]
sys.path.insert(0, checkout)


class _OpenAI(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty ``openai`` modules (ray_trainer's async-server module imports it)."""

    def find_spec(self, name, path, target=None):
        if name == "openai" or name.startswith("openai."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []
        mod.__getattr__ = lambda attr: type(attr, (), {})
        return mod

    def exec_module(self, module):
        return None


if importlib.util.find_spec("openai") is None:
    sys.meta_path.insert(0, _OpenAI())
import numpy as np
import torch
import verl
import verl.utils.seqlen_balancing as balancing
from agent_system.multi_turn_rollout import utils as agent_utils
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

for mod in (verl, balancing, agent_utils):
    assert mod.__file__.startswith(checkout), mod.__file__


def rows_of(seqlens):
    n, width = len(seqlens), max(seqlens)
    mask = torch.zeros(n, width, dtype=torch.int64)
    for i, s in enumerate(seqlens):
        mask[i, width - s:] = 1  # left-padded, as verl's prompts are
    return DataProto.from_dict(tensors={"row": torch.arange(n), "attention_mask": mask})


def balance(batch, world):
    trainer = types.SimpleNamespace(actor_rollout_wg=types.SimpleNamespace(world_size=world))
    RayPPOTrainer._balance_batch(trainer, batch, metrics={})
    return batch


def adjust(batch, world, micro, seed):
    config = OmegaConf.create({
        "trainer": {"n_gpus_per_node": world, "nnodes": 1},
        "algorithm": {"use_kl_in_reward": False},
        "actor_rollout_ref": {"actor": {"use_kl_loss": True,
                                        "ppo_micro_batch_size_per_gpu": micro},
                              "ref": {"log_prob_micro_batch_size_per_gpu": micro},
                              "rollout": {"log_prob_micro_batch_size_per_gpu": micro}}})
    np.random.seed(seed)
    return agent_utils.adjust_batch(config, batch)


cases = json.load(sys.stdin)
out = {
    "balance": [balance(rows_of(lens), k).batch["row"].tolist()
                for lens, k in cases["balance"]],
    "pad": [adjust(rows_of([1] * n), w, m, s).batch["row"].tolist()
            for n, w, m, s in cases["pad"]],
    "fit": [balance(adjust(rows_of(lens), w, m, s), w).batch["row"].tolist()
            for lens, w, m, s in cases["fit"]],
}
json.dump(out, sys.stdout)
'''


def _cases() -> dict[str, list[Any]]:
    rng = np.random.default_rng(30)
    balance = []
    for k in (1, 2, 4, 8):
        for trial in range(40):
            n = k * int(rng.integers(1, 40))
            high = 6 if trial % 3 == 0 else 2000  # few distinct lengths: verl's ties
            balance.append([rng.integers(1, high, size=n).tolist(), k])
    pad = [[n, w, m, s] for s, (n, w, m) in enumerate(
        [(37, 2, 8), (1000, 8, 32), (64, 4, 16), (77, 1, 32), (300, 2, 4), (16, 2, 8),
         (9, 2, 4), (130, 4, 32)])]
    fit = [[rng.integers(20, 400, size=n).tolist(), w, m, 100 + i]
           for i, (n, w, m) in enumerate([(37, 2, 8), (181, 4, 16), (90, 8, 8), (51, 1, 16)])]
    return {"balance": balance, "pad": pad, "fit": fit}


@pytest.fixture(scope="module")
def verl_side() -> tuple[dict[str, list[Any]], dict[str, list[list[int]]]]:
    checkout = os.environ.get(ENV_CHECKOUT)
    if not checkout or not (Path(checkout) / "agent_system" / "multi_turn_rollout").is_dir():
        pytest.skip(f"{ENV_CHECKOUT} does not point at a verl-agent checkout")
    cases = _cases()
    proc = subprocess.run([sys.executable, "-c", VERL_SIDE, checkout],
                          input=json.dumps(cases), capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cases, json.loads(proc.stdout)


def test_balanced_order_is_balance_batchs(verl_side: Any) -> None:
    cases, theirs = verl_side
    for (lens, k), want in zip(cases["balance"], theirs["balance"], strict=True):
        assert balanced_order(lens, k).tolist() == want, (k, lens)


def test_padding_is_adjust_batchs_for_the_same_draw(verl_side: Any) -> None:
    cases, theirs = verl_side
    for (n, world, micro, seed), want in zip(cases["pad"], theirs["pad"], strict=True):
        divisor = size_divisor(world, micro, micro)
        ours = pad_rows(n, divisor, np.random.RandomState(seed))
        assert ours.tolist() == want, (n, world, micro, seed)
        # the runs' Generator: as many copies, of distinct rows, after the rows in order
        run = pad_rows(n, divisor, np.random.default_rng(seed))
        assert len(run) == len(want) and run[:n].tolist() == want[:n]
        assert len(set(run[n:].tolist())) == len(run) - n


def test_passed_rows_are_fits_batch(verl_side: Any) -> None:
    cases, theirs = verl_side
    for (lens, world, micro, seed), want in zip(cases["fit"], theirs["fit"], strict=True):
        ours = passed_rows(lens, world, micro, np.random.RandomState(seed))
        assert ours.tolist() == want, (world, micro, seed)
