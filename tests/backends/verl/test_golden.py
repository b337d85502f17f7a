"""Golden files: the trainer commands of the shipped sweeps and the multi-node job script.

Regenerate after an intended change with ``CCPO_LAB_UPDATE_GOLDEN=1 pytest tests/backends/
verl/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.command import build_command
from ccpo_lab.backends.verl.ray_cluster import main as ray_cluster_main
from ccpo_lab.backends.verl.ray_cluster import sbatch_section
from ccpo_lab.backends.verl.runner import describe
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.params import sbatch_text
from ccpo_lab.launch.plan import launcher_for, plan_sweep
from tests.backends.verl.conftest import REPO, SHIPPED, planned, run_dir, sweep_runs

GOLDEN = REPO / "tests" / "golden"
RESULTS = Path("/results")
MULTI = ["backend.verl.nnodes=2", "backend.verl.ppo_micro_batch_size_per_gpu=16"]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CCPO_LAB_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path} (CCPO_LAB_UPDATE_GOLDEN=1 writes it)"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


def commands_text(sweep: str) -> str:
    blocks = []
    placement = planned(sweep)  # where the sweep's launcher puts task 0 (its CPUs)
    for run in sweep_runs(sweep):
        rd = run_dir(RESULTS, run)
        cmd = build_command(run, rd.path, placement=placement)
        assert describe(run, rd, placement).endswith("\n  " + cmd.render())
        lines = [f"## {run.arm} seed {run.seed} (run {run.short_id})", f"cwd {cmd.cwd}"]
        lines += [f"env {k}={v}" for k, v in sorted(cmd.env.items())]
        lines += [f"argv {a}" for a in cmd.argv]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


@pytest.mark.parametrize("sweep", SHIPPED)
def test_trainer_commands_of_the_shipped_sweeps(sweep: str) -> None:
    check_golden(f"verl-{sweep}.txt", commands_text(sweep))


def test_shipped_sweeps_share_run_identities() -> None:
    ids = [[r.run_id for r in sweep_runs(s)] for s in SHIPPED]
    assert ids[0] == ids[1] and len(set(ids[0])) == 15


def test_multi_node_job_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sw = load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml", MULTI)
    plan = plan_sweep(sw, tmp_path)
    assert [p.status for p in plan] == ["new"] * 15
    params = launcher_for(sw, RESULTS).parameters()  # type: ignore[attr-defined]
    script = sbatch_text(params, "/results/alfworld-qwen7b/_jobs/%j",
                         "python3 -u -m submitit.core._submit /results/alfworld-qwen7b/_jobs/%j",
                         map_count=15)
    assert ray_cluster_main(["up", "--dry-run", "--hosts", "gpu-a,gpu-b", "--per-node", "8",
                             "--head-ip", "10.0.0.1"]) == 0
    dry = capsys.readouterr().out
    section = "\n".join(sbatch_section(2, 8, port=6379))
    check_golden("verl-job-2nodes.txt",
                 f"{script}\n# ---- optional job-script section (custom scripts) ----\n"
                 f"{section}\n# ---- ray_cluster up --dry-run ----\n{dry}")
    assert "#SBATCH --nodes=2" in script and "#SBATCH --gpus-per-node=8" in script
    assert "srun --nodes=1 --ntasks=1 --overlap --gpus-per-node=8 -w gpu-b" in dry
    multi_run = plan[0].run
    ov = build_command(multi_run, run_dir(RESULTS, multi_run).path,
                       placement=planned("alfworld-qwen7b-slurm", MULTI)).overrides
    assert "trainer.nnodes=2" in ov and not any(o.startswith("ray_init.num_cpus") for o in ov)
