"""Defect 8: loadable weights of the final checkpoint and of the best held-out evaluation.

verl-agent's trainer (evaluations every ``test_freq``, checkpoints every ``save_freq``,
older ones deleted) is stood in for by a class whose ``_save_checkpoint`` writes an FSDP
checkpoint's files (model / optimizer shards, ``huggingface/`` config) and rotates them as
``max_actor_ckpt_to_keep=1`` does; its ``fit`` calls ``_validate`` and ``_save_checkpoint``
in the pinned commit's order. A real FSDP checkpoint needs GPUs, and so does the merge of
one: ``scripts/gpu-smoke.sh`` runs verl-agent's merger; here a stand-in merger script only
shows which checkpoint is merged where and what ``run.json`` records.
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from ccpo_lab.backends.verl.agent import patches as P

VALS = {0: 0.10, 5: 0.30, 10: 0.25, 15: 0.50, 20: 0.40}


def _trainer_module(ckpt: Path, saves: list[int]) -> types.ModuleType:
    mod = types.ModuleType("fake_ray_trainer")

    class RayPPOTrainer:
        def __init__(self, config: Any) -> None:
            self.config = config
            self.global_steps = 0
            self.total_training_steps = 20

        def _validate(self) -> dict[str, float]:
            return {"val/success_rate": VALS[self.global_steps]}

        def _save_checkpoint(self) -> None:
            saves.append(self.global_steps)
            actor = ckpt / f"global_step_{self.global_steps}" / "actor"
            (actor / "huggingface").mkdir(parents=True)
            (actor / "model_world_size_1_rank_0.pt").write_text(f"w{self.global_steps}")
            (actor / "optim_world_size_1_rank_0.pt").write_text("adam")
            (actor / "huggingface" / "config.json").write_text("{}")
            for old in ckpt.glob("global_step_*"):            # max_actor_ckpt_to_keep=1
                if old.name != f"global_step_{self.global_steps}":
                    shutil.rmtree(old)
            (ckpt / "latest_checkpointed_iteration.txt").write_text(str(self.global_steps))

        def fit(self) -> None:
            self._validate()                                   # val_before_train
            for step in range(1, 21):
                self.global_steps = step
                if step % 5 == 0:
                    self._validate()
                if step % 10 == 0:
                    self._save_checkpoint()

    mod.RayPPOTrainer = RayPPOTrainer
    mod.compute_advantage = lambda data, adv_estimator, **kw: data
    mod.AdvantageEstimator = []
    return mod


def test_the_best_evaluations_checkpoint_survives_rotation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    monkeypatch.setenv("CCPO_LAB_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(P, "STATE", P.HookState())
    saves: list[int] = []
    rt = _trainer_module(ckpt, saves)
    P.patch_ray_trainer(rt)
    cfg = OmegaConf.create({"algorithm": {"adv_estimator": "grpo"},
                            "trainer": {"default_local_dir": str(ckpt), "save_freq": 10}})
    rt.RayPPOTrainer(cfg).fit()
    assert saves == [5, 10, 15, 20]          # extra saves at the new bests 5 and 15
    assert sorted(p.name for p in ckpt.glob("global_step_*")) == ["global_step_20"]
    best = json.loads((ckpt / "best" / "best.json").read_text())
    assert (best["step"], best["value"]) == (15, 0.5)
    kept = ckpt / "best" / "actor"
    assert (kept / "model_world_size_1_rank_0.pt").read_text() == "w15"
    assert (kept / "huggingface" / "config.json").is_file()
    assert not (kept / "optim_world_size_1_rank_0.pt").exists()   # no optimizer state


def test_final_and_best_are_merged_and_recorded(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.backends.verl.runner import export_hf_models
    from ccpo_lab.runs.layout import RunDir, init_run_dir
    from tests.backends.verl.conftest import sweep_runs

    checkout = tmp_path / "va"
    (checkout / "scripts").mkdir(parents=True)
    # stand-in for verl-agent's merger: records its arguments as the merged model's config
    (checkout / "scripts" / "model_merger.py").write_text(
        "import json, os, sys\n"
        "a = sys.argv[1:]\n"
        "t = a[a.index('--target_dir') + 1]\n"
        "os.makedirs(t, exist_ok=True)\n"
        "json.dump({'argv': a}, open(os.path.join(t, 'config.json'), 'w'))\n")
    run = sweep_runs("alfworld-qwen7b-slurm", [f"backend.verl.verl_agent_path={checkout}",
                                               f"backend.verl.python={sys.executable}"])[0]
    rd = RunDir(tmp_path / "run")
    init_run_dir(rd, run)
    monkeypatch.setenv("CCPO_LAB_RUN_DIR", str(rd.path))
    monkeypatch.setattr(P, "STATE", P.HookState())
    rt = _trainer_module(rd.checkpoints, [])
    P.patch_ray_trainer(rt)
    rd.checkpoints.mkdir(exist_ok=True)
    cfg = OmegaConf.create({"algorithm": {"adv_estimator": "grpo"},
                            "trainer": {"default_local_dir": str(rd.checkpoints),
                                        "save_freq": 10}})
    rt.RayPPOTrainer(cfg).fit()
    rec = export_hf_models(run, rd)
    assert rec["final"]["step"] == 20 and rec["best"]["step"] == 15
    assert rec["best"]["value"] == 0.5
    for name, src in (("final", rd.checkpoints / "global_step_20" / "actor"),
                      ("best", rd.checkpoints / "best" / "actor")):
        argv = json.loads((rd.path / "hf_model" / name / "config.json").read_text())["argv"]
        assert argv[:4] == ["merge", "--backend", "fsdp", "--local_dir"]
        assert argv[4] == str(src) and "error" not in rec[name]
    assert json.loads((rd.path / "run.json").read_text())["hf_model"] == rec
