"""Reliability round 3 (issue 36), item 14: every run records its stack; ``verify`` fails
when arms of a comparison ran on different stacks, naming the difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.provenance import STACK_FIELDS, run_stack, stack_differences
from tests.report.builders import episodes, init_sweep, sweep_file, write_step1


def test_the_stack_names_every_field() -> None:
    st = run_stack()
    assert set(st) == set(STACK_FIELDS)
    assert st["torch"] and st["cpu_model"] and st["torch_kernel"]
    assert stack_differences(st, {**st, "vllm": "0.11.0"}) == [("vllm", st["vllm"], "0.11.0")]


def test_verify_fails_on_arms_that_ran_on_different_stacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    for rd in rds.values():
        write_step1(rd, episodes())
    assert main(["verify", str(sweep_dir)]) == 0
    assert "stack not recorded: grpo, gigpo" in capsys.readouterr().out  # old runs: a note
    st = run_stack()
    rds[("grpo", 0)].update_run(stack=st)
    rds[("gigpo", 0)].update_run(stack={**st, "gpu_model": "NVIDIA H100", "vllm": "0.8.5"})
    assert main(["verify", str(sweep_dir)]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT STACK: gigpo: gpu_model 'NVIDIA H100' vs" in out and "vllm" in out
    rds[("gigpo", 0)].update_run(stack=st)
    assert main(["verify", str(sweep_dir)]) == 0


def test_a_run_records_its_stack(workdir: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.execute import execute_run
    from ccpo_lab.runs.layout import init_run_dir, resolve_run_dir

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml", ["arms=[grpo]", "seeds=[0]",
                                                        "protocol.total_steps=1"])
    run = sw.runs[0]
    rd = resolve_run_dir(sw.sweep_dir(workdir / "results"), run)
    init_run_dir(rd, run)
    execute_run(rd.path)
    assert set(rd.read_run()["stack"]) == set(STACK_FIELDS)


def test_the_report_says_which_stack_the_arms_ran_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.report.builders import log_evals

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,)), tmp_path / "results")
    st = run_stack()
    for rd in rds.values():
        log_evals(rd, {0: 0.25, 20: 0.5}, train_steps=range(1, 3))
        rd.update_run(stack=st)
    assert main(["report", str(sweep_dir)]) == 0
    assert "stack (every run that recorded one): torch" in capsys.readouterr().out
    rds[("gigpo", 0)].update_run(stack={**st, "vllm": "0.8.5"})
    assert main(["report", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "ran on different stacks" in out and "vllm: gigpo 0.8.5; grpo None" in out
