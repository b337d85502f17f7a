"""The verl backend's checkpoint evaluation: verl-agent's own validation loop, eval-only.

One repeat of an evaluation is one run of verl-agent's trainer (``verl.trainer.main_ppo``
through :mod:`ccpo_lab.backends.verl.agent.trainer`, the run's hooks installed) that loads the
checkpoint and only validates: ``RayPPOTrainer.fit`` calls ``_load_checkpoint()``, then
``_validate()`` (``trainer.val_before_train=True``), logs it and returns
(``trainer.val_only=True``). The command is the run's training command
(:func:`ccpo_lab.backends.verl.command.build_command`, so the same model, layout,
protocol, hooks and environment), in a scratch folder of the job
(``<job>/work/<key>/repeat-<r>/``: its data files, checkpoints folder, ``metrics.jsonl``
and logs), with these overrides:

- the checkpoint. verl-agent's ``_load_checkpoint`` with ``trainer.resume_mode=resume_path``
  loads ``trainer.resume_from_path`` (a folder whose name holds ``global_step_``; the
  global step is parsed from it) and its ``actor/`` (model, optimizer and extra-state
  shards of every rank, as saved). The job hard-links the checkpoint's
  ``global_step_<s>/actor/`` into ``.../resume/global_step_0/actor/`` (no copy) and
  resumes from there: the weights of step ``s`` at global step 0, so that every
  checkpoint, arm and seed is validated under the same seeding keys (the hooks re-seed
  validation worker ``i`` with (``env.seed``, val, global step, ``i``)). The best
  checkpoint is kept without optimizer shards (``checkpoints/best/actor``), which
  ``_load_checkpoint`` cannot load; it is evaluated from its merged Hugging Face weights
  (``hf_model/best``, written when training ended) as ``actor_rollout_ref.model.path``
  with ``trainer.resume_mode=disable``, as is a best evaluation at step 0 (the base model);
- the split: ``env.alfworld.eval_dataset=eval_in_distribution | eval_out_of_distribution``;
- the games: ``data.val_batch_size=N`` validation workers (``N`` placeholder rows);
  ``env.seed`` = :data:`EVAL_ENV_SEED` + ``protocol.env_seed`` for every run (not the run's
  own), so worker ``i`` draws the same game for every arm, seed and checkpoint;
- sampling: ``actor_rollout_ref.rollout.val_kwargs.temperature=T`` (``do_sample`` unless
  T is 0), ``val_kwargs.n=1``; repeat ``r`` gives the hooks the seed
  :func:`repeat_seed` (run seed, r) for their per-request vLLM seeds, so a repeat samples
  anew on the same games and every arm of a seed samples with the same seeds;
- ``trainer.val_only=True``, ``trainer.val_before_train=True``, the scratch folder as
  ``trainer.default_local_dir``, and the setup hook :func:`~.eval_hooks.setup`, which adds
  to the run's hooks one that writes each validation episode (game file, success, reward,
  turns, invalid actions) to ``episodes.jsonl`` in the scratch folder.

The episodes are checked against the trainer's own ``val/success_rate`` (logged to the
scratch ``metrics.jsonl``) before the repeat counts.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccpo_lab.backends.eval_contract import Checkpoints, EpisodeRange, RepeatResult
from ccpo_lab.backends.verl.agent.env import ENV_RUN_SEED
from ccpo_lab.backends.verl.agent.seeds import ENV_SEED_STRIDE, VAL_OFFSET
from ccpo_lab.backends.verl.agent.weights import HF_DIR, read_best
from ccpo_lab.backends.verl.checkout import inspect_checkout
from ccpo_lab.backends.verl.command import (
    TrainerCommand,
    build_command,
    data_files,
    experiment_name,
    hydra_value,
    path_value,
)
from ccpo_lab.backends.verl.datafiles import write_placeholder_data
from ccpo_lab.backends.verl.eval_hooks import ENV_EVAL_EPISODES
from ccpo_lab.backends.verl.runner import LOG_NAME, _start_cluster, latest_checkpoint
from ccpo_lab.backends.verl.runner import worker as run_worker
from ccpo_lab.errors import UserError
from ccpo_lab.placement import this_host
from ccpo_lab.runs.references import read_reference

if TYPE_CHECKING:
    from ccpo_lab.config.schema import RunConfig
    from ccpo_lab.evaluation.spec import EvalSetting, EvalTarget
    from ccpo_lab.placement import Placement
    from ccpo_lab.runs.evals import EvalJobDir
    from ccpo_lab.runs.layout import RunDir

EVAL_DATASETS = {"in": "eval_in_distribution", "out": "eval_out_of_distribution"}
"""verl-agent's ``env.alfworld.eval_dataset`` of each split."""
EVAL_ENV_SEED = 1 << 30
"""Added to ``protocol.env_seed``: the ``env.seed`` of every evaluation (beyond the
training seeds of any run seed below 100,000)."""
DRAW_VERSION = 1
EVAL_STEP = 0
"""The global step the checkpoint is loaded at (the hooks' seeding key)."""
SETUP_HOOK = "ccpo_lab.backends.verl.eval_hooks.setup"
EPISODES_FILE = "episodes.jsonl"
METRIC = "val/success_rate"


