"""The GPU smoke test's logic, run on the CPU as the GPU machine would run it: without verl,
omegaconf, hydra, ray or tensordict (absent there), so the stand-in DataProto path runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = """
import sys
for m in ("verl", "omegaconf", "hydra", "ray", "tensordict", "submitit", "mlflow"):
    sys.modules[m] = None          # as on the GPU machine: not installed
from ccpo_lab.backends.verl.smoke import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_gpu_smoke_passes_on_cpu_without_verl(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    env.pop("CCPO_LAB_VERL_AGENT", None)     # as on the GPU machine: no checkout unless given
    r = subprocess.run([sys.executable, "-c", RUNNER, "--device", "cpu", "--out",
                        str(tmp_path / "out"), "--work", str(tmp_path / "work")],
                       capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "RESULT: PASS" in r.stdout
    doc = json.loads((tmp_path / "out" / "gpu-smoke.json").read_text())
    status = {c["name"]: c["status"] for c in doc["checks"]}
    assert status == {"device": "PASS", "tiny-model": "PASS", "feature-capture": "PASS",
                      "estimators-on-device": "PASS", "dataproto-path": "PASS",
                      "two-arms-two-steps": "PASS", "two-arms-two-steps/details": "INFO",
                      # need vLLM / a verl-agent checkout and a GPU (scripts/gpu-smoke.sh)
                      "vllm-request-seeds": "SKIP", "hf-merge": "SKIP"}
    dp = next(c for c in doc["checks"] if c["name"] == "dataproto-path")
    assert dp["detail"].startswith("stand-in")
    details = next(c for c in doc["checks"] if c["status"] == "INFO")["detail"]
    assert details["grpo"]["fingerprints"][0] == details["ccpo"]["fingerprints"][0]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu-smoke.json"]
