"""The trainer invocation of one run: Hydra overrides, environment and working directory.

The overrides are those of verl-agent's reference ALFWorld script
(``examples/gigpo_trainer/run_alfworld.sh``; ``shared/reference/protocol.md``) with the
values of the run's protocol, model and layout; on Sokoban and WebShop the ``env.*`` keys
are those of verl-agent's ``run_sokoban.sh`` / ``run_webshop.sh``
(:func:`environment_overrides`). Then what ccpo-lab adds:

- the estimator: ``algorithm.adv_estimator=<name>`` plus ``++algorithm.ccpo_lab.*`` (every
  resolved parameter), read by the hook in the TaskRunner actor;
- names, seeds and files: ``trainer.project_name`` (sweep), ``trainer.experiment_name``
  (arm and seed), ``env.seed`` (run seeds spaced so verl-agent's environment streams never
  overlap: :mod:`ccpo_lab.backends.verl.agent.seeds`), placeholder data files,
  checkpoints and resume in the run directory, and the file logger writing the run's
  ``metrics.jsonl`` (verl's ``wandb`` logger beside it when the sweep's ``tracking.wandb``
  is on: :func:`ccpo_lab.runs.wandb_run.verl_logging`).
  ``actor_rollout_ref.rollout.seed`` is never set: verl-agent's vLLM rollout would copy it
  into every request's sampling parameters, so the rollouts of a group would be identical;
  the hooks seed vLLM's engine and each request instead;
- the hook itself: ``++ray_init.runtime_env.worker_process_setup_hook`` and the environment
  variables every Ray worker needs (``++ray_init.runtime_env.env_vars.*``: the run
  directory, the run seed, ``backend.verl.ray_env`` and ``backend.verl.env``).

Keys absent from verl-agent's ``ppo_trainer.yaml`` carry the ``++`` prefix (add or
override), so the same command also runs on a checkout that has since gained the key.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccpo_lab.backends.verl.agent import seeds as seeds
from ccpo_lab.backends.verl.agent.cpu import cpu_overrides
from ccpo_lab.backends.verl.agent.env import (
    ENV_CAPTURE_PHI,
    ENV_DEVICE,
    ENV_METRICS,
    ENV_RUN_DIR,
    ENV_RUN_SEED,
    ENV_VLLM_SEED,
)
from ccpo_lab.backends.verl.checkout import CheckoutInfo, inspect_checkout
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.errors import UserError
from ccpo_lab.estimators.spec import identity_params, typed_params
from ccpo_lab.placement import Placement
from ccpo_lab.runs.wandb_run import verl_logging

ENTRY_MODULE = "ccpo_lab.backends.verl.agent.trainer"
"""The entry point that runs verl-agent's ``verl.trainer.main_ppo`` with the hooks."""
SETUP_HOOK = "ccpo_lab.backends.verl.agent.hooks.setup"
"""Ray ``worker_process_setup_hook``: installs the hooks in every Ray worker process."""


@dataclass(frozen=True)
class TrainerCommand:
    """What the backend executes for one run."""

    argv: tuple[str, ...]
    """The full argument vector (interpreter, entry module, checkout, overrides)."""
    overrides: tuple[str, ...]
    """The Hydra overrides alone, in order."""
    env: dict[str, str]
    """Environment variables set for the trainer process (on top of the caller's)."""
    cwd: str
    """Working directory (the run's ``logs/``: Hydra's ``outputs/`` land there)."""
    determinism: dict[str, Any] = field(default_factory=dict)
    """Seeds and rollout-determinism settings, recorded in ``run.json``."""

    def render(self) -> str:
        """The command as one shell line: ``cd DIR && env K=V ... ARGV``."""
        env = [f"{k}={v}" for k, v in sorted(self.env.items())]
        head = f"cd {shlex.quote(self.cwd)} && "
        return head + shlex.join(["env", *env, *self.argv])


