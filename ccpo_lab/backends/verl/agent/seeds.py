"""How a verl-agent run is seeded: one source for the command (``run.json``) and the hooks.

What verl-agent does on its own, and why ccpo-lab does not leave it at that:

- ``actor_rollout_ref.rollout.seed`` is not only vLLM's engine seed: ``vLLMRollout`` copies
  every rollout-config key that ``vllm.SamplingParams`` also has into each request's
  sampling parameters, so every request would get that one seed and the ``group_size``
  rollouts of a group (same prompt) would sample the same tokens. ccpo-lab never sets the
  key; the hooks give vLLM's engine the run seed (:func:`vllm_engine_seed`) and every
  request its own seed (:func:`request_seeds`), distinct within a call.
- ``env.seed``: verl-agent seeds training environment worker ``i`` with
  ``env.seed + i // group_n`` and validation worker ``i`` with ``env.seed + 1000 + i``.
  ``env.seed = protocol.env_seed + run_seed`` would make run seeds 0, 1, 2 share all but
  one stream; :func:`env_seed` spaces them :data:`ENV_SEED_STRIDE` apart
  (:func:`streams` are the seeds verl-agent derives; two run seeds never share one).
- a game stream restarts when a requeued run re-creates its environment workers. Before
  every rollout the hooks re-seed each ALFWorld worker with :func:`task_seed` (training
  step ``t``, group ``j``; or the evaluation at step ``t``, worker ``i``), so a step's games
  depend only on (run seed, step): a resumed run sees what an uninterrupted one would, and
  every arm of a seed sees the same games at every step.
- ``adjust_batch`` pads a batch with rows drawn by the global ``np.random``; the hooks
  draw them under :func:`padding_seed` (run seed, step).
"""

from __future__ import annotations

import hashlib
from typing import Any

from ccpo_lab.backends.verl.agent.env import ENV_VLLM_SEED

ENV_SEED_STRIDE = 10_000
"""Distance between the ``env.seed`` of consecutive run seeds."""
VAL_OFFSET = 1000
"""verl-agent's validation workers: ``env.seed + 1000 + i``."""
SEED_BITS = 31
"""Request and padding seeds are below ``2**31`` (every consumer accepts them)."""

SEED_KEY = "ccpo_lab_request_seed"
"""``non_tensor_batch`` key carrying each request's seed to the rollout workers."""

_SPLIT = {"train": 0, "val": 1}


def env_seed(protocol_env_seed: int, run_seed: int) -> int:
    """``env.seed`` of a run: ``protocol_env_seed + run_seed * ENV_SEED_STRIDE``."""
    return int(protocol_env_seed) + int(run_seed) * ENV_SEED_STRIDE


def streams(env_seed_value: int, train_groups: int, val_workers: int
            ) -> tuple[range, range]:
    """The integer seeds verl-agent gives its workers at construction: (training, validation).

    ``train_groups``: ``data.train_batch_size`` (one stream per group);
    ``val_workers``: ``data.val_batch_size``.
    """
    return (range(env_seed_value, env_seed_value + train_groups),
            range(env_seed_value + VAL_OFFSET, env_seed_value + VAL_OFFSET + val_workers))


def check_streams(train_groups: int, val_workers: int) -> str | None:
    """Why the streams of two run seeds could overlap (None when they cannot)."""
    if train_groups > VAL_OFFSET:
        return (f"train_batch_size {train_groups} > {VAL_OFFSET}: training streams would reach "
                "verl-agent's validation seeds")
    if VAL_OFFSET + val_workers > ENV_SEED_STRIDE:
        return (f"val_batch_size {val_workers} > {ENV_SEED_STRIDE - VAL_OFFSET}: the streams "
                "of consecutive run seeds would overlap")
    return None


def task_seed(env_seed_value: int, split: str, step: int, worker: int) -> list[int]:
    """Seed key of one ALFWorld worker before a rollout (``np.random.RandomState`` accepts it).

    ``split``: ``train`` (``worker`` is the group index: a group shares its game) or
    ``val`` (``worker`` is the worker index); ``step``: the trainer's global step. Keys of
    distinct arguments are distinct, and so are those of two run seeds.
    """
    return [int(env_seed_value) & 0xFFFFFFFF, int(env_seed_value) >> 32 & 0xFFFFFFFF,
            _SPLIT[split], int(step), int(worker)]


def _hash(*parts: Any) -> int:
    text = "/".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def request_seeds(run_seed: int, split: str, step: int, call: int, n: int) -> list[int]:
    """Seeds of the ``n`` requests of one generation call (distinct within the call).

    ``call``: the call's index within the rollout (the turn, counting every call of a
    dynamic-sampling retry); the seed of row ``r`` is ``(h + r) mod 2**31`` with ``h`` a
    hash of (run seed, split, step, call).
    """
    h = _hash("request", run_seed, split, step, call)
    return [(h + r) % (1 << SEED_BITS) for r in range(n)]


def padding_seed(run_seed: int, step: int) -> int:
    """Seed of ``adjust_batch``'s choice of padding rows at ``step``."""
    return _hash("padding", run_seed, step) % (1 << SEED_BITS)


def vllm_engine_seed(run_seed: int) -> int:
    """vLLM's engine seed of a run (the run seed)."""
    return int(run_seed)


def describe(run_seed: int, protocol_env_seed: int, train_groups: int, group_size: int,
             val_workers: int) -> dict[str, Any]:
    """What is seeded how, for ``run.json["determinism"]["seeding"]``."""
    e = env_seed(protocol_env_seed, run_seed)
    tr, va = streams(e, train_groups, val_workers)
    return {
        "run_seed": int(run_seed),
        "env_seed": {"value": e, "rule": f"protocol.env_seed + seed * {ENV_SEED_STRIDE}",
                     "train_streams": [tr.start, tr.stop - 1],
                     "val_streams": [va.start, va.stop - 1],
                     "note": f"verl-agent seeds training worker i with env.seed + i // "
                             f"{group_size} and validation worker i with env.seed + "
                             f"{VAL_OFFSET} + i: no two run seeds share a stream"},
        "tasks": "before every rollout each ALFWorld worker is re-seeded with the key "
                 "(env.seed, split, global step, group or worker): a step's games depend "
                 "only on (run seed, step), also after a requeue, and are the same for "
                 "every arm of the seed",
        "vllm_engine_seed": {"value": vllm_engine_seed(run_seed),
                             "how": f"hook on vLLM's LLM(seed=...) ({ENV_VLLM_SEED})"},
        "vllm_request_seeds": "each request its own SamplingParams.seed = (hash(run seed, "
                              "split, step, call) + row) mod 2**31: distinct within a group, "
                              "the same for every arm at the same step",
        "batch_padding": "adjust_batch's rows drawn under hash(run seed, step)",
        "not_set": "actor_rollout_ref.rollout.seed (vLLM would give that one seed to every "
                   "request, so a group's rollouts would be identical)",
    }
