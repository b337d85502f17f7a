"""The CPU adapter: verl-agent's trainer at the pinned commit on a machine without GPUs.

Active only with ``backend.verl.device: cpu`` (the trainer command sets
:data:`~ccpo_lab.backends.verl.agent.env.ENV_DEVICE` to ``cpu`` in the trainer and every
Ray worker) and only where torch sees no CUDA device: :func:`install` refuses to run on a
GPU machine, so the adapter is never reached on a GPU node. It edits nothing of
verl-agent: the Hydra overrides below go on the trainer's command line
(:func:`cpu_overrides`), the rest are the patches here, applied by the hooks' import hook
(:data:`CPU_TARGETS`) in every process. Each entry says where at ``796ed31`` it is needed.

======================================================  =======================================
verl-agent at 796ed31                                   on CPU
======================================================  =======================================
``ray_trainer.py`` resource pools,                      every pool asks Ray for GPUs: one
``single_controller/ray/base.py``                       logical Ray GPU (``++ray_init.num_gpus
                                                        =1``, ``trainer.n_gpus_per_node=1``)
``fsdp_workers.py:114`` (808, 1146),                    process-group backend strings naming
``utils/distributed.py:25``                             NCCL/HCCL -> ``gloo``
``fsdp_workers.py:210`` (``flash_attention_2``)         ``++actor_rollout_ref.model.
                                                        override_config._attn_implementation
                                                        =sdpa``
``dp_actor.py:42-45`` (``flash_attn.bert_padding``)     ``actor_rollout_ref.model.
                                                        use_remove_padding=False``
``debug/performance.py:35-40``, ``fsdp_workers.py:620,  ``torch.cpu`` gains ``empty_cache``
668``, ``hf_rollout.py:170``, ``fsdp_utils.py:46``       (no-op) and the memory queries, which
                                                        report the process's resident memory
``fsdp_workers.py:328`` ``sync_module_states=True``     torch FSDP's "must be on GPU" check is
                                                        skipped; the broadcast runs over gloo
``fsdp_workers.py:316`` reference ``CPUOffload(         ``offload_params=False`` (pinned memory
offload_params=True)``                                  needs an accelerator)
``fsdp_workers.py:402`` (rollout TP 2)                  ``rollout.name=hf``, TP 1 (the layout:
                                                        :mod:`ccpo_lab.backends.verl.layout`)
``alfworld/envs.py:22`` (``import torchvision``)        a stand-in module when torchvision is
                                                        not installed (its Linux wheels need
                                                        CUDA); text environments never call it
``ray_trainer.py:599`` (8 dataloader workers)           ``++data.dataloader_num_workers=0``
======================================================  =======================================

Not covered (kept at their defaults, which work): two FSDP ranks on CPU, FSDP2, dynamic
batch sizes and LoRA, which hard-code CUDA at this commit.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

from ccpo_lab.backends.verl.agent.env import ENV_DEVICE

CPU_TARGETS: dict[str, str] = {
    "verl.utils.device": "patch_torch_for_cpu",
}
"""Module -> patch function here, applied when :func:`active` (beside the hooks' own).
``verl.utils.device`` is imported by every verl module that touches a device, before any
of them runs, so the torch patches go in with it."""

STANDINS = Path(__file__).resolve().parents[1] / "standins"
"""Folder of the stand-in modules (``torchvision``), appended to ``sys.path`` on CPU when
the real one is absent."""

REPORT: dict[str, Any] = {
    "overrides": ["++ray_init.num_gpus=1", "trainer.n_gpus_per_node=1",
                  "actor_rollout_ref.model.use_remove_padding=False",
                  "++actor_rollout_ref.model.override_config._attn_implementation=sdpa",
                  "++data.dataloader_num_workers=0"],
    "patches": ["torch.distributed.init_process_group: nccl/hccl -> gloo",
                "torch.cpu: empty_cache (no-op), memory_allocated/reserved, "
                "max_memory_allocated/reserved (process RSS), mem_get_info (MemAvailable), "
                "reset_peak_memory_stats (no-op)",
                "torch FSDP _check_module_states_for_sync_module_states: skipped",
                "torch.distributed.fsdp.CPUOffload: offload_params=False",
                "torchvision: stand-in when not installed"],
}
"""What the adapter changes, recorded in ``run.json["cpu_adapter"]``."""


def active() -> bool:
    """Whether this process runs the trainer under the CPU adapter."""
    return os.environ.get(ENV_DEVICE, "") == "cpu"


def cpu_overrides() -> list[str]:
    """The ``++`` overrides the trainer needs on CPU (the other two are written in the
    command's own lines: ``n_gpus_per_node`` is the layout's, ``use_remove_padding`` off)."""
    return [o for o in REPORT["overrides"] if o.startswith("++")]


def install() -> None:
    """Prepare this process (called by the hooks' ``setup`` when :func:`active`): the
    torchvision stand-in where torchvision is missing. Nothing heavy is imported."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None and str(STANDINS) not in sys.path:
        sys.path.append(str(STANDINS))


def install_pkg_resources() -> None:
    """The ``pkg_resources`` stand-in where setuptools no longer ships it (any device:
    ``gym_sokoban``, verl-agent's Sokoban rooms, imports it). Called by the hooks' ``setup``."""
    import importlib.util

    folder = str(STANDINS / "pkg")   # alone: the torchvision stand-in is for CPU only
    if importlib.util.find_spec("pkg_resources") is None and folder not in sys.path:
        sys.path.append(folder)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _peak_rss_bytes() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _mem_info(*_args: Any, **_kwargs: Any) -> tuple[int, int]:
    """(available, total) bytes of the machine's memory, as ``torch.cuda.mem_get_info``."""
    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                k, v = line.split(":", 1)
                fields[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError):
        return 0, 0
    return fields.get("MemAvailable", 0), fields.get("MemTotal", 0)


def patch_torch_for_cpu(mod: Any) -> None:
    """The torch-side patches of the table above (once per process)."""
    import torch
    import torch.distributed
    import torch.distributed.fsdp as fsdp
    from torch.distributed.fsdp import _init_utils

    if torch.cuda.is_available():
        raise RuntimeError("backend.verl.device is cpu but torch sees a CUDA device: the CPU "
                           "adapter never runs on a GPU node (set backend.verl.device=cuda)")
    cpu = torch.cpu
    zero = lambda *_a, **_k: None  # noqa: E731
    for name, fn in {"empty_cache": zero,
                     "reset_peak_memory_stats": zero,
                     "memory_allocated": lambda *_a, **_k: _rss_bytes(),
                     "memory_reserved": lambda *_a, **_k: _rss_bytes(),
                     "max_memory_allocated": lambda *_a, **_k: _peak_rss_bytes(),
                     "max_memory_reserved": lambda *_a, **_k: _peak_rss_bytes(),
                     "mem_get_info": _mem_info}.items():
        if not hasattr(cpu, name):
            setattr(cpu, name, fn)

    dist = torch.distributed
    if not getattr(dist.init_process_group, "__ccpo_lab_cpu__", False):
        orig_init = dist.init_process_group

        @functools.wraps(orig_init)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            backend = kwargs.get("backend", args[0] if args else None)
            if isinstance(backend, str) and ("nccl" in backend or "hccl" in backend):
                if args:
                    args = ("gloo", *args[1:])
                else:
                    kwargs["backend"] = "gloo"
            return orig_init(*args, **kwargs)

        init_process_group.__ccpo_lab_cpu__ = True  # type: ignore[attr-defined]
        dist.init_process_group = init_process_group

    _init_utils._check_module_states_for_sync_module_states = lambda *_a, **_k: None
    if not getattr(fsdp.CPUOffload, "__ccpo_lab_cpu__", False):
        base = fsdp.CPUOffload

        class CPUOffload(base):  # type: ignore[misc, valid-type]
            """``CPUOffload`` without parameter offload (pinned memory needs a GPU)."""

            __ccpo_lab_cpu__ = True

            def __init__(self, offload_params: bool = False) -> None:
                super().__init__(offload_params=False)

        fsdp.CPUOffload = CPUOffload  # type: ignore[misc]