def hydra_value(value: Any) -> str:
    """A Python value as a Hydra override value (strings single-quoted)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    text = str(value)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_SAFE = re.compile(r"[A-Za-z0-9_./@~+-]+")


def path_value(value: str | Path) -> str:
    """A path as an override value: bare when plain, else single-quoted."""
    text = str(value)
    return text if _SAFE.fullmatch(text) else hydra_value(text)


def _plain(value: Any) -> str:
    """Values of the reference script, written as it writes them."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def experiment_name(run: RunConfig) -> str:
    """``trainer.experiment_name``: ``<arm>-seed<k>``."""
    return f"{run.arm}-seed{run.seed}"


def data_files(run_dir: Path) -> tuple[Path, Path]:
    """The placeholder train / validation parquet files of a run."""
    return run_dir / "data" / "train.parquet", run_dir / "data" / "test.parquet"


def estimator_overrides(run: RunConfig) -> list[str]:
    """``algorithm.adv_estimator`` and the ``++algorithm.ccpo_lab.*`` parameters."""
    est = run.estimator
    out = [f"algorithm.adv_estimator={est.name}",
           f"++algorithm.ccpo_lab.estimator={est.name}"]
    params = identity_params(est.name, est.params)  # semantics only when as-run
    for k in sorted(params):
        out.append(f"++algorithm.ccpo_lab.params.{k}={hydra_value(params[k])}")
    return out


ENV_NAMES: dict[str, str] = {
    "alfworld": "alfworld/AlfredTWEnv",
    "sokoban": "Sokoban",
    "webshop": "Webshop",
}
"""verl-agent's ``env.env_name`` of each environment ccpo-lab runs on the verl backend
(``make_envs`` dispatches on it: ``examples/*/run_{alfworld,sokoban,webshop}.sh``)."""


def environment_overrides(run: RunConfig, env_seed: int) -> list[str]:
    """``env.*`` of the run's environment, in the order verl-agent's scripts set them:
    the name, seed, steps, history, group size, then the environment's own keys
    (ALFWorld: ``env.alfworld.eval_dataset``; Sokoban: ``env.sokoban.*``, the text form
    ``tiny_rgb_array``; WebShop: ``env.webshop.use_small`` and ``human_goals``)."""
    p = run.protocol
    name = run.environment
    if name not in ENV_NAMES:
        raise UserError("the verl backend cannot run this environment", key="environments",
                        value=name, valid=list(ENV_NAMES))
    out = [f"env.env_name={ENV_NAMES[name]}", f"env.seed={env_seed}",
           f"env.max_steps={p.max_steps}", f"env.history_length={p.history_length}",
           f"env.rollout.n={p.group_size}"]
    st = run.env_settings
    if name == "alfworld":
        out.append("env.alfworld.eval_dataset=eval_in_distribution")
    elif name == "sokoban":
        out += [f"env.sokoban.dim_room={hydra_value(list(st.dim_room))}",
                f"env.sokoban.num_boxes={st.num_boxes}",
                f"env.sokoban.search_depth={st.search_depth}",
                f"env.sokoban.mode={st.mode}"]
    else:
        out += [f"env.webshop.use_small={_plain(st.use_small)}",
                f"env.webshop.human_goals={_plain(st.human_goals)}"]
    return out


