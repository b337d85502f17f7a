"""Run verl-agent's trainer with ccpo-lab's estimators available.

::

    python -m ccpo_lab.backends.verl.agent.trainer --verl-agent CHECKOUT [--] OVERRIDES...
    python -m ccpo_lab.backends.verl.agent.trainer --verl-agent CHECKOUT --check

The first form runs ``verl.trainer.main_ppo`` of the checkout (exactly what
``python3 -m verl.trainer.main_ppo OVERRIDES`` does inside it), after:

- putting the checkout first on ``sys.path`` and ``PYTHONPATH`` (so Ray workers import
  the same ``verl`` and ``agent_system``), and refusing a ``verl`` imported from elsewhere;
- installing :func:`ccpo_lab.backends.verl.agent.hooks.setup` in this process, and
  adding ``++ray_init.runtime_env.worker_process_setup_hook=...`` to the overrides unless
  they already set it, so every Ray worker process installs the hooks too.

``--check`` imports the checkout's trainer modules with the hooks installed and reports,
one line each, whether every attribute the hooks patch is still there (run it after
upgrading verl-agent); exit code 0 when all are.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

HOOK_KEY = "ray_init.runtime_env.worker_process_setup_hook"
SETUP_HOOK = "ccpo_lab.backends.verl.agent.hooks.setup"

CHECKS: tuple[tuple[str, str], ...] = (
    ("verl.trainer.ppo.ray_trainer", "compute_advantage"),
    ("verl.trainer.ppo.ray_trainer", "RayPPOTrainer._validate"),
    ("verl.trainer.ppo.ray_trainer", "AdvantageEstimator"),
    ("agent_system.multi_turn_rollout.rollout_loop", "TrajectoryCollector.multi_turn_loop"),
    ("verl.utils.tracking", "Tracking.log"),
    ("verl.workers.fsdp_workers", "ActorRolloutRefWorker.compute_ref_log_prob"),
    ("verl.workers.actor.dp_actor", "DataParallelPPOActor._forward_micro_batch"),
    ("verl.trainer.ppo.core_algos", "register_adv_est"),
    ("verl.trainer.ppo.ray_trainer", "adjust_batch"),
    ("verl.workers.rollout.vllm_rollout.vllm_rollout_spmd", "LLM"),
    ("verl.workers.rollout.vllm_rollout.vllm_rollout_spmd", "vLLMRollout.generate_sequences"),
    ("agent_system.environments.env_package.alfworld.envs", "AlfworldWorker.ccpo_lab_seed"),
    ("agent_system.environments.env_package.sokoban.envs",
     "SokobanMultiProcessEnv.ccpo_lab_seed"),
    ("agent_system.environments.env_package.webshop.envs",
     "WebshopMultiProcessEnv.ccpo_lab_seed"),
    ("verl.workers.rollout.hf_rollout", "HFRollout.generate_sequences"),
    ("verl.workers.rollout.hf_rollout", "HFRollout._generate_minibatch"),
)
"""(module, attribute) pairs the hooks rely on."""

NEEDS_VLLM = ("verl.workers.rollout.vllm_rollout.vllm_rollout_spmd",)
"""Modules that import vLLM: ``skip`` (not ``FAIL``) where vLLM is not installed (a CPU
environment); ``ccpo-lab doctor`` checks that the trainer's environment has vLLM."""


def with_hook(overrides: list[str]) -> list[str]:
    """``overrides`` plus the setup-hook override unless one already sets that key."""
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key == HOOK_KEY:
            return list(overrides)
    return [*overrides, f"++{HOOK_KEY}={SETUP_HOOK}"]


def use_checkout(path: Path) -> None:
    """Make ``path`` the first import location here and in Ray workers."""
    p = str(path)
    sys.path.insert(0, p)
    old = os.environ.get("PYTHONPATH", "")
    parts = [x for x in old.split(os.pathsep) if x and x != p]
    os.environ["PYTHONPATH"] = os.pathsep.join([p, *parts])


def check_verl_origin(path: Path) -> str:
    """Import ``verl`` and return its directory; ``SystemExit(2)`` if not from ``path``."""
    import verl

    where = Path(verl.__file__).resolve().parent
    if path.resolve() not in where.parents:
        raise SystemExit(f"error: verl is imported from {where}, not from the verl-agent "
                         f"checkout {path} (another verl shadows it; check PYTHONPATH)")
    return str(where)


def check(path: Path) -> int:
    """Print one line per hooked attribute; 0 when every one exists and patched cleanly."""
    import importlib
    import importlib.util

    from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

    failures = 0
    has_vllm = importlib.util.find_spec("vllm") is not None
    for mod_name, attr in CHECKS:
        if mod_name in NEEDS_VLLM and not has_vllm:
            print(f"skip  {mod_name}.{attr}: vllm is not installed here")
            continue
        try:
            obj = importlib.import_module(mod_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
            line = f"ok    {mod_name}.{attr}"
        except Exception as e:  # noqa: BLE001 - reported per line
            failures += 1
            line = f"FAIL  {mod_name}.{attr}: {type(e).__name__}: {e}"
        print(line)
    status = verl_agent_hooks.status()
    for mod_name, err in status["errors"].items():
        failures += 1
        print(f"FAIL  patch of {mod_name}: {err}")
    print(f"patched: {', '.join(status['patched']) or '(none)'}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    if "--" in args:
        i = args.index("--")
        head, overrides = args[:i], args[i + 1:]
    else:
        head, overrides = args, []
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.backends.verl.agent.trainer")
    ap.add_argument("--verl-agent", required=True, type=Path, help="verl-agent checkout")
    ap.add_argument("--check", action="store_true", help="check the hook targets and exit")
    ns, rest = ap.parse_known_args(head)
    overrides = [*rest, *overrides]
    path = ns.verl_agent.expanduser().resolve()
    if not (path / "verl" / "trainer" / "main_ppo.py").is_file():
        print(f"error: {path} is not a verl-agent checkout (no verl/trainer/main_ppo.py)",
              file=sys.stderr)
        return 2
    use_checkout(path)
    from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

    verl_agent_hooks.setup()
    check_verl_origin(path)
    if ns.check:
        return check(path)
    sys.argv = [str(path / "verl" / "trainer" / "main_ppo.py"), *with_hook(overrides)]
    runpy.run_module("verl.trainer.main_ppo", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
