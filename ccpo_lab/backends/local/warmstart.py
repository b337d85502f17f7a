"""Optional behaviour-cloning warm start: the small policy's stand-in for an instruct prior.

A language model starts RL on ALFWorld already able to solve some tasks; a policy trained
from scratch starts at chance, which on these games is ~1% success, so group-relative
estimators see no signal within a CPU budget. With ``warmstart_demos > 0`` the initial
policy is first fitted (cross-entropy, ``warmstart_epochs`` passes, Adam) to the planner
expert's solutions of that many training games, replayed on the real engine and rendered
with the same prompts the policy reads in RL. The warm-started policy is the reference
policy. Demonstrations are drawn with a generator keyed by the run seed, so every arm of a
seed starts from the same policy.

That policy is computed once per seed: with a ``cache`` folder (the game set's), the result
(parameters, the torch generator's state after it, the statistics) is kept in a file keyed
by a hash of everything it depends on: the initial parameters and generator state, the
demonstrations' games, settings and seed, the torch, numpy and engine versions, the thread
count, the source of this backend, and the machine's arithmetic (:func:`arithmetic`: the
CPU and the kernels torch and MKL pick for it, whose rounding differs from one CPU to
another). The other arms of the seed load it instead of cloning the same demonstrations
again, and continue bit for bit as if they had (a test compares the metrics byte for
byte); a machine with other arithmetic sharing the folder clones its own.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ccpo_lab.backends.local import speedups
from ccpo_lab.backends.local.policy import ActionScorer, collate
from ccpo_lab.backends.local.prompts import PromptSettings, Turn, TurnInput, choices, turn_input

if TYPE_CHECKING:
    from ccpo_lab.backends.local.games import GameRecord
    from ccpo_lab.backends.local.rollout import EnginePool

WARM_TAG = 0x3A7
BATCH = 32
"""Rows per behaviour-cloning mini-batch."""

Demo = tuple[TurnInput, int]
"""(the policy's input, index of the expert's action among the candidates)."""

_CACHE: dict[tuple[str, int, int, int], list[Demo]] = {}


def demonstrations(game: GameRecord, pool: EnginePool, prompts: PromptSettings) -> list[Demo]:
    """The expert's turns of ``game`` replayed on the engine (cached per process)."""
    key = (str(game.gamefile), prompts.history_length, prompts.max_prompt_length,
           prompts.vocab_size)
    if key in _CACHE:
        return _CACHE[key]
    env = pool.engine(game)
    start = env.reset(0)
    obs, adm = start.observation, start.admissible
    history: list[Turn] = []
    rows: list[Demo] = []
    for action in game.expert_plan:
        cands = choices(adm)
        if action not in cands:
            break
        rows.append((turn_input(game.goal, obs, cands, history, prompts), cands.index(action)))
        result = env.step(action)
        history.append(Turn(obs, action))
        obs, adm = result.observation, result.admissible
        if result.done:
            break
    _CACHE[key] = rows
    return rows


CACHE_FORMAT = 1
"""Part of every cache key: bump it when what a cached file holds changes."""


@functools.cache
def _source_digest() -> str:
    """A hash of this backend's source files, its environments' included (a cached result
    never outlives an edit)."""
    h = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


NUMERIC_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
               "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
"""Environment variables that change which kernels torch (ATen, MKL, oneDNN) runs."""