def build_command(run: RunConfig, run_dir: Path, *, resume: bool = False,
                  checkout: CheckoutInfo | None = None,
                  placement: Placement | None = None) -> TrainerCommand:
    """The trainer invocation of ``run`` in ``run_dir`` (nothing is written).

    ``resume``: a checkpoint exists, so the evaluation before training (already logged at
    that step) is skipped. ``checkout``: the verl-agent checkout's capabilities (default:
    inspected at ``backend.verl.verl_agent_path``; a missing checkout offers none).
    ``placement``: where the launcher puts task 0 (its CPUs become Ray's ``num_cpus`` of a
    single-node run unless ``backend.verl.ray_num_cpus`` says otherwise). Long on purpose:
    one line per override, in the reference script's order, so it reads against it.
    """
    s = run.backend.verl
    p = run.protocol
    algorithm = typed_params(run.estimator.name, run.estimator.params).verl_algorithm()
    info = checkout if checkout is not None else inspect_checkout(s.verl_agent_path)
    rd = Path(run_dir)
    train_file, val_file = data_files(rd)
    env_seed = seeds.env_seed(p.env_seed, run.seed)
    overlap = seeds.check_streams(p.train_batch_size, p.val_batch_size)
    if overlap:
        raise UserError(overlap, key="protocol.val_batch_size", value=p.val_batch_size)
    penalty = p.invalid_action_penalty
    num_cpus = s.ray_num_cpus
    given = placement.cpus if placement is not None else None
    wandb = _wandb_logging(run, rd)
    if num_cpus is None and s.nnodes == 1 and given is not None and given > 1:
        num_cpus = given

    ov: list[str] = []
    ov += estimator_overrides(run)[:1]
    ov += [
        f"data.train_files={path_value(train_file)}",
        f"data.val_files={path_value(val_file)}",
        f"data.train_batch_size={p.train_batch_size}",
        f"data.val_batch_size={p.val_batch_size}",
        f"data.max_prompt_length={p.max_prompt_length}",
        f"data.max_response_length={p.max_response_length}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        "data.return_raw_chat=True",
        f"actor_rollout_ref.model.path={path_value(s.model_path)}",
        f"actor_rollout_ref.actor.optim.lr={p.lr!r}",
        f"actor_rollout_ref.model.use_remove_padding={_plain(s.device != 'cpu')}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={p.ppo_mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={s.ppo_micro_batch_size_per_gpu}",
        f"actor_rollout_ref.actor.ppo_epochs={p.ppo_epochs}",
        f"actor_rollout_ref.actor.clip_ratio={p.clip_ratio!r}",
        f"actor_rollout_ref.actor.clip_ratio_low={p.clip_ratio!r}",
        f"actor_rollout_ref.actor.clip_ratio_high={p.clip_ratio!r}",
        f"actor_rollout_ref.actor.entropy_coeff={p.entropy_coeff!r}",
        f"actor_rollout_ref.actor.use_kl_loss={_plain(p.use_kl_loss)}",
        f"actor_rollout_ref.actor.kl_loss_coef={p.kl_loss_coef!r}",
        f"actor_rollout_ref.actor.kl_loss_type={p.kl_loss_type}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="
        f"{s.log_prob_micro_batch_size_per_gpu}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={s.rollout_tp}",
        f"actor_rollout_ref.rollout.name={s.rollout_name}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={s.gpu_memory_utilization!r}",
        "actor_rollout_ref.rollout.enable_chunked_prefill=False",
        "actor_rollout_ref.rollout.enforce_eager=False",
        "actor_rollout_ref.rollout.free_cache_engine=False",
        f"actor_rollout_ref.rollout.temperature={p.train_temperature!r}",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={p.val_temperature!r}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="
        f"{s.log_prob_micro_batch_size_per_gpu}",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        f"actor_rollout_ref.actor.use_invalid_action_penalty={_plain(penalty > 0)}",
        f"actor_rollout_ref.actor.invalid_action_penalty_coef={penalty!r}",
        "algorithm.use_kl_in_reward=False",
        f"algorithm.gamma={algorithm['gamma']!r}",
        f"algorithm.gigpo.step_advantage_w={algorithm['gigpo.step_advantage_w']!r}",
        f"algorithm.gigpo.mode={algorithm['gigpo.mode']}",
        *environment_overrides(run, env_seed),
        f"env.resources_per_worker.num_cpus={s.env_cpus_per_worker!r}",
        "trainer.critic_warmup=0",
        f"trainer.logger=[{','.join(wandb.loggers)}]",
        f"trainer.project_name={wandb.project or run.sweep}",
        f"trainer.experiment_name={experiment_name(run)}",
        f"trainer.n_gpus_per_node={s.n_gpus_per_node}",
        f"trainer.nnodes={s.nnodes}",
        f"trainer.save_freq={p.save_freq}",
        f"trainer.test_freq={p.test_freq}",
        f"trainer.total_epochs={p.total_steps}",
        f"trainer.val_before_train={_plain(not resume)}",
        f"trainer.default_local_dir={path_value(rd / 'checkpoints')}",
        "trainer.resume_mode=auto",
        f"trainer.max_actor_ckpt_to_keep={s.max_ckpt_to_keep}",
    ]
    if num_cpus is not None:
        ov.append(f"ray_init.num_cpus={num_cpus}")
    if info.has_full_determinism:
        ov.append("++actor_rollout_ref.rollout.full_determinism=True")
    if s.device == "cpu":

        ov += cpu_overrides()
    ov += estimator_overrides(run)[1:]
    worker_env = {**_worker_env(run, rd), **wandb.env}
    ov.append(f"++ray_init.runtime_env.worker_process_setup_hook={SETUP_HOOK}")
    for k, v in worker_env.items():
        ov.append(f"++ray_init.runtime_env.env_vars.{k}={hydra_value(v)}")
    ov += list(s.extra_overrides)

    env = {"PYTHONPATH": str(Path(s.verl_agent_path)), **worker_env}
    argv = (s.python, "-m", ENTRY_MODULE, "--verl-agent", str(s.verl_agent_path), "--",
            *ov)
    determinism = {
        "rollout_seed": run.seed,
        "env_seed": env_seed,
        "seeding": seeds.describe(run.seed, p.env_seed, p.train_batch_size, p.group_size,
                                  p.val_batch_size),
        "ray_env": s.ray_env_set(),
        "full_determinism": True if info.has_full_determinism else None,
        "full_determinism_note": None if info.has_full_determinism else
        "the verl-agent checkout has no actor_rollout_ref.rollout.full_determinism",
        "vllm_attention_backend": s.vllm_attention_backend,
        "layout": {"nnodes": s.nnodes, "n_gpus_per_node": s.n_gpus_per_node,
                   "rollout_tp": s.rollout_tp,
                   "rollout_dp": s.n_gpus_per_node * s.nnodes // max(s.rollout_tp, 1)},
        "device": s.device,
    }
    return TrainerCommand(argv=argv, overrides=tuple(ov), env=env, cwd=str(rd / "logs"),
                          determinism=determinism)


def _wandb_logging(run: RunConfig, rd: Path) -> Any:
    """verl's loggers, W&B's project and ``WANDB_*`` variables from the sweep's
    ``tracking.wandb`` (:func:`ccpo_lab.runs.wandb_run.verl_logging`; off: the file
    logger and the console alone, no variable)."""
    return verl_logging(run, rd)


def _worker_env(run: RunConfig, rd: Path) -> dict[str, str]:
    """Variables every Ray worker needs (passed through ``ray_init.runtime_env.env_vars``)."""
    s = run.backend.verl
    env: dict[str, str] = {
        ENV_RUN_DIR: str(rd),
        ENV_METRICS: str(rd / "metrics.jsonl"),
        ENV_RUN_SEED: str(run.seed),
        ENV_VLLM_SEED: str(seeds.vllm_engine_seed(run.seed)),
        "TOKENIZERS_PARALLELISM": "false",
        **s.ray_env_set(),
    }
    if typed_params(run.estimator.name, run.estimator.params).uses_features():
        env[ENV_CAPTURE_PHI] = "1"
    if s.device == "cpu":
        env[ENV_DEVICE] = "cpu"
    if s.vllm_attention_backend:
        env["VLLM_ATTENTION_BACKEND"] = s.vllm_attention_backend
    env.update(_str_env(s.env))
    return env


def _str_env(env: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in env.items()}