def repeat_seed(run_seed: int, repeat: int) -> int:
    """The seed the hooks derive repeat ``repeat``'s vLLM request seeds from: the run seed
    for repeat 0 (as in training), a hash of (run seed, repeat) after."""
    if repeat == 0:
        return int(run_seed)
    import hashlib

    digest = hashlib.blake2b(f"eval-repeat/{run_seed}/{repeat}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") % (1 << 31)


def _full_checkpoints(rd: RunDir) -> dict[int, Path]:
    """Step -> ``checkpoints/global_step_<s>/actor`` holding model and optimizer shards."""
    out = {}
    for d in sorted(rd.checkpoints.glob("global_step_*")):
        step = d.name.removeprefix("global_step_")
        actor = d / "actor"
        if step.isdigit() and actor.is_dir() and any(actor.glob("optim_world_size_*")):
            out[int(step)] = actor
    return out


def checkpoints(run: RunConfig, rd: RunDir) -> Checkpoints:
    """Retained full checkpoints, the final one (completed runs), the best evaluation's."""
    full = _full_checkpoints(rd)
    steps = {s: str(p.relative_to(rd.path)) for s, p in full.items()}
    best = read_best(rd.checkpoints)
    best_step, best_why = None, "none recorded (checkpoints/best/best.json)"
    if best is not None:
        b = int(best.get("step", 0))
        merged = rd.path / HF_DIR / "best" / "config.json"
        if b == 0:
            steps.setdefault(0, f"{run.backend.verl.model_path} (the base model)")
            best_step = 0
        elif b in full:
            best_step = b
        elif merged.is_file():
            steps.setdefault(b, str(merged.parent.relative_to(rd.path)))
            best_step = b
        else:
            best_why = (f"step {b}: its checkpoint is gone and {HF_DIR}/best was not "
                        "written (it is merged when training ends)")
    total = run.protocol.total_steps
    state = rd.read_state()
    done = state.get("state") == "completed"
    final = total if done and latest_checkpoint(rd.checkpoints) == total and total in full \
        else None
    why = "" if final is not None else (
        f"the run is not finished (state {state.get('state', 'unknown')})" if not done
        else f"no checkpoint of step {total} with its optimizer shards")
    return Checkpoints(steps=steps, final=final, best=best_step,
                       best_value=None if best is None else float(best.get("value", 0.0)),
                       final_why=why, best_why=best_why)


def episodes(run: RunConfig, split: str) -> EpisodeRange:
    """``data.val_batch_size`` workers: default the training-time evaluation's. ALFWorld
    runs only: the episode records come from a hook on verl-agent's ALFWorld manager
    (:mod:`.eval_hooks`); a Sokoban or WebShop run's held-out scores are its training-time
    evaluations (``val/*`` in ``metrics.jsonl``)."""
    if run.environment != "alfworld":
        raise UserError("ccpo-lab evaluate re-scores verl runs on ALFWorld only (this run's "
                        "held-out scores are its training-time val/* metrics)",
                        key="environment", value=run.environment, valid=["alfworld"])
    if split not in EVAL_DATASETS:
        raise UserError("the verl backend has no such split", key="--split", value=split,
                        valid=list(EVAL_DATASETS))
    data = run.backend.verl.env.get("ALFWORLD_DATA")
    folder = {"in": "valid_seen", "out": "valid_unseen"}[split]
    if data and (Path(data) / "json_2.1.1").is_dir() and \
            not (Path(data) / "json_2.1.1" / folder).is_dir():
        raise UserError(f"ALFWORLD_DATA has no json_2.1.1/{folder} (verl-agent's "
                        f"{EVAL_DATASETS[split]})", key="--split", value=split,
                        detail=f"backend.verl.env.ALFWORLD_DATA = {data}")
    return EpisodeRange(run.protocol.val_batch_size, 1, ENV_SEED_STRIDE - VAL_OFFSET,
                        "validation workers, data.val_batch_size")


def eval_env_seed(run: RunConfig) -> int:
    """``env.seed`` of every evaluation of the sweep."""
    return int(run.protocol.env_seed) + EVAL_ENV_SEED


