"""``ccpo-lab doctor``: one line per check, ok or what to fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from ccpo_lab.backends.verl.doctor import model_params
from ccpo_lab.cli.main import main
from tests.backends.verl.conftest import REPO
from tests.backends.verl.test_runner import make_checkout


def _machine(tmp_path: Path) -> Path:
    checkout = make_checkout(tmp_path / "va")
    alf = tmp_path / "alfworld"
    for d in ("json_2.1.1/train/pick_x/trial_1", "json_2.1.1/valid_seen", "logic"):
        (alf / d).mkdir(parents=True)
    model = tmp_path / "Qwen2.5-0.5B-Instruct"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (model / "model.safetensors").write_bytes(b"x")
    sweep = yaml.safe_load((REPO / "sweeps" / "alfworld-qwen7b-node.yaml").read_text())
    sweep["arms_dir"] = str(REPO / "arms")
    sweep["backend"]["verl"].update(verl_agent_path=str(checkout), python=sys.executable,
                                    model_path=str(model), env={"ALFWORLD_DATA": str(alf)})
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


@pytest.mark.slow
def test_doctor_reports_each_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["doctor", str(_machine(tmp_path)), "--results", str(tmp_path / "res")]
    code = main(args)
    lines = {ln.split(":", 1)[0]: ln for ln in capsys.readouterr().out.splitlines()}
    status = {k[6:]: k[:5].strip() for k in lines if ":" in lines[k]}
    assert status["verl-agent checkout"] == "ok"
    assert status["verl-agent hooks"] == "FIX"     # the stand-in has no trainer modules
    assert "verl.trainer.ppo.ray_trainer" in lines["FIX   verl-agent hooks"]
    assert status["ALFWorld data"] == "ok" and "1 training games" in \
        lines["ok    ALFWorld data"]
    assert status["model"] == "ok" and status["MLflow"] == "ok" and status["disk"] == "ok"
    # the sweep's launcher checks this machine itself (local: its GPU slots), not Slurm
    assert "Slurm" not in status and status["local launcher"] in ("ok", "FIX")
    assert status["ccpo-lab"] == "ok"
    assert status["GPUs"] in ("ok", "FIX") and status["torch"] == "ok"
    assert code == 1


def test_doctor_refuses_a_local_backend_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(REPO / "sweeps" / "demo.yaml")]) == 2
    assert "backend.kind" in capsys.readouterr().err


def test_checkpoint_size_from_the_model_name_or_config(tmp_path: Path) -> None:
    assert model_params("Qwen/Qwen2.5-7B-Instruct") == 7e9
    assert model_params("/m/Qwen2.5-1.5B-Instruct") == 1.5e9
    (tmp_path / "config.json").write_text(json.dumps(
        {"hidden_size": 4, "num_hidden_layers": 2, "vocab_size": 10, "intermediate_size": 8}))
    # 2 * (4*16 + 3*4*8) + 2*10*4 = 2 * 160 + 80
    assert model_params(str(tmp_path)) == 400.0


def _slurm_sweep(tmp_path: Path) -> Path:
    path = _machine(tmp_path)
    sweep = yaml.safe_load(path.read_text())
    slurm = yaml.safe_load((REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml").read_text())
    sweep["launcher"] = slurm["launcher"]
    path.write_text(yaml.safe_dump(sweep))
    return path


def _status(out: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for ln in out.splitlines():
        if ":" in ln and ln[:5].strip() in ("ok", "FIX", "skip"):
            name, _, detail = ln[6:].partition(": ")
            rows[name] = (ln[:5].strip(), detail)
    return rows


@pytest.mark.slow
def test_a_login_node_leaves_node_checks_to_a_job(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Defect 7: on a login node the GPU check failed; node-side checks are skipped there."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    main(["doctor", str(_slurm_sweep(tmp_path)), "--results", str(tmp_path / "res")])
    rows = _status(capsys.readouterr().out)
    for name in ("GPUs", "flash-attn", "vLLM attention", "ALFWorld data", "model"):
        assert rows[name][0] == "skip" and "--on-node" in rows[name][1], name
    assert rows["trainer environment"][0] == "ok"            # this venv has what jobs need
    assert rows["verl-agent checkout"][0] == "ok"


@pytest.mark.slow
def test_on_node_runs_the_node_checks_in_a_job_of_the_sweeps_launcher(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", str(_machine(tmp_path)), "--results", str(tmp_path / "res"),
                 "--on-node"])
    rows = _status(capsys.readouterr().out)
    jobs = {k.split(" [", 1)[1] for k in rows if " [local job " in k}
    assert len(jobs) == 1                                     # one job ran them all
    (where,) = jobs
    assert rows[f"ALFWorld data [{where}"][0] == "ok"
    assert rows[f"model [{where}"][0] == "ok"
    # this venv has neither flash-attn nor vLLM: both named, with what to do
    assert rows[f"flash-attn [{where}"][0] == "FIX"
    assert "vllm does not import" in rows[f"vLLM attention [{where}"][1]
    assert code == 1
