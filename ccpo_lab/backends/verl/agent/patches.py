"""The patches :mod:`.hooks` applies to verl-agent's modules, one function each.

Each ``patch_*`` receives the freshly imported module and replaces attributes with
wrappers that call the original (``functools.wraps`` keeps verl's ``@register`` dispatch
attributes). State shared inside one process (the TaskRunner: trainer config, pending
diagnostics, validation episode lengths) lives in :data:`STATE`.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ccpo_lab.backends.verl.agent import seeds as seeds
from ccpo_lab.backends.verl.agent.env import (
    ENV_CAPTURE_PHI,
    ENV_DUMP_ROLLOUTS,
    ENV_RUN_DIR,
    ENV_RUN_SEED,
    ENV_VLLM_SEED,
)
from ccpo_lab.backends.verl.agent.io import (
    RunFileLogger,
    record_step1,
    step1_episodes,
    turn_indices,
)
from ccpo_lab.backends.verl.agent.phi import CAPTURE, PHI_KEY, forward_capturing

STEP_KEY = "ccpo_lab_step"
"""``non_tensor_batch`` key of the turn index added to every rollout row."""


@dataclass
class HookState:
    """Per-process state of the hooks."""

    config: Any = None
    """The trainer's config (set when ``RayPPOTrainer`` is built)."""
    trainer: Any = None
    """The trainer (for ``global_steps``)."""
    pending: dict[str, float] = field(default_factory=dict)
    """Metrics merged into the next ``Tracking.log`` call (estimator diagnostics)."""
    val_lengths: list[float] | None = None
    """Episode lengths of the evaluation in progress."""
    estimators: dict[str, Any] = field(default_factory=dict)
    """Built estimators by name."""
    recorded_estimator: bool = False
    """Whether ``run.json["estimator_instantiated"]`` was written."""
    best_pending: tuple[int, float] | None = None
    """(step, value) of a new best evaluation whose checkpoint is about to be saved."""
    defer_saves: bool = False
    """Whether checkpoint saves wait for their step's metrics row (set once ``fit`` has
    built its ``Tracking``; see :func:`_patch_validate_and_save`)."""
    save_pending: tuple[Any, int, tuple[Any, ...], dict[str, Any]] | None = None
    """(trainer, step, args, kwargs) of a save waiting for the step's ``Tracking.log``."""


STATE = HookState()


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def ccpo_lab_section(config: Any) -> dict[str, Any] | None:
    """``algorithm.ccpo_lab`` of a trainer config as a dict (None when absent)."""
    from omegaconf import OmegaConf

    if config is None:
        return None
    node = OmegaConf.select(config, "algorithm.ccpo_lab", default=None)
    if node is None:
        return None
    out = OmegaConf.to_container(node, resolve=True)
    return {str(k): v for k, v in out.items()} if isinstance(out, dict) else None


