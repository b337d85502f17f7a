"""A reference policy on the verl backend: verl-agent's validation loop on its weights,
with every other setting of the seed's own evaluation (the trainer itself needs GPUs)."""

from __future__ import annotations

from pathlib import Path

from ccpo_lab.backends.verl import evaluate as V
from ccpo_lab.evaluation.reference import ReferenceRun, resolve, write_reference_dir
from ccpo_lab.runs.evals import job_dir
from ccpo_lab.runs.layout import RunDir
from tests.backends.verl.conftest import sweep_runs
from tests.backends.verl.test_evaluate import _fake_run, _ov, _target
from tests.evaluation.tiny_hf import save_tiny_model

DIFFERENT = {"actor_rollout_ref.model.path", "trainer.resume_mode", "trainer.resume_from_path",
             "trainer.experiment_name", "++ray_init.runtime_env.env_vars.CCPO_LAB_EVAL_EPISODES",
             "++ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
             "++ray_init.runtime_env.env_vars.CCPO_LAB_RUN_DIR", "trainer.default_local_dir",
             "data.train_files", "data.val_files"}
"""What may differ between a checkpoint's and a reference's repeat: the weights and
where the repeat's scratch files are."""


def test_a_reference_validates_its_own_weights_on_the_seeds_draw(tmp_path: Path) -> None:
    run = sweep_runs("alfworld-qwen7b-slurm")[0]
    rd = _fake_run(tmp_path / "sweep", run)
    folder = save_tiny_model(tmp_path / "released")
    for ref, model in ((resolve(str(folder)), str(folder.resolve())),
                       (resolve("base"), run.backend.verl.model_path)):
        dest = RunDir(rd.sweep_root / ref.dir_name / f"seed-{run.seed}")
        write_reference_dir(ReferenceRun(ref, run, rd, dest))
        t_run, t_ref = _target(run, rd, 150), _target(run, dest, 0)
        assert t_ref.draw_id == t_run.draw_id  # the draw is the seed's
        job = job_dir(dest, "0123456789ab")
        mine = _ov(V.eval_command(run, dest, t_ref, 1, V.work_dir(job, t_ref, 1)))
        theirs = _ov(V.eval_command(run, rd, t_run, 1, V.work_dir(job_dir(rd, "x"), t_run, 1)))
        assert mine["trainer.resume_mode"] == "disable" and "trainer.resume_from_path" not in mine
        assert mine["actor_rollout_ref.model.path"].strip("'") == model
        same = {k for k in mine.keys() | theirs.keys() if k not in DIFFERENT}
        assert {k: mine.get(k) for k in same} == {k: theirs.get(k) for k in same}
        assert V.weights(run, dest, 0)[0] == ("base" if ref.kind == "base" else "model")
