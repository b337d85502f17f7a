"""Reliability round 3 (issue 36), item 14: a run's ``stack`` names the GPUs the run uses,
not the machine's: a CPU run asks nothing of ``nvidia-smi`` (a CPU run on a GPU node and
one on a CPU node ran on the same stack), and a run given a GPU slice records that slice."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ccpo_lab.runs.provenance import run_stack

GPUS = [{"index": "0", "name": "NVIDIA A100-SXM4-80GB", "driver_version": "550.54"},
        {"index": "1", "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54"}]


@pytest.fixture
def nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``nvidia-smi`` on PATH listing two GPUs (one of each model); it
    records each call in the returned file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    script = bin_dir / "nvidia-smi"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "query = next(a for a in sys.argv if a.startswith('--query-gpu='))\n"
        "fields = query.split('=', 1)[1].split(',')\n"
        f"for gpu in {GPUS!r}:\n"
        "    print(', '.join(gpu[f] for f in fields))\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return calls


def test_a_cpu_run_asks_no_gpu(nvidia_smi: Path) -> None:
    st = run_stack(gpus=())
    assert (st["gpu_model"], st["gpu_count"], st["driver"]) == (None, 0, None)
    assert not nvidia_smi.exists()  # not even asked


def test_a_gpu_run_records_its_slice(nvidia_smi: Path) -> None:
    st = run_stack(gpus=(1,))
    assert (st["gpu_model"], st["gpu_count"], st["driver"]) == (
        "NVIDIA H100 80GB HBM3", 1, "550.54")
    every = run_stack(gpus=None, nodes=2)  # unrestricted: every GPU the node has
    assert every["gpu_model"] == "NVIDIA A100-SXM4-80GB + NVIDIA H100 80GB HBM3"
    assert every["gpu_count"] == 4  # two nodes of two


def test_a_cpu_run_on_a_gpu_node_records_no_gpu(workdir: Path, nvidia_smi: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.execute import execute_run
    from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["arms=[grpo]", "seeds=[0]",
                                                        "protocol.total_steps=1"])
    run = sw.runs[0]
    rd = resolve_run_dir(sw.sweep_dir(workdir / "results"), run)
    init_run_dir(rd, run)
    execute_run(rd.path)  # the CPU backend: no GPU is used
    st = rd.read_run()["stack"]
    assert (st["gpu_model"], st["gpu_count"], st["driver"]) == (None, 0, None)
    assert not nvidia_smi.exists()
