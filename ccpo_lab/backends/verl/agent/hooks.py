"""Hooks that put ccpo-lab into verl-agent's trainer without editing verl-agent.

:func:`setup` is Ray's ``worker_process_setup_hook`` (``ray_init.runtime_env`` in the
trainer's config, so it runs at the start of every Ray worker process: the TaskRunner
actor, the FSDP/vLLM workers, the environment workers) and is also called by the entry
point :mod:`ccpo_lab.backends.verl.agent.trainer` in the driver. It imports nothing heavy: it
installs an import hook that patches each target module right after it is first imported
(and patches at once the ones already imported). Targets (see :data:`TARGETS`):

===============================================  =============================================
module                                           patch (:mod:`.patches`)
===============================================  =============================================
``verl.trainer.ppo.ray_trainer``                 ``compute_advantage`` routed to
                                                 ``ccpo_lab.estimators``; ``RayPPOTrainer``
                                                 accepts ``ccpo``; ``val/length/mean``
``agent_system.multi_turn_rollout.rollout_loop``  turn index per row; step-1 rollouts dump
``verl.utils.tracking``                          ``file`` logger = the run's ``metrics.jsonl``
``verl.workers.fsdp_workers``                    reference pass returns the features
``verl.workers.actor.dp_actor``                  final-norm hook during the reference pass
``verl.trainer.ppo.core_algos``                  ``register_adv_est`` of ccpo-lab's estimators
``verl.workers.rollout.vllm_rollout.``           vLLM engine seed = the run's; one seed per
``vllm_rollout_spmd``                            request (never one for all)
``agent_system.environments.env_package.``       ``AlfworldWorker.ccpo_lab_seed``: re-seeded
``alfworld.envs``                                before each rollout (games per run seed, step)
``agent_system.environments.env_package.``       ``SokobanMultiProcessEnv.ccpo_lab_seed``:
``sokoban.envs``                                 the next reset's room seeds under a key
``agent_system.environments.env_package.``       ``WebshopMultiProcessEnv.ccpo_lab_seed``:
``webshop.envs``                                 the next reset's goals under a key
``verl.workers.rollout.hf_rollout``              each request sampled under its own seed
===============================================  =============================================

With ``backend.verl.device: cpu`` the CPU adapter's patches
(:data:`ccpo_lab.backends.verl.agent.cpu.CPU_TARGETS`) are applied too.

Written against verl-agent commit ``796ed310287fa605c9292a0fce07a86d79fde05e``;
``python -m ccpo_lab.backends.verl.agent.trainer --verl-agent PATH --check`` tells whether a
checkout still offers every attribute patched here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ccpo_lab.backends.verl.agent import cpu as verl_agent_cpu

TARGETS: dict[str, str] = {
    "verl.trainer.ppo.ray_trainer": "patch_ray_trainer",
    "agent_system.multi_turn_rollout.rollout_loop": "patch_rollout_loop",
    "verl.utils.tracking": "patch_tracking",
    "verl.workers.fsdp_workers": "patch_fsdp_workers",
    "verl.workers.actor.dp_actor": "patch_dp_actor",
    "verl.trainer.ppo.core_algos": "patch_core_algos",
    "verl.workers.rollout.vllm_rollout.vllm_rollout_spmd": "patch_vllm_rollout",
    "agent_system.environments.env_package.alfworld.envs": "patch_alfworld_envs",
    "agent_system.environments.env_package.sokoban.envs": "patch_sokoban_envs",
    "agent_system.environments.env_package.webshop.envs": "patch_webshop_envs",
    "verl.workers.rollout.hf_rollout": "patch_hf_rollout",
}
"""Module -> name of its patch function in :mod:`ccpo_lab.backends.verl.agent.patches`."""

PATCHED_ATTR = "__ccpo_lab_patched__"
"""Set on a module once patched (the patch runs once per process)."""

_lock = threading.RLock()
_state: dict[str, Any] = {"installed": False, "pid": None, "patched": [], "errors": {}}


def installed() -> bool:
    """Whether :func:`setup` ran in this process."""
    return bool(_state["installed"]) and _state["pid"] == os.getpid()


def patched_modules() -> list[str]:
    """Modules patched in this process so far."""
    return list(_state["patched"])


def patch_errors() -> dict[str, str]:
    """Patches that failed in this process (module -> error), for diagnostics."""
    return dict(_state["errors"])


def _cpu() -> bool:
    """Whether the CPU adapter is active here (``backend.verl.device: cpu``)."""
    return verl_agent_cpu.active()


def _targets() -> dict[str, list[Callable[[ModuleType], None]]]:
    """Module -> its patch functions here (the CPU adapter's first, when active)."""
    from ccpo_lab.backends.verl.agent import patches as verl_agent_patches

    out: dict[str, list[Callable[[ModuleType], None]]] = {}
    if _cpu():
        for name, fn in verl_agent_cpu.CPU_TARGETS.items():
            out.setdefault(name, []).append(getattr(verl_agent_cpu, fn))
    for name, fn in TARGETS.items():
        out.setdefault(name, []).append(getattr(verl_agent_patches, fn))
    return out


def _watched(fullname: str) -> bool:
    if fullname in TARGETS:
        return True
    return _cpu() and fullname in verl_agent_cpu.CPU_TARGETS


def _apply(module: ModuleType) -> None:
    name = module.__name__
    with _lock:
        if getattr(module, PATCHED_ATTR, False):
            return
        setattr(module, PATCHED_ATTR, True)
    try:
        for fn in _targets().get(name, []):
            fn(module)
    except Exception as e:  # noqa: BLE001 - reported, and re-raised where it matters
        _state["errors"][name] = f"{type(e).__name__}: {e}"
        if os.environ.get("CCPO_LAB_HOOKS_STRICT", "1") != "0":
            raise
        return
    _state["patched"].append(name)


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the module's patch."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _apply(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tools
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of the target modules; defers finding to the other finders."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in self._busy or not _watched(fullname):
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None:
            return spec
        spec.loader = _PatchingLoader(spec.loader)
        return spec


def setup() -> None:
    """Install the hooks in this process (idempotent). Ray's ``worker_process_setup_hook``."""
    with _lock:
        if installed():
            return
        if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _PostImportFinder())
        _state.update(installed=True, pid=os.getpid(), patched=[], errors={})
    if _cpu():
        verl_agent_cpu.install()
    verl_agent_cpu.install_pkg_resources()
    for name in _targets():
        mod = sys.modules.get(name)
        if mod is not None:
            _apply(mod)


def status() -> dict[str, Any]:
    """What the hooks did in this process (for tests and ``--check``)."""
    return {"installed": installed(), "pid": os.getpid(), "patched": patched_modules(),
            "errors": patch_errors()}
