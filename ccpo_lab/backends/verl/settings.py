"""Settings of the GPU-cluster backend (``backend.kind: verl``): verl-agent's trainer.

Fields marked ``identity: False`` change where or how fast a run executes, never its
results, and are left out of the run id; ``identity: "non-default"`` fields enter it only
when set to other than their default (so adding one keeps existing run ids). Everything
else (the model, the GPU layout, the
micro-batch sizes, the rollout engine and its attention kernels) can change the numbers or
the step-1 rollouts and is part of the identity: every arm of a sweep must share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ccpo_lab.errors import UserError

RAY_LIMITS: dict[str, str] = {
    "RAY_num_server_call_thread": "1",
    "RAY_num_grpc_internal_threads": "1",
    "RAY_num_prestart_python_workers": "4",
    "OMP_NUM_THREADS": "1",
}
"""Default ``backend.verl.ray_env``: the settings the CCPO authors' launcher runs with."""
DEVICES = ("cuda", "cpu")
"""Values of ``backend.verl.device``."""
ROLLOUT_ENGINES = ("vllm", "hf")
"""Rollout engines whose sampling ccpo-lab seeds per request (``backend.verl.rollout_name``);
verl-agent's sglang rollout is not among them (its per-request seeds are not wired)."""


@dataclass(frozen=True)
class VerlBackendConfig:
    """verl-agent on real ALFWorld. Layout fields are result-relevant (step-1 identity)."""

    model_path: str = "Qwen/Qwen2.5-7B-Instruct"
    """Model weights (a local path or hub id the cluster can read)."""
    verl_agent_path: str = field(default="/opt/verl-agent", metadata={"identity": False})
    """Checkout of verl-agent whose ``verl.trainer.main_ppo`` is run (not in the run id)."""
    n_gpus_per_node: int = 8
    """GPUs per node (``trainer.n_gpus_per_node``)."""
    nnodes: int = 1
    """Nodes per run (``trainer.nnodes``); > 1 starts a Ray cluster across the allocation."""
    rollout_tp: int = 2
    """vLLM tensor parallel size; the same for every arm (identical step-1 rollouts)."""
    gpu_memory_utilization: float = 0.6
    """vLLM memory fraction."""
    rollout_name: str = "vllm"
    """Rollout engine: ``vllm`` (GPU nodes) or ``hf`` (Hugging Face ``generate``; the CPU
    device). Both get one sampling seed per request from ccpo-lab's hooks."""
    device: str = field(default="cuda", metadata={"identity": "non-default"})
    """``cuda``: GPU nodes. ``cpu``: a machine without GPUs, under the CPU adapter
    (:mod:`ccpo_lab.backends.verl.agent.cpu`: one logical Ray GPU, gloo, SDPA attention,
    no padding removal; needs ``rollout_name: hf``, ``rollout_tp: 1``, ``n_gpus_per_node: 1``,
    ``nnodes: 1``). ``ccpo-lab rehearse`` sets it on a machine without GPUs."""
    python: str = field(default="python3", metadata={"identity": False})
    """Interpreter of the trainer environment on the nodes: the trainer and its Ray workers
    run it, and so do the runs' jobs under the ``slurm`` and ``local`` launchers (not in
    the run id)."""
    extra_overrides: list[str] = field(default_factory=list)
    """Further Hydra overrides passed verbatim to the trainer (result-relevant)."""
    ppo_micro_batch_size_per_gpu: int = 32
    """Actor update micro-batch per GPU (``actor.ppo_micro_batch_size_per_gpu``)."""
    log_prob_micro_batch_size_per_gpu: int = 32
    """Micro-batch per GPU of the old- and reference-log-prob passes."""
    vllm_attention_backend: str | None = "XFORMERS"
    """``VLLM_ATTENTION_BACKEND`` of the reference script (null: vLLM's own choice)."""
    env_cpus_per_worker: float = field(default=0.1, metadata={"identity": False})
    """CPUs Ray reserves per ALFWorld environment worker (``env.resources_per_worker``)."""
    ray_num_cpus: int | None = field(default=None, metadata={"identity": False})
    """``ray_init.num_cpus`` when the trainer starts Ray itself (null: the CPUs the
    launcher gives the task, e.g. Slurm's ``cpus_per_task``, else Ray's own count)."""
    max_ckpt_to_keep: int = field(default=1, metadata={"identity": False})
    """Actor checkpoints kept in the run's ``checkpoints/`` (older ones are deleted)."""
    env: dict[str, str] = field(default_factory=dict, metadata={"identity": False})
    """Environment variables of the trainer process and its Ray workers (``ALFWORLD_DATA``,
    ``HF_HOME``, ...); they override :attr:`ray_env` entries of the same name."""
    ray_env: dict[str, str] = field(default_factory=lambda: dict(RAY_LIMITS),
                                    metadata={"identity": False})
    """Thread and process limits of Ray and the math libraries, set in the trainer, its Ray
    processes and every Ray worker (default :data:`RAY_LIMITS`). One run starts 128 training
    and 128 validation ALFWorld actors; without these the CCPO authors hit an 8,192-process
    ceiling. A sweep's entries are merged over the defaults: override one with
    ``backend.verl.ray_env.<NAME>=<value>``, leave one unset with an empty string."""
    ray_port: int = field(default=6379, metadata={"identity": False})
    """Port of the Ray head when a multi-node run starts its own cluster."""

    def __post_init__(self) -> None:
        merged = {**RAY_LIMITS, **{str(k): str(v) for k, v in self.ray_env.items()}}
        object.__setattr__(self, "ray_env", merged)

    def validate(self, where: Any) -> None:
        """Refuse an unknown device or rollout engine, and a CPU layout the adapter lacks."""
        checks: tuple[tuple[str, str, tuple[str, ...]], ...] = (
            ("device", self.device, DEVICES), ("rollout_name", self.rollout_name,
                                               ROLLOUT_ENGINES))
        for key, value, valid in checks:
            if value not in valid:
                raise UserError("unknown value", file=where(f"backend.verl.{key}"),
                                key=f"backend.verl.{key}", value=value, valid=list(valid))
        if self.device == "cpu":
            need = {"rollout_name": "hf", "rollout_tp": 1, "n_gpus_per_node": 1, "nnodes": 1}
            for key, wanted in need.items():
                if getattr(self, key) != wanted:
                    raise UserError(f"the CPU device runs one trainer process with the hf "
                                    f"rollout: needs {key}={wanted}",
                                    file=where(f"backend.verl.{key}"),
                                    key=f"backend.verl.{key}", value=getattr(self, key))

    def ray_env_set(self) -> dict[str, str]:
        """The :attr:`ray_env` entries that are exported (the non-empty ones)."""
        return {k: v for k, v in self.ray_env.items() if v != ""}
