"""``train`` end to end against a stand-in verl-agent checkout (no GPU, no model).

The stand-in is the smallest tree the entry point accepts: ``verl/trainer/main_ppo.py``
reads the Hydra overrides it is given, logs through ``verl.utils.tracking.Tracking`` (a
verl-agent-like class without a ``file`` backend, patched by the real hook on import),
writes verl's checkpoint markers and can be told to crash. Everything else is real: the
subprocess, the entry point, the import hook, the file logger, resume and ``run.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.runner import latest_checkpoint, train
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.runs.layout import RunDir, init_run_dir
from ccpo_lab.runs.metrics import read_metrics
from tests.backends.verl.conftest import REPO

TRACKING = '''
class Tracking:
    supported_backend = ["console", "wandb"]

    def __init__(self, project_name, experiment_name, default_backend="console", config=None):
        backends = [default_backend] if isinstance(default_backend, str) else default_backend
        for b in backends:
            assert b in self.supported_backend, f"{b} is not supported"
        self.logger = {}

    def log(self, data, step, backend=None):
        for logger in self.logger.values():
            logger.log(data=data, step=step)
'''

MAIN_PPO = '''
import json, os, sys
ov = {}
for a in sys.argv[1:]:
    k, _, v = a.partition("=")
    ov[k.lstrip("+")] = v
from verl.utils.tracking import Tracking
from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks
t = Tracking(ov["trainer.project_name"], ov["trainer.experiment_name"],
             default_backend=ov["trainer.logger"].strip("[]").split(","))
ck = ov["trainer.default_local_dir"]
latest = os.path.join(ck, "latest_checkpointed_iteration.txt")
start = int(open(latest).read()) if os.path.exists(latest) else 0
if ov["trainer.val_before_train"] == "True":
    t.log({"val/success_rate": 0.0}, step=0)
fail_at = int(os.environ.get("FAKE_FAIL_AT", "0"))
for step in range(start + 1, int(ov["trainer.total_epochs"]) + 1):
    if step == fail_at:
        print("crash at", step, flush=True)
        sys.exit(3)
    m = {"episode/reward/mean": float(step)}
    if step % int(ov["trainer.test_freq"]) == 0:
        m["val/success_rate"] = step / 10
    t.log(m, step)
    if step % int(ov["trainer.save_freq"]) == 0:
        os.makedirs(os.path.join(ck, f"global_step_{step}"), exist_ok=True)
        open(latest, "w").write(str(step))
print("HOOKS", json.dumps(verl_agent_hooks.status()),
      ov["ray_init.runtime_env.worker_process_setup_hook"], os.getcwd(), flush=True)
'''


def make_checkout(root: Path) -> Path:
    for d in ("verl", "verl/trainer", "verl/utils"):
        (root / d).mkdir(parents=True, exist_ok=True)
        (root / d / "__init__.py").write_text("")
    (root / "verl" / "trainer" / "main_ppo.py").write_text(MAIN_PPO)
    (root / "verl" / "utils" / "tracking.py").write_text(TRACKING)
    return root


@pytest.mark.slow
def test_train_runs_resumes_and_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    checkout = make_checkout(tmp_path / "verl-agent")
    sw = load_sweep(REPO / "sweeps" / "alfworld-qwen7b-node.yaml", [
        "arms=[ccpo-return-hard]", "analysis.reference=null", "seeds=[0]",
        "backend.verl.n_gpus_per_node=1", "backend.verl.rollout_tp=1", "launcher.gpus_per_run=1",
        "protocol.total_steps=4",
        "protocol.test_freq=2", "protocol.save_freq=2", "protocol.train_batch_size=2",
        "protocol.val_batch_size=3", "protocol.ppo_mini_batch_size=32",
        f"backend.verl.verl_agent_path={checkout}", f"backend.verl.python={sys.executable}"])
    run = sw.runs[0]
    rd = RunDir(tmp_path / "res" / run.sweep / run.arm / "seed-0")
    init_run_dir(rd, run)

    monkeypatch.setenv("FAKE_FAIL_AT", "3")
    with pytest.raises(RuntimeError, match="exited with code 3"):
        train(run, rd)
    assert latest_checkpoint(rd.checkpoints) == 2
    assert [r["step"] for r in read_metrics(rd.metrics)] == [0, 1, 2]

    monkeypatch.delenv("FAKE_FAIL_AT")
    summary = train(run, rd)
    assert summary == {"steps": 4, "total_steps": 4, "val/success_rate": 0.4, "val_step": 4}
    rows = read_metrics(rd.metrics)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]          # each step once
    assert rows[4]["data"] == {"episode/reward/mean": 4.0, "val/success_rate": 0.4}

    info = rd.read_run()
    assert info["trainer"]["resume_from_step"] == 2
    assert "trainer.val_before_train=False" in info["trainer"]["argv"]
    assert info["determinism"]["rollout_seed"] == 0 and info["determinism"]["env_seed"] == 0
    assert info["verl_agent"]["path"] == str(checkout)
    log = (rd.logs / "trainer.log").read_text()
    assert "crash at 3" in log
    hooks_line = log.strip().splitlines()[-1].split(" ", 1)[1]
    status = json.loads(hooks_line.split("} ", 1)[0] + "}")
    assert status["installed"] and status["patched"] == ["verl.utils.tracking"]
    assert hooks_line.endswith(f"ccpo_lab.backends.verl.agent.hooks.setup {rd.logs}")
    assert (rd.path / "data" / "train.parquet").is_file()
    import pyarrow.parquet as pq

    assert pq.read_table(rd.path / "data" / "test.parquet").num_rows == 3
    assert json.loads(rd.state_json.read_text())["step"] == 4


def test_missing_checkout_is_a_user_error(tmp_path: Path) -> None:
    from ccpo_lab.errors import UserError

    sw = load_sweep(REPO / "sweeps" / "alfworld-qwen7b-node.yaml",
                    ["arms=[grpo]", "seeds=[0]",
                     f"backend.verl.verl_agent_path={tmp_path / 'nowhere'}"])
    run = sw.runs[0]
    rd = RunDir(tmp_path / "res" / run.sweep / run.arm / "seed-0")
    init_run_dir(rd, run)
    with pytest.raises(UserError, match="checkout not found") as e:
        train(run, rd)
    assert e.value.key == "backend.verl.verl_agent_path"


def test_entry_point_refuses_a_non_checkout(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.backends.verl.agent.trainer import main

    assert main(["--verl-agent", str(tmp_path), "--", "a=b"]) == 2
    assert "not a verl-agent checkout" in capsys.readouterr().err
