"""Where a run came from: ccpo-lab version and git state, library versions, host."""

from __future__ import annotations

import functools
import socket
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import ccpo_lab

TRACKED_PACKAGES = ("torch", "verl", "alfworld", "textworld", "ray", "submitit", "numpy")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed versions, read from package metadata (nothing is imported)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@functools.cache
def git_state(repo: str | None = None) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the ccpo-lab source checkout."""
    root = Path(repo) if repo else Path(ccpo_lab.__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                               timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def now_iso() -> str:
    """Current UTC time, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def provenance() -> dict[str, Any]:
    """Everything recorded about the software and machine that created a run."""
    return {
        "ccpo_lab_version": ccpo_lab.__version__,
        "git": git_state(),
        "versions": package_versions(),
        "host": socket.gethostname(),
        "created": now_iso(),
    }


STACK_FIELDS = ("gpu_model", "gpu_count", "driver", "cuda", "torch", "vllm", "flash_attn",
                "transformers", "verl_agent_commit", "alfworld", "cpu_model", "isa",
                "torch_kernel")
"""What a run's ``stack`` record holds (issue 36, item 14): identical seeds give other
results on other GPUs, drivers, CUDA, torch or vLLM versions, or CPU kernels, so a
comparison across stacks is not a comparison of estimators."""


def _cpu() -> tuple[str | None, str | None]:
    """``(CPU model, widest vector ISA)`` from ``/proc/cpuinfo``."""
    model, flags = None, ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = value
                if model and flags:
                    break
    except OSError:
        return None, None
    words = set(flags.split())
    isa = next((name for name, flag in (("avx512", "avx512f"), ("avx2", "avx2"),
                                        ("avx", "avx"), ("sse4.2", "sse4_2")) if flag in words),
               None)
    return model, isa


def _nvidia(gpus: tuple[int, ...] | None, nodes: int
            ) -> tuple[str | None, int | None, str | None]:
    """``(GPU model, GPU count, driver)`` of the GPUs a run uses, from ``nvidia-smi`` (10 s
    at most, if present): ``gpus`` is its slice of this node (None: every GPU; (): a CPU
    run, nothing asked), ``nodes`` how many such nodes it spans."""
    import shutil

    if gpus == ():
        return None, 0, None
    if shutil.which("nvidia-smi") is None:
        return None, None, None
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None, None, None
    rows = [[c.strip() for c in line.split(",")] for line in r.stdout.splitlines() if line]
    rows = [row for row in rows if len(row) >= 3
            and (gpus is None or (row[0].isdigit() and int(row[0]) in gpus))]
    if r.returncode != 0 or not rows:
        return None, None, None
    names = sorted({", ".join(row[1:-1]) for row in rows})
    return " + ".join(names), len(rows) * nodes, rows[0][-1]


def _torch() -> tuple[str | None, str | None]:
    """``(CUDA version torch was built for, torch's CPU kernel level)``."""
    try:
        import torch
    except ImportError:
        return None, None
    return torch.version.cuda, str(torch.backends.cpu.get_cpu_capability())


def _checkout_commit(path: str | None) -> str | None:
    """The commit of a verl-agent checkout: ``git rev-parse HEAD``, else the commit an
    extracted tree records in ``.extracted-ok``."""
    if not path:
        return None
    root = Path(path)
    marker = root / ".extracted-ok"
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                           text=True, timeout=10, check=False)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
        return marker.read_text(encoding="utf-8").split()[0] if marker.is_file() else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return None


def run_stack(versions: dict[str, str | None] | None = None,
              verl_agent: str | None = None, *, gpus: tuple[int, ...] | None = None,
              nodes: int = 1) -> dict[str, Any]:
    """The stack a run executes on (:data:`STACK_FIELDS`; None where absent or unknown).

    ``versions``: the trainer environment's package versions when the run trains in
    another interpreter (the verl backend), else this one's; ``verl_agent``: the
    verl-agent checkout it runs, if any; ``gpus``: the run's GPU slice of this node (None:
    every GPU of it; (): a CPU run, whose record names no GPU whatever the node has, so
    CPU runs on GPU and CPU nodes compare equal); ``nodes``: nodes the run spans."""
    v = versions if versions is not None else package_versions(
        ("torch", "vllm", "flash-attn", "transformers", "alfworld"))
    gpu, count, driver = _nvidia(gpus, nodes)
    cuda, kernel = _torch()
    cpu, isa = _cpu()
    return {"gpu_model": gpu, "gpu_count": count, "driver": driver, "cuda": cuda,
            "torch": v.get("torch"), "vllm": v.get("vllm"), "flash_attn": v.get("flash-attn"),
            "transformers": v.get("transformers"),
            "verl_agent_commit": _checkout_commit(verl_agent), "alfworld": v.get("alfworld"),
            "cpu_model": cpu, "isa": isa, "torch_kernel": kernel}


def stack_differences(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    """``(field, a's value, b's value)`` for each field two stack records differ in
    (records that are not mappings: none compared)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    return [(k, a.get(k), b.get(k)) for k in STACK_FIELDS if a.get(k) != b.get(k)]