def _cpu() -> str:
    """The CPU as the kernels' dispatch sees it: vendor, family, model, name and a hash of
    its instruction-set flags (``/proc/cpuinfo``'s first processor; elsewhere
    :mod:`platform`'s description)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                name, _, value = line.partition(":")
                fields[name.strip()] = value.strip()
    except OSError:
        pass
    if not fields:
        return f"{platform.machine()} {platform.processor()}"
    flags = hashlib.sha256(" ".join(sorted(fields.get("flags", "").split())).encode())
    return " | ".join([*(fields.get(k, "") for k in ("vendor_id", "cpu family", "model",
                                                     "model name")), flags.hexdigest()[:16]])


def arithmetic() -> tuple[str, ...]:
    """What decides the last bits of a warm start's parameters besides its inputs and the
    library versions: the CPU, the kernel level ATen runs on it and the variables of
    :data:`NUMERIC_ENV` (MKL's and oneDNN's code paths). Another CPU rounds differently,
    and training amplifies a last-bit difference into other episodes within the demo's
    60 steps (see the README's demo section)."""
    return (_cpu(), torch.backends.cpu.get_cpu_capability(),
            *(f"{k}={os.environ.get(k, '')}" for k in NUMERIC_ENV))


def _cache_key(policy: ActionScorer, games: Sequence[GameRecord], pool: EnginePool,
               prompts: PromptSettings, settings: tuple[int, int, float, int],
               generator: torch.Generator) -> str:
    h = hashlib.sha256()
    for part in (CACHE_FORMAT, _source_digest(), torch.__version__, np.__version__,
                 torch.get_num_threads(), arithmetic(),
                 speedups.engine_versions(), settings, prompts, prompts.view, pool.max_steps,
                 [str(g.gamefile) for g in games]):
        h.update(repr(part).encode() + b"\0")
    for name, tensor in policy.state_dict().items():
        h.update(name.encode() + tensor.numpy().tobytes())
    h.update(generator.get_state().numpy().tobytes())
    return h.hexdigest()[:32]


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 - missing or damaged: compute it again
        return None
    return data


def _store(path: Path, data: dict[str, Any]) -> None:
    buf = io.BytesIO()
    torch.save(data, buf)
    speedups.write_cache_file(path, buf.getvalue(), sign=False)  # read with weights_only


@dataclass(frozen=True)
class WarmStart:
    """What :func:`warm_start` did."""

    stats: dict[str, float]
    """``warmstart/*`` statistics (empty when there was no warm start)."""
    file: Path | None = None
    """The file shared with the other runs of the seed (None: no ``cache``)."""
    loaded: bool = False
    """Whether the result was loaded from that file (another run computed it)."""

    def provenance(self) -> dict[str, Any] | None:
        """For ``run.json``: the shared file and whether it was loaded (None: no file)."""
        if self.file is None:
            return None
        return {"file": str(self.file), "loaded": self.loaded}


def warm_start(policy: ActionScorer, games: Sequence[GameRecord], pool: EnginePool,
               prompts: PromptSettings, n_demos: int, epochs: int, lr: float, seed: int,
               generator: torch.Generator, cache: Path | None = None) -> WarmStart:
    """Behaviour-clone ``policy`` in place on ``n_demos`` expert solutions.

    ``cache``: a folder where the result is shared with the other runs of the seed (see the
    module docstring; None: always computed here).
    """
    if n_demos <= 0 or epochs <= 0:
        return WarmStart({})
    path = None
    if cache is not None:
        key = _cache_key(policy, games, pool, prompts, (n_demos, epochs, lr, int(seed)),
                         generator)
        path = Path(cache) / f"warmstart-{key}.pt"
        hit = _load(path)
        if hit is not None:
            policy.load_state_dict(hit["policy"])
            generator.set_state(hit["generator"])
            policy.eval()
            return WarmStart({k: float(v) for k, v in hit["stats"].items()}, path, True)
    stats = _behaviour_clone(policy, games, pool, prompts, n_demos, epochs, lr, seed,
                             generator)
    if path is not None:
        _store(path, {"policy": policy.state_dict(), "generator": generator.get_state(),
                      "stats": stats})
    return WarmStart(stats, path)


def _behaviour_clone(policy: ActionScorer, games: Sequence[GameRecord], pool: EnginePool,
                     prompts: PromptSettings, n_demos: int, epochs: int, lr: float,
                     seed: int, generator: torch.Generator) -> dict[str, float]:
    rng = np.random.default_rng([WARM_TAG, int(seed)])
    picked = rng.choice(len(games), size=min(n_demos, len(games)), replace=False)
    rows = [d for i in sorted(int(j) for j in picked)
            for d in demonstrations(games[i], pool, prompts)]
    inputs = collate([r[0] for r in rows])
    target = torch.tensor([r[1] for r in rows], dtype=torch.int64)
    optim = torch.optim.Adam(policy.parameters(), lr=lr, fused=True)
    policy.train()
    loss = torch.zeros(())
    for _ in range(epochs):
        perm = torch.randperm(len(rows), generator=generator)
        for s in range(0, len(rows), BATCH):
            mb = perm[s:s + BATCH]
            logits, _ = policy(inputs.select(mb))
            loss = torch.nn.functional.cross_entropy(logits, target[mb])
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
    policy.eval()
    with torch.no_grad():
        logits, _ = policy(inputs)
        acc = float((logits.argmax(-1) == target).float().mean())
    return {"warmstart/demo_turns": float(len(rows)), "warmstart/final_loss": float(loss.detach()),
            "warmstart/train_accuracy": acc}
