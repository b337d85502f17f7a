"""One GPU / parallel layout per sweep: the condition for identical step-1 rollouts.

vLLM seeds each rollout replica from the rollout seed and its data-parallel rank, and the
batch is split over data-parallel ranks; arms that differ in GPUs, nodes, tensor-parallel
size, micro-batches or the engine's memory share do not sample the same step-1 rollouts.
:func:`check_run_layout` validates a run's layout and refuses one that differs from the
runs already in the same sweep directory; :func:`check_sweep_layout` does the same over the
runs of one sweep before anything is launched.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ccpo_lab.backends.verl.settings import VerlBackendConfig
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.config.yamlio import load_yaml_file
from ccpo_lab.errors import UserError

LAYOUT_FIELDS = ("model_path", "nnodes", "n_gpus_per_node", "rollout_tp", "rollout_name",
                 "gpu_memory_utilization", "ppo_micro_batch_size_per_gpu",
                 "log_prob_micro_batch_size_per_gpu", "vllm_attention_backend", "device")
"""Settings every arm of a sweep must share."""


def layout_of(settings: VerlBackendConfig) -> dict[str, Any]:
    """The layout of a run: :data:`LAYOUT_FIELDS` plus the derived data-parallel size."""
    out = {k: getattr(settings, k) for k in LAYOUT_FIELDS}
    gpus = settings.n_gpus_per_node * settings.nnodes
    out["rollout_dp"] = gpus // settings.rollout_tp if settings.rollout_tp else 0
    return out


def validate_layout(settings: VerlBackendConfig, protocol: ProtocolConfig,
                    *, where: str | None = None) -> None:
    """Refuse a layout the trainer would reject (the checks of verl-agent's trainer)."""
    gpus = settings.n_gpus_per_node * settings.nnodes
    key = "backend.verl"
    if settings.n_gpus_per_node < 1 or settings.nnodes < 1:
        raise UserError("needs at least one GPU on at least one node", file=where, key=key,
                        value={"n_gpus_per_node": settings.n_gpus_per_node,
                               "nnodes": settings.nnodes})
    if settings.rollout_tp < 1 or gpus % settings.rollout_tp:
        raise UserError(f"rollout_tp must divide the run's {gpus} GPUs", file=where,
                        key=f"{key}.rollout_tp", value=settings.rollout_tp)
    if protocol.train_batch_size % gpus:
        raise UserError(f"protocol.train_batch_size must be divisible by the run's {gpus} GPUs "
                        "(verl-agent's trainer asserts it)", file=where,
                        key="protocol.train_batch_size", value=protocol.train_batch_size)
    per_gpu = protocol.ppo_mini_batch_size // gpus
    micro = settings.ppo_micro_batch_size_per_gpu
    if per_gpu < 1 or per_gpu % micro:
        raise UserError(f"protocol.ppo_mini_batch_size / {gpus} GPUs = {per_gpu} must be a "
                        f"positive multiple of ppo_micro_batch_size_per_gpu ({micro})",
                        file=where, key="protocol.ppo_mini_batch_size",
                        value=protocol.ppo_mini_batch_size)
    if not 0.0 < settings.gpu_memory_utilization <= 1.0:
        raise UserError("expected a fraction in (0, 1]", file=where,
                        key=f"{key}.gpu_memory_utilization",
                        value=settings.gpu_memory_utilization)


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = [k for k in a if a.get(k) != b.get(k)]
    return ", ".join(f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys)


def check_sweep_layout(runs: Iterable[RunConfig]) -> None:
    """Refuse a sweep whose verl runs do not all share one layout (step-1 comparability)."""
    first: tuple[str, dict[str, Any]] | None = None
    for run in runs:
        if run.backend.kind != "verl":
            continue
        validate_layout(run.backend.verl, run.protocol)
        lay = layout_of(run.backend.verl)
        if first is None:
            first = (f"{run.arm} seed {run.seed}", lay)
        elif lay != first[1]:
            raise UserError(
                f"the arms of a sweep must share one GPU layout for identical step-1 rollouts; "
                f"{run.arm} seed {run.seed} differs from {first[0]}: {_diff(lay, first[1])}")


def _layout_on_disk(config_yaml: Path) -> dict[str, Any] | None:
    import yaml

    try:
        doc = load_yaml_file(config_yaml) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    backend = doc.get("backend") or {}
    if backend.get("kind") != "verl":
        return None
    raw = dict(backend.get("verl") or {})
    raw.update(doc.get("backend_runtime") or {})
    known = {f: raw[f] for f in VerlBackendConfig.__dataclass_fields__ if f in raw}
    try:
        return layout_of(VerlBackendConfig(**known))
    except TypeError:
        return None


def check_run_layout(run: RunConfig, run_dir: Path) -> dict[str, Any]:
    """Validate ``run``'s layout and compare it with the other runs of its sweep directory.

    ``run_dir`` is ``<results>/<sweep>/<arm>/seed-<k>``; every ``config.yaml`` two levels up
    is compared. Returns the layout; raises :class:`UserError` on a difference.
    """
    settings = run.backend.verl
    validate_layout(settings, run.protocol, where=str(run_dir / "config.yaml"))
    mine = layout_of(settings)
    sweep_dir = run_dir.parent.parent
    for cfg in sorted(sweep_dir.glob("*/seed-*/config.yaml")):
        if cfg.parent.resolve() == run_dir.resolve():
            continue
        theirs = _layout_on_disk(cfg)
        if theirs is not None and theirs != mine:
            raise UserError(
                "this run's GPU layout differs from another run of the sweep, so their step-1 "
                f"rollouts cannot match: {_diff(mine, theirs)}; launch it with the sweep's "
                "layout or into another results directory", file=cfg)
    return mine