def draw(run: RunConfig, rd: RunDir, setting: EvalSetting) -> dict[str, Any]:
    """The draw (no arm or seed in it): the data set, the workers and their seeding."""
    s = run.backend.verl
    info = inspect_checkout(s.verl_agent_path)
    return {
        "backend": "verl", "version": DRAW_VERSION, "split": setting.split,
        "eval_dataset": EVAL_DATASETS[setting.split], "workers": setting.episodes,
        "repeats": setting.repeats, "env_seed": eval_env_seed(run), "global_step": EVAL_STEP,
        "games": "validation worker i plays the game its re-seed key (env.seed, val, "
                 "global step, i) draws from the data set (verl-agent's AlfredTWEnv)",
        "alfworld_data": str(s.env.get("ALFWORLD_DATA", "")),
        "verl_agent_commit": info.commit,
        "max_steps": run.protocol.max_steps, "history_length": run.protocol.history_length,
        "max_prompt_length": run.protocol.max_prompt_length,
        "max_response_length": run.protocol.max_response_length,
        "sampling": "vLLM request seeds of (repeat seed, val, global step, call) + row; "
                    "repeat seed = the run seed for repeat 0",
    }


def work_dir(job: EvalJobDir, target: EvalTarget, repeat: int) -> Path:
    """The scratch folder of one repeat."""
    return job.path / "work" / target.key / f"repeat-{repeat:04d}"


def weights(run: RunConfig, rd: RunDir, step: int) -> tuple[str, Path | None, str | None]:
    """How step ``step`` is loaded: ``("resume", actor folder, None)``, ``("model", None,
    model path)`` or ``("base", None, None)``; a reference policy's directory
    (:mod:`ccpo_lab.runs.references`): ``base`` or its folder, whatever ``step``."""
    ref = read_reference(rd)
    if ref is not None:
        return ("base", None, None) if ref.kind == "base" else ("model", None, str(ref.path))
    full = _full_checkpoints(rd)
    if step in full:
        return "resume", full[step], None
    best = read_best(rd.checkpoints)
    if best is not None and int(best.get("step", -1)) == step:
        if step == 0:
            return "base", None, None
        merged = rd.path / HF_DIR / "best"
        if (merged / "config.json").is_file():
            return "model", None, str(merged)
    raise UserError("no loadable checkpoint at this step", file=rd.path, key="step",
                    value=step)


def _link_tree(src: Path, dst: Path) -> None:
    """Hard links of every file of ``src`` under ``dst`` (copies across file systems)."""
    for path in sorted(src.rglob("*")):
        if path.is_dir():
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def _set(overrides: list[str], key: str, value: str) -> list[str]:
    """``overrides`` without any override of ``key`` (whatever its ``+`` prefix), then
    ``key=value`` (``key`` carries its prefix: ``++`` for a key verl-agent lacks)."""
    bare = key.lstrip("+")
    kept = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != bare]
    return [*kept, f"{key}={value}"]


def eval_command(run: RunConfig, rd: RunDir, target: EvalTarget, repeat: int, work: Path,
                 placement: Placement | None = None) -> TrainerCommand:
    """The trainer invocation of one repeat (nothing is written)."""
    s = target.setting
    base = build_command(run, work, resume=False, placement=placement)
    how, actor, model = weights(run, rd, target.step)
    seed = str(repeat_seed(run.seed, repeat))
    episodes_file = str(work / EPISODES_FILE)
    ov = list(base.overrides)
    for key, value in (
        ("data.val_batch_size", str(s.episodes)),
        ("env.seed", str(eval_env_seed(run))),
        ("env.alfworld.eval_dataset", EVAL_DATASETS[s.split]),
        ("actor_rollout_ref.rollout.val_kwargs.temperature", repr(float(s.temperature))),
        ("actor_rollout_ref.rollout.val_kwargs.do_sample", str(s.temperature > 0)),
        ("actor_rollout_ref.rollout.val_kwargs.n", "1"),
        ("trainer.val_before_train", "True"),
        ("trainer.val_only", "True"),
        ("trainer.experiment_name", f"{experiment_name(run)}-eval-{target.key}-r{repeat}"),
        ("trainer.resume_mode", "resume_path" if how == "resume" else "disable"),
        ("++ray_init.runtime_env.worker_process_setup_hook", SETUP_HOOK),
        (f"++ray_init.runtime_env.env_vars.{ENV_RUN_SEED}", hydra_value(seed)),
        (f"++ray_init.runtime_env.env_vars.{ENV_EVAL_EPISODES}", hydra_value(episodes_file)),
    ):
        ov = _set(ov, key, value)
    if how == "resume":
        ov = _set(ov, "trainer.resume_from_path",
                  path_value(work / "resume" / f"global_step_{EVAL_STEP}"))
    if model is not None:
        ov = _set(ov, "actor_rollout_ref.model.path", path_value(model))
    env = {**base.env, ENV_RUN_SEED: seed, ENV_EVAL_EPISODES: episodes_file}
    argv = (*base.argv[:base.argv.index("--") + 1], *ov)
    det = {**base.determinism, "evaluation": {
        "env_seed": eval_env_seed(run), "global_step": EVAL_STEP, "repeat": repeat,
        "request_seed_key": int(seed), "weights": how,
        "source": str(actor) if actor is not None else (model or run.backend.verl.model_path)}}
    return TrainerCommand(argv=argv, overrides=tuple(ov), env=env, cwd=base.cwd,
                          determinism=det)