def routed(adv_estimator: Any, config: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, params) when ``adv_estimator`` goes to ccpo-lab, else None.

    Routed: the name ``algorithm.ccpo_lab.estimator`` names, and ``ccpo`` always (verl-agent
    has no estimator of that name).
    """
    name = _value(adv_estimator)
    section = ccpo_lab_section(config) or {}
    if section.get("estimator") == name:
        return name, dict(section.get("params") or {})
    if name == "ccpo":
        return name, {}
    return None


def _estimator(name: str, params: dict[str, Any]) -> Any:
    from ccpo_lab.estimators import get_estimator

    key = f"{name}:{sorted(params.items())!r}"
    if key not in STATE.estimators:
        STATE.estimators[key] = get_estimator(name, **params)
    return STATE.estimators[key]


def trainer_penalty(config: Any) -> float:
    """The invalid-action penalty verl-agent applies: ``actor.invalid_action_penalty_coef``
    when ``actor.use_invalid_action_penalty`` (verl-agent's default: on), else 0."""
    actor = config.actor_rollout_ref.actor
    if not actor.get("use_invalid_action_penalty", True):
        return 0.0
    return float(actor.get("invalid_action_penalty_coef", 0.0))


def estimator_params(params: dict[str, Any], config: Any) -> dict[str, Any]:
    """``params`` with ``invalid_penalty`` = the trainer's penalty, which both come from
    the protocol; a different explicit value is refused (one source of truth)."""
    from ccpo_lab.estimators.errors import ParamError

    pen = trainer_penalty(config)
    if "invalid_penalty" in params and float(params["invalid_penalty"]) != pen:
        raise ParamError("differs from the trainer's invalid-action penalty",
                         key="algorithm.ccpo_lab.params.invalid_penalty",
                         value=params["invalid_penalty"], valid=[pen],
                         detail="both come from the protocol's invalid_action_penalty")
    return {**params, "invalid_penalty": pen}


def ccpo_lab_advantage(data: Any, name: str, params: dict[str, Any], config: Any) -> Any:
    """Fill ``advantages`` / ``returns`` of a verl-agent batch with ccpo-lab's estimator.

    The estimator gets the raw per-turn rewards (``non_tensor_batch["rewards"]``) and the
    validity flags and applies the trainer's invalid-action penalty itself; nothing is
    subtracted before. The batch is passed as it is, in its order, with the rows
    verl-agent copied to pad it (same ``traj_uid`` and turn): a StepBatch of the unique
    rows plus ``rows`` (each data row's unique row). An arm computing the method as
    described gives each copy its row's result; an ``as-run`` arm computes on the passed
    batch itself, copies and order included, as verl-agent's estimators and the CCPO
    authors' did. The features are popped after use (not shipped to the actor).
    """
    from ccpo_lab.backends.verl.agent.advantage import (
        DataProtoKeys,
        step_batch_from_dataproto,
        token_advantages,
    )

    est = _estimator(name, estimator_params(params, config))
    nt = data.non_tensor_batch
    if STEP_KEY not in nt:
        raise KeyError(f"rollout rows lack {STEP_KEY!r}: the rollout-loop hook did not run")
    keys = [(str(t), int(s)) for t, s in zip(nt["traj_uid"], nt[STEP_KEY], strict=True)]
    codes: dict[tuple[str, int], int] = {}
    inverse = np.array([codes.setdefault(k, len(codes)) for k in keys], dtype=np.int64)
    unique_rows = _first_rows(inverse)
    sub = data.select_idxs(unique_rows) if len(unique_rows) < len(data) else data
    dp_keys = DataProtoKeys(step=STEP_KEY, reward="rewards", phi=(PHI_KEY,))
    padded = len(unique_rows) < len(data)
    out = est(step_batch_from_dataproto(sub, dp_keys, rows=inverse if padded else None))
    adv = token_advantages(out, data)
    data.batch["advantages"] = adv
    data.batch["returns"] = adv
    phi = data.batch.pop(PHI_KEY) if PHI_KEY in data.batch.keys() else None  # noqa: SIM118
    STATE.pending.update({f"adv/{k}": float(v) for k, v in out.diagnostics.items()})
    STATE.pending["adv/padding_rows"] = float(len(data) - len(unique_rows))
    STATE.pending["adv/as_run"] = float(est.config.semantics == "as-run")
    if phi is not None:  # the features the reference pass captured (CCPO_LAB_CAPTURE_PHI)
        STATE.pending.update(phi_diagnostics(phi))
    _record_estimator(est)
    return data


def phi_diagnostics(phi: Any) -> dict[str, float]:
    """What the reference pass's features were: ``adv/phi_dim`` (the model's hidden size),
    ``adv/phi_rows`` and ``adv/phi_norm_mean`` (mean L2 norm of a row's vector)."""
    x = phi.float()
    return {"adv/phi_dim": float(x.shape[-1]), "adv/phi_rows": float(x.shape[0]),
            "adv/phi_norm_mean": float(x.norm(dim=-1).mean())}


def _first_rows(inverse: np.ndarray) -> np.ndarray:
    """Row of the first occurrence of each code of ``inverse`` ``(N,)``, by code."""
    codes, first = np.unique(inverse, return_index=True)
    return first[np.argsort(codes)]


def _record_estimator(est: Any) -> None:
    run_dir = os.environ.get(ENV_RUN_DIR)
    if STATE.recorded_estimator or not run_dir:
        return
    from pathlib import Path

    from ccpo_lab.runs.layout import RunDir

    RunDir(Path(run_dir)).update_run(estimator_instantiated={"name": est.name,
                                                            "params": est.params})
    STATE.recorded_estimator = True


# ----------------------------------------------------------------------- ray_trainer
def patch_ray_trainer(mod: Any) -> None:
    """Route ``compute_advantage``; let ``RayPPOTrainer`` accept ``ccpo``; ``val/length``,
    the best evaluation's checkpoint, seeded batch padding."""
    _patch_estimator_route(mod)
    _patch_validate_and_save(mod.RayPPOTrainer)
    if hasattr(mod, "adjust_batch"):
        _patch_adjust_batch(mod)


def _patch_estimator_route(mod: Any) -> None:
    """``RayPPOTrainer.__init__`` admits ccpo-lab's estimators; ``compute_advantage``
    routes them to :func:`ccpo_lab_advantage`."""
    cls = mod.RayPPOTrainer
    known = {_value(e) for e in mod.AdvantageEstimator}
    orig_init = cls.__init__

    @functools.wraps(orig_init)
    def __init__(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        STATE.config, STATE.trainer = config, self
        name = _value(config.algorithm.adv_estimator)
        if name in known or routed(name, config) is None:
            orig_init(self, config, *args, **kwargs)
            return
        # verl-agent's __init__ only admits its own names (to decide on a critic): a
        # critic-free estimator is announced as grpo while it runs, then restored.
        config.algorithm.adv_estimator = "grpo"
        try:
            orig_init(self, config, *args, **kwargs)
        finally:
            config.algorithm.adv_estimator = name

    cls.__init__ = __init__

    orig_ca = mod.compute_advantage

    @functools.wraps(orig_ca)
    def compute_advantage(data: Any, adv_estimator: Any, *args: Any, **kwargs: Any) -> Any:
        route = routed(adv_estimator, STATE.config)
        if route is None:
            return orig_ca(data, adv_estimator, *args, **kwargs)
        return ccpo_lab_advantage(data, route[0], route[1], STATE.config)

    mod.compute_advantage = compute_advantage


def _patch_validate_and_save(cls: Any) -> None:
    """``_validate`` adds ``val/length/mean`` and tracks the best evaluation;
    ``_save_checkpoint`` keeps that evaluation's checkpoint, and waits for its step's row.

    verl-agent's ``fit`` saves step N's checkpoint before it logs step N's metrics; a job
    stopped in between resumes after N and never logs N (the row is lost for good). Once
    ``fit`` has built its ``Tracking``, a save at step N is therefore held back and done
    right after ``Tracking.log`` has appended step N's row (:func:`flush_pending_save`):
    a stop in between resumes from the previous checkpoint and logs N again. The cost:
    ``timing_s/save_checkpoint`` of such a step reads ~0 (the save runs after the row).
    """
    orig_validate = cls._validate

    @functools.wraps(orig_validate)
    def _validate(self: Any) -> Any:
        STATE.val_lengths = []
        try:
            metrics = orig_validate(self)
        finally:
            lengths, STATE.val_lengths = STATE.val_lengths, None
        if isinstance(metrics, dict) and lengths:
            metrics["val/length/mean"] = float(np.mean(lengths))
        if isinstance(metrics, dict) and os.environ.get(ENV_RUN_DIR):
            _track_best(self, metrics)
        return metrics

    cls._validate = _validate

    if hasattr(cls, "_save_checkpoint"):
        orig_save = cls._save_checkpoint

        def save_now(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig_save(self, *args, **kwargs)
            pending = STATE.best_pending
            if pending is not None and pending[0] == int(self.global_steps):
                from ccpo_lab.backends.verl.agent.weights import keep_best

                keep_best(_checkpoints(self), *pending)
                STATE.best_pending = None
            return out

        @functools.wraps(orig_save)
        def _save_checkpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
            step = int(getattr(self, "global_steps", 0) or 0)
            if STATE.defer_saves and step > 0:
                STATE.save_pending = (save_now, step, (self, *args), kwargs)
                return None
            return save_now(self, *args, **kwargs)

        cls._save_checkpoint = _save_checkpoint


def flush_pending_save(step: int) -> None:
    """Do the checkpoint save held back for ``step`` (after its row was logged)."""
    pending = STATE.save_pending
    if pending is None or pending[1] != int(step):
        return
    STATE.save_pending = None
    fn, _, args, kwargs = pending
    fn(*args, **kwargs)


def _patch_adjust_batch(mod: Any) -> None:
    """verl-agent draws the padding rows of ``adjust_batch`` with the global
    ``np.random``: draw them under a seed of (run seed, step) and leave the global state
    as it was."""
    orig_adjust = mod.adjust_batch

    @functools.wraps(orig_adjust)
    def adjust_batch(*args: Any, **kwargs: Any) -> Any:
        state = np.random.get_state()
        np.random.seed(seeds.padding_seed(_run_seed(), _global_step() or 0))
        try:
            return orig_adjust(*args, **kwargs)
        finally:
            np.random.set_state(state)

    mod.adjust_batch = adjust_batch


def _checkpoints(trainer: Any) -> Any:
    from pathlib import Path

    from omegaconf import OmegaConf

    where = OmegaConf.select(trainer.config, "trainer.default_local_dir", default=None)
    return None if where is None else Path(str(where))


def _track_best(trainer: Any, metrics: dict[str, Any]) -> None:
    """A new best held-out value: keep this step's checkpoint (saving one if none is due)."""
    from ccpo_lab.backends.verl.agent import weights as W

    value = metrics.get(W.METRIC)
    ckpt = _checkpoints(trainer)
    if value is None or ckpt is None or not hasattr(trainer, "_save_checkpoint"):
        return
    step = int(getattr(trainer, "global_steps", 0))
    if not W.is_new_best(ckpt, float(value)):
        return
    if step <= 0:
        W.write_best(ckpt, {"step": 0, "value": float(value), "metric": W.METRIC,
                            "weights": "the base model (backend.verl.model_path)"})
        return
    STATE.best_pending = (step, float(value))
    cfg = trainer.config.trainer
    save_freq = int(cfg.get("save_freq", -1) or -1)
    last = step >= int(getattr(trainer, "total_training_steps", step + 1))
    if not (save_freq > 0 and (last or step % save_freq == 0)):
        trainer._save_checkpoint()       # none due at this step: keep one now


def _run_seed() -> int:
    return int(os.environ.get(ENV_RUN_SEED, "0") or 0)


# ----------------------------------------------------------------------- rollout loop
def _global_step() -> int | None:
    trainer = STATE.trainer
    return None if trainer is None else int(getattr(trainer, "global_steps", -1))


def task_type_of(env_name: Any) -> str:
    """The ``task_type`` recorded with a rollout of verl-agent's ``env.env_name``: the
    environment's ccpo-lab name (``alfworld`` for every ALFWorld variant, as before)."""
    name = str(env_name or "").lower()
    return next((n for n in ("sokoban", "webshop") if n in name), "alfworld")


def _env_name(config: Any) -> Any:
    """``env.env_name`` of the trainer's config (None where it has none)."""
    get = getattr(getattr(config, "env", None), "get", None)
    return get("env_name") if callable(get) else None


def dump_step1(batch: Any, tokenizer: Any, group_size: int, run_dir: str, step: int = 1,
               task_type: str = "alfworld") -> str:
    """Write the rollouts of a training batch at ``step`` (rows in gather order)."""
    nt = batch.non_tensor_batch
    prompts = batch.batch["prompts"]
    plen = prompts.shape[-1]
    mask = batch.batch["attention_mask"]
    responses = batch.batch["responses"]
    prompt_ids, actions = [], []
    for i in range(len(batch)):
        pm = mask[i, :plen].bool()
        prompt_ids.append(prompts[i][pm].tolist())
        n_resp = int(mask[i, plen:].sum())
        actions.append(tokenizer.decode(responses[i][:n_resp], skip_special_tokens=True))
    valid = nt.get("is_action_valid", np.ones(len(batch), dtype=bool))
    episodes = step1_episodes(traj_uid=list(nt["traj_uid"]), turn=list(nt[STEP_KEY]),
                              anchor_obs=list(nt["anchor_obs"]), actions=actions,
                              prompt_ids=prompt_ids, valid=list(valid),
                              rewards=list(nt["rewards"]), group_size=group_size,
                              task_type=task_type)
    return record_step1(run_dir, episodes, step)


def patch_rollout_loop(mod: Any) -> None:
    """Turn index on every row; step-1 rollouts; evaluation episode lengths."""
    cls = mod.TrajectoryCollector
    orig = cls.multi_turn_loop

    @functools.wraps(orig)
    def multi_turn_loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        is_train = bool(kwargs.get("is_train", args[3] if len(args) > 3 else True))
        args, kwargs = _seeded_call(args, kwargs, is_train)
        out = orig(self, *args, **kwargs)
        nt = out.non_tensor_batch
        nt[STEP_KEY] = turn_indices(list(nt["traj_uid"]))
        run_dir = os.environ.get(ENV_RUN_DIR)
        step = _global_step()
        every = os.environ.get(ENV_DUMP_ROLLOUTS, "") == "all"
        if is_train and run_dir and step is not None and (step == 1 or every and step > 0):
            dump_step1(out, self.tokenizer, int(self.config.env.rollout.n), run_dir, step,
                       task_type_of(_env_name(self.config)))
        if not is_train and STATE.val_lengths is not None and "episode_lengths" in nt:
            _, first = np.unique(np.asarray(nt["traj_uid"]), return_index=True)
            STATE.val_lengths.extend(float(x) for x in np.asarray(nt["episode_lengths"])[first])
        return out

    cls.multi_turn_loop = multi_turn_loop


_LOOP_ARGS = ("gen_batch", "actor_rollout_wg", "envs", "is_train")


def _seeded_call(args: tuple[Any, ...], kwargs: dict[str, Any], is_train: bool
                 ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``multi_turn_loop``'s arguments with the rollout seeded by (run seed, step).

    The ALFWorld workers are re-seeded for this step (a step's games depend only on (run
    seed, step)) and the actor worker group is wrapped so that every generation request
    carries its own seed (:class:`SeedingWorkerGroup`).
    """
    bound = dict(zip(_LOOP_ARGS, args, strict=False))
    bound.update(kwargs)
    step = _global_step()
    if step is None:
        return args, kwargs
    split = "train" if is_train else "val"
    reseed_envs(bound.get("envs"), split, step)
    wg = bound.get("actor_rollout_wg")
    if wg is not None and not isinstance(wg, SeedingWorkerGroup):
        bound["actor_rollout_wg"] = SeedingWorkerGroup(wg, _run_seed(), split, step)
    n = min(len(args), len(_LOOP_ARGS))
    return (tuple(bound.pop(k) for k in _LOOP_ARGS[:n]),
            {k: v for k, v in bound.items()})


class SeedingWorkerGroup:
    """The actor worker group, with a seed per request on every ``generate_sequences``.

    Call ``c`` of a rollout (its turn, counting retries) gives row ``r`` the seed
    :func:`~ccpo_lab.backends.verl.agent.seeds.request_seeds` ``[r]`` in
    ``non_tensor_batch[SEED_KEY]``; the patched vLLM rollout hands it to vLLM as that
    request's ``SamplingParams.seed``. Every other attribute is the wrapped group's.
    """

    def __init__(self, wg: Any, run_seed: int, split: str, step: int) -> None:
        self._wg = wg
        self._key = (run_seed, split, step)
        self._calls = 0

    def generate_sequences(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        """Add the request seeds, then generate."""
        run_seed, split, step = self._key
        data.non_tensor_batch[seeds.SEED_KEY] = np.array(
            seeds.request_seeds(run_seed, split, step, self._calls, len(data)), dtype=object)
        self._calls += 1
        return self._wg.generate_sequences(data, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wg, name)


def _workers(envs: Any) -> tuple[list[Any], int] | None:
    """(worker handles, group size) of verl-agent's ALFWorld environments, else None."""
    inner = getattr(envs, "envs", None)
    workers = getattr(inner, "workers", None)
    if not workers or inner is None or not hasattr(inner, "group_n"):
        return None
    return list(workers), int(inner.group_n)


def reseed_envs(envs: Any, split: str, step: int) -> bool:
    """Re-seed this step's rollout: every ALFWorld worker (a key per group or worker), or
    the driver-side task draw of Sokoban and WebShop (``ccpo_lab_seed``, one key per
    step: :func:`patch_sokoban_envs`, :func:`patch_webshop_envs`); False when neither."""
    from omegaconf import OmegaConf

    env_seed = int(OmegaConf.select(STATE.config, "env.seed", default=0) or 0) \
        if STATE.config is not None else 0
    inner = getattr(envs, "envs", None)
    if inner is not None and hasattr(inner, "ccpo_lab_seed"):
        inner.ccpo_lab_seed(seeds.task_seed(env_seed, split, step, 0))
        return True
    found = _workers(envs)
    if found is None:
        return False
    workers, group_n = found
    refs = []
    for i, w in enumerate(workers):
        j = i // group_n if split == "train" else i
        refs.append(w.ccpo_lab_seed.remote(seeds.task_seed(env_seed, split, step, j)))
    _ray_get(refs)
    return True


def _ray_get(refs: list[Any]) -> list[Any]:
    if refs and type(refs[0]).__name__ == "ObjectRef":
        import ray

        return list(ray.get(refs))
    return refs


def patch_alfworld_envs(mod: Any) -> None:
    """``AlfworldWorker.ccpo_lab_seed(key)``: re-seed the worker's game stream."""
    cls = mod.AlfworldWorker

    def ccpo_lab_seed(self: Any, key: Any) -> list[Any]:
        return self.env.seed(key)

    cls.ccpo_lab_seed = ccpo_lab_seed


def patch_sokoban_envs(mod: Any) -> None:
    """``SokobanMultiProcessEnv.ccpo_lab_seed(key)``: the next ``reset`` draws its rooms'
    seeds (verl-agent draws them from numpy's global generator of the driver) under
    ``key``; the global generator is left as it was."""
    cls = mod.SokobanMultiProcessEnv
    orig_reset = cls.reset

    def ccpo_lab_seed(self: Any, key: Any) -> None:
        self._ccpo_lab_key = list(key)

    @functools.wraps(orig_reset)
    def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = getattr(self, "_ccpo_lab_key", None)
        if key is None:
            return orig_reset(self, *args, **kwargs)
        self._ccpo_lab_key = None
        saved = np.random.get_state()
        np.random.seed(np.asarray(key, dtype=np.uint32))
        try:
            return orig_reset(self, *args, **kwargs)
        finally:
            np.random.set_state(saved)

    cls.ccpo_lab_seed = ccpo_lab_seed
    cls.reset = reset


def patch_webshop_envs(mod: Any) -> None:
    """``WebshopMultiProcessEnv.ccpo_lab_seed(key)``: the next ``reset`` draws its goals
    from a generator seeded with ``key`` (verl-agent's own ``_rng`` otherwise)."""
    cls = mod.WebshopMultiProcessEnv

    def ccpo_lab_seed(self: Any, key: Any) -> None:
        self._rng = np.random.RandomState(np.asarray(key, dtype=np.uint32))

    cls.ccpo_lab_seed = ccpo_lab_seed


# ----------------------------------------------------------------------- vLLM rollout
def patch_vllm_rollout(mod: Any) -> None:
    """vLLM's engine seed = the run's; each request its own ``SamplingParams.seed``.

    ``LLM(seed=...)`` gets :data:`~ccpo_lab.backends.verl.agent.env.ENV_VLLM_SEED`;
    ``vLLMRollout.generate_sequences`` pops the per-row seeds the driver added
    (:class:`SeedingWorkerGroup`) and passes one ``SamplingParams`` per request.
    """
    orig_llm = mod.LLM

    def LLM(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - vLLM's name
        value = os.environ.get(ENV_VLLM_SEED)
        if value is not None:
            kwargs["seed"] = int(value)
        return orig_llm(*args, **kwargs)

    mod.LLM = LLM
    cls = mod.vLLMRollout
    orig = cls.generate_sequences

    @functools.wraps(orig)
    def generate_sequences(self: Any, prompts: Any, *args: Any, **kwargs: Any) -> Any:
        per_row = prompts.non_tensor_batch.pop(seeds.SEED_KEY, None)
        if per_row is None:
            return orig(self, prompts, *args, **kwargs)
        engine = self.inference_engine
        orig_generate = engine.generate

        def generate(*a: Any, sampling_params: Any = None, **k: Any) -> Any:
            if sampling_params is not None and not isinstance(sampling_params, list):
                per = []
                for s in per_row:
                    sp = sampling_params.clone()
                    sp.seed = int(s)
                    per.append(sp)
                sampling_params = per
            return orig_generate(*a, sampling_params=sampling_params, **k)

        engine.generate = generate
        try:
            return orig(self, prompts, *args, **kwargs)
        finally:
            del engine.generate

    cls.generate_sequences = generate_sequences


# ----------------------------------------------------------------------- HF rollout
def patch_hf_rollout(mod: Any) -> None:
    """``HFRollout``: each request sampled under its own seed, generated tokens at their
    true positions.

    - verl-agent's Hugging Face rollout samples a whole batch from torch's global
      generator, so neither the arms of a seed (same weights at step 1) nor a resumed run
      would sample the same answers. With the seeds the driver adds
      (:class:`SeedingWorkerGroup`), each row is generated alone under
      ``torch.manual_seed(its seed)`` (the global generator state saved and restored): an
      answer depends only on its prompt, the weights and its seed, and the rows of a group
      (one prompt, distinct seeds) differ.
    - ``_generate_minibatch`` hands the prompt's ``position_ids`` to ``generate``, which
      (transformers 4.57) does not extend them while decoding: every generated token gets
      the last prompt token's position, and answers degrade after a few tokens (while the
      log-prob passes score them at the right positions). The patch leaves them out, so
      ``generate`` derives the positions from the attention mask, as verl does
      (``compute_position_id_with_mask``).
    """
    cls = mod.HFRollout
    orig = cls.generate_sequences
    orig_mini = cls._generate_minibatch

    @functools.wraps(orig_mini)
    def _generate_minibatch(self: Any, prompts: Any, *args: Any, **kwargs: Any) -> Any:
        module = self.module
        inner = module.generate

        def generate(*a: Any, position_ids: Any = None, **k: Any) -> Any:
            return inner(*a, **k)

        module.generate = generate
        try:
            return orig_mini(self, prompts, *args, **kwargs)
        finally:
            del module.generate

    @functools.wraps(orig)
    def generate_sequences(self: Any, prompts: Any, *args: Any, **kwargs: Any) -> Any:
        per_row = prompts.non_tensor_batch.pop(seeds.SEED_KEY, None)
        if per_row is None:
            return orig(self, prompts, *args, **kwargs)
        import torch

        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        outs = []
        for i, s in enumerate(per_row):
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(int(s))
                outs.append(self._generate_minibatch(prompts.slice(i, i + 1)))
        return type(outs[0]).concat(outs)

    cls._generate_minibatch = _generate_minibatch
    cls.generate_sequences = generate_sequences


# ----------------------------------------------------------------------- tracking
def patch_tracking(mod: Any) -> None:
    """``file`` backend = :class:`RunFileLogger`; pending diagnostics join each log; a
    checkpoint save held back for a step runs right after that step's row is logged; the
    ``wandb`` backend's config gets the run's ccpo-lab configuration (``ccpo_lab``)."""
    cls = mod.Tracking
    orig_init = cls.__init__
    orig_log = cls.log

    @functools.wraps(orig_init)
    def __init__(self: Any, project_name: Any, experiment_name: Any,
                 default_backend: Any = "console", *args: Any, **kwargs: Any) -> None:
        backends = [default_backend] if isinstance(default_backend, str) else \
            list(default_backend)
        want_file = "file" in backends
        rest = [b for b in backends if b != "file"] or ["console"]
        orig_init(self, project_name, experiment_name, rest, *args, **kwargs)
        if want_file:
            self.logger["file"] = RunFileLogger()
            STATE.defer_saves = True
        if "wandb" in self.logger:  # ccpo-lab's run configuration beside verl's
            self.logger["wandb"].config.update(verl_run_config(), allow_val_change=True)

    @functools.wraps(orig_log)
    def log(self: Any, data: Any, step: Any, *args: Any, **kwargs: Any) -> Any:
        if STATE.pending:
            data = {**data, **STATE.pending}
            STATE.pending = {}
        out = orig_log(self, data, step, *args, **kwargs)
        flush_pending_save(int(step))
        return out

    cls.__init__ = __init__
    cls.log = log


# ----------------------------------------------------------------------- features
def _capture_enabled() -> bool:
    return os.environ.get(ENV_CAPTURE_PHI, "") == "1"


def patch_dp_actor(mod: Any) -> None:
    """During a reference pass, keep the final norm's output of every micro-batch."""
    from ccpo_lab.backends.verl.agent.phi import last_prompt_hidden

    cls = mod.DataParallelPPOActor
    orig = cls._forward_micro_batch

    @functools.wraps(orig)
    def _forward_micro_batch(self: Any, micro_batch: Any, *args: Any, **kwargs: Any) -> Any:
        if not CAPTURE.active:
            return orig(self, micro_batch, *args, **kwargs)
        if getattr(self, "use_ulysses_sp", False):
            raise RuntimeError("feature capture does not support Ulysses sequence parallelism")
        result, hidden = forward_capturing(
            self.actor_module, lambda: orig(self, micro_batch, *args, **kwargs))
        feats = last_prompt_hidden(hidden, micro_batch["attention_mask"],
                                   micro_batch["responses"].size(-1),
                                   packed=bool(getattr(self, "use_remove_padding", False)))
        CAPTURE.add(micro_batch["input_ids"], micro_batch["attention_mask"], feats)
        return result

    cls._forward_micro_batch = _forward_micro_batch


def patch_fsdp_workers(mod: Any) -> None:
    """``compute_ref_log_prob`` also returns ``ccpo_lab_phi`` ``(bs, hidden)``."""
    cls = mod.ActorRolloutRefWorker
    orig = cls.compute_ref_log_prob

    @functools.wraps(orig)
    def compute_ref_log_prob(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        if not _capture_enabled():
            return orig(self, data, *args, **kwargs)
        ids, mask = data.batch["input_ids"], data.batch["attention_mask"]
        CAPTURE.start()
        try:
            output = orig(self, data, *args, **kwargs)
            feats = CAPTURE.collect(ids, mask)
        finally:
            CAPTURE.stop()
        output.batch[PHI_KEY] = feats
        return output

    cls.compute_ref_log_prob = compute_ref_log_prob


# ----------------------------------------------------------------------- core_algos
def patch_core_algos(mod: Any) -> None:
    """Register ccpo-lab's estimators where verl has a registry (upstream verl).

    verl-agent's ``core_algos`` predates ``register_adv_est``; it gets a dict-backed one so
    the adapter module imports, while verl-agent's dispatch goes through the patched
    ``compute_advantage``.
    """
    if not hasattr(mod, "register_adv_est"):
        registry: dict[str, Any] = getattr(mod, "ADV_ESTIMATOR_REGISTRY", {})
        mod.ADV_ESTIMATOR_REGISTRY = registry

        def register_adv_est(name: Any) -> Any:
            def deco(fn: Any) -> Any:
                registry[_value(name)] = fn
                return fn
            return deco

        mod.register_adv_est = register_adv_est
    from ccpo_lab.backends.verl.agent import advantage as adapter

    adapter.register_verl_estimators()


def verl_run_config() -> dict[str, Any]:
    """For the hooks: ``{"ccpo_lab": <config.yaml>}`` of the run the process trains
    (``CCPO_LAB_RUN_DIR``), added to verl's W&B config ({} outside a run)."""
    import os
    import pathlib

    from ccpo_lab.backends.verl.agent.env import ENV_RUN_DIR
    from ccpo_lab.runs.layout import RunDir
    from ccpo_lab.runs.wandb_run import run_config

    where = os.environ.get(ENV_RUN_DIR)
    if not where:
        return {}
    return {"ccpo_lab": run_config(RunDir(pathlib.Path(where)))}