def describe(run: RunConfig, rd: RunDir, target: EvalTarget, job: EvalJobDir) -> str:
    """The first repeat's trainer command line."""
    cmd = eval_command(run, rd, target, 0, work_dir(job, target, 0))
    return "# verl-agent's validation loop, eval-only (repeat 0):\n  " + cmd.render()


def _read_episodes(work: Path, n: int) -> list[dict[str, Any]]:
    path = work / EPISODES_FILE
    if not path.is_file():
        raise RuntimeError(f"the trainer wrote no episodes ({path}): was the evaluation "
                           "hook installed (ray_init.runtime_env.worker_process_setup_hook)?")
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    if len(rows) != n:
        raise RuntimeError(f"{path}: {len(rows)} episodes, {n} validation workers")
    return sorted(rows, key=lambda e: int(e["worker"]))


def evaluate(run: RunConfig, rd: RunDir, target: EvalTarget, repeat: int, job: EvalJobDir,
             placement: Placement | None = None) -> RepeatResult:
    """Run verl-agent's validation of one repeat and return its episodes."""
    # looked up when called: the tests replace runner._run_trainer
    from ccpo_lab.backends.verl.runner import _run_trainer
    from ccpo_lab.runs.metrics import read_metrics, series

    started = time.perf_counter()
    where = placement if placement is not None else this_host()
    work = work_dir(job, target, repeat)
    shutil.rmtree(work, ignore_errors=True)  # a repeat restarts from nothing
    (work / "logs").mkdir(parents=True)
    cmd = eval_command(run, rd, target, repeat, work, where)
    how, actor, _ = weights(run, rd, target.step)
    if how == "resume" and actor is not None:
        _link_tree(actor, work / "resume" / f"global_step_{EVAL_STEP}" / "actor")
    train_file, val_file = data_files(work)
    write_placeholder_data(train_file, run.protocol.train_batch_size, val_file,
                           target.setting.episodes)
    (work / "command.json").write_text(json.dumps(
        {"argv": list(cmd.argv), "env": cmd.env, "cwd": cmd.cwd,
         "determinism": cmd.determinism}, indent=1, default=str))
    s = run.backend.verl
    cluster = _start_cluster(run, where) if s.nnodes > 1 and not os.environ.get(
        "RAY_ADDRESS") else None
    if cluster is not None:
        cmd = type(cmd)(argv=cmd.argv, overrides=cmd.overrides,
                        env={**cmd.env, "RAY_ADDRESS": cluster.address}, cwd=cmd.cwd,
                        determinism=cmd.determinism)
    try:
        rc, tail = _run_trainer(cmd, work / "logs" / LOG_NAME)
    finally:
        if cluster is not None:
            cluster.stop()
    if rc != 0:
        raise RuntimeError(f"verl-agent's validation exited with code {rc} (log: "
                           f"{work / 'logs' / LOG_NAME}); last lines:\n" + "\n".join(tail[-15:]))
    eps = _read_episodes(work, target.setting.episodes)
    _, logged = series(read_metrics(work / "metrics.jsonl"), METRIC)
    rate = sum(bool(e["success"]) for e in eps) / len(eps)
    if logged.size and abs(float(logged[-1]) - rate) > 1e-6:
        raise RuntimeError(f"the episodes' success rate {rate:.6f} is not the trainer's "
                           f"{METRIC} {float(logged[-1]):.6f}")
    return RepeatResult(
        games=tuple(str(e["game"]) for e in eps),
        episodes=tuple({k: e[k] for k in ("task_type", "success", "reward", "turns",
                                          "invalid")} for e in eps),
        info={"checkpoint": cmd.determinism["evaluation"]["source"], "weights": how,
              "wall_s": round(time.perf_counter() - started, 2),
              "trainer_success_rate": float(logged[-1]) if logged.size else None})


def worker(run: RunConfig, rd: RunDir, target: EvalTarget, job: EvalJobDir,
           placement: Placement) -> None:
    """Tasks 1..n-1 of a multi-node evaluation job: a Ray worker node for each repeat."""
    for _ in range(target.setting.repeats):
        run_worker(run, rd, placement)
