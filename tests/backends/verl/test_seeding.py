"""Seeding of verl runs: groups that do not collapse, independent seeds, requeue-proof data.

vLLM and verl-agent's Ray environment actors cannot exist here, so ``vLLMRollout`` and the
ALFWorld workers are stood in for by small classes with the pinned commit's logic: the
rollout copies every config key ``SamplingParams`` has into the sampling parameters (as
``vllm_rollout_spmd.py`` does), the workers shuffle their games with textworld's own
``shuffled_cycle`` under ``np.random.RandomState(seed)`` (as ``TextworldBatchGymEnv``
does). The contract test (``test_contract.py``) runs the real ones.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto

from ccpo_lab.backends.verl.agent import patches as P
from ccpo_lab.backends.verl.command import build_command
from ccpo_lab.config.schema import RunConfig
from tests.backends.verl.conftest import run_dir, sweep_runs

GROUP = 8


def _overrides(run: RunConfig, tmp: Path) -> dict[str, str]:
    cmd = build_command(run, run_dir(tmp, run).path)
    return {o.partition("=")[0].lstrip("+"): o.partition("=")[2] for o in cmd.overrides}


def _value(text: str) -> Any:
    return OmegaConf.create({"v": text.strip("'")}).v if text.startswith("'") else \
        OmegaConf.create(f"v: {text}").v


# ------------------------------------------------------------- stand-in vLLM rollout
@dataclass
class SamplingParams:
    """The fields of vllm.SamplingParams the pinned rollout touches."""

    n: int = 1
    logprobs: int | None = None
    max_tokens: int = 16
    detokenize: bool = True
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None

    def clone(self) -> SamplingParams:
        return SamplingParams(**{f.name: getattr(self, f.name) for f in fields(self)})


class LLM:
    """Samples 6 tokens per prompt: a request's seed, else the engine's generator."""

    def __init__(self, seed: int = 0, **kw: Any) -> None:
        self.engine_seed = seed
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: list[dict[str, Any]], sampling_params: Any,
                 **kw: Any) -> list[list[int]]:
        per = sampling_params if isinstance(sampling_params, list) else \
            [sampling_params] * len(prompts)
        assert len(per) == len(prompts)
        out = []
        for p, sp in zip(prompts, per, strict=True):
            rng = self.rng if sp.seed is None else np.random.default_rng(sp.seed)
            out.append([int(x) for x in rng.integers(0, 50, 6)] + p["prompt_token_ids"][:1])
        return out


def _vllm_module() -> types.ModuleType:
    mod = types.ModuleType("fake_vllm_rollout_spmd")

    class vLLMRollout:  # noqa: N801 - verl-agent's name
        def __init__(self, config: Any) -> None:
            self.config = config
            self.inference_engine = mod.LLM(seed=config.get("seed", 0))
            kwargs = {"n": 1, "logprobs": 0, "max_tokens": 6, "detokenize": False}
            for k in config:
                if hasattr(SamplingParams(), str(k)):
                    kwargs[k] = config.get(k)
            self.sampling_params = SamplingParams(**kwargs)

        def generate_sequences(self, prompts: DataProto, **kwargs: Any) -> DataProto:
            ids = prompts.batch["input_ids"]
            inputs = [{"prompt_token_ids": ids[i].tolist()} for i in range(len(ids))]
            outputs = self.inference_engine.generate(prompts=inputs,
                                                     sampling_params=self.sampling_params,
                                                     lora_request=None, use_tqdm=False)
            return DataProto.from_dict(tensors={"responses": torch.tensor(outputs)})

    mod.LLM = LLM
    mod.SamplingParams = SamplingParams
    mod.vLLMRollout = vLLMRollout
    return mod


class _WorkerGroup:
    """The actor worker group: pads nothing, chunks over two "DP ranks" like verl does."""

    world_size = 2

    def __init__(self, rollouts: list[Any]) -> None:
        self.rollouts = rollouts

    def generate_sequences(self, data: DataProto) -> DataProto:
        parts = data.chunk(self.world_size)
        return DataProto.concat([r.generate_sequences(p)
                                 for r, p in zip(self.rollouts, parts, strict=True)])


def _collector_module(calls: int = 2) -> types.ModuleType:
    mod = types.ModuleType("fake_rollout_loop")

    class TrajectoryCollector:
        """``calls`` turns of one group of identical prompts; returns the responses."""

        def __init__(self) -> None:
            self.config = OmegaConf.create({"env": {"rollout": {"n": GROUP}}})

        def multi_turn_loop(self, gen_batch: Any, actor_rollout_wg: Any, envs: Any,
                            is_train: bool = True) -> DataProto:
            prompt = torch.arange(5).repeat(GROUP, 1)
            outs = [actor_rollout_wg.generate_sequences(
                DataProto.from_dict(tensors={"input_ids": prompt})) for _ in range(calls)]
            out = DataProto.concat(outs)
            n = len(out)
            out.non_tensor_batch["traj_uid"] = np.array([f"t{i % GROUP}" for i in range(n)],
                                                        dtype=object)
            return out

    mod.TrajectoryCollector = TrajectoryCollector
    return mod


def _rollout(run: RunConfig, tmp: Path, monkeypatch: pytest.MonkeyPatch,
             step: int = 1) -> tuple[list[list[int]], list[Any]]:
    """One training rollout of a group through the hooks, as run ``run`` would do it."""
    ov = _overrides(run, tmp)
    cfg = OmegaConf.create({k.split(".")[-1]: _value(v) for k, v in ov.items()
                            if k.startswith("actor_rollout_ref.rollout.")
                            and k.count(".") == 2})
    cmd = build_command(run, run_dir(tmp, run).path)
    for k, v in cmd.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CCPO_LAB_RUN_DIR")      # no step-1 dump here
    monkeypatch.setattr(P, "STATE", P.HookState())
    vm = _vllm_module()
    if hasattr(P, "patch_vllm_rollout"):
        P.patch_vllm_rollout(vm)
    loop = _collector_module()
    P.patch_rollout_loop(loop)
    P.STATE.trainer = types.SimpleNamespace(global_steps=step)
    rollouts = [vm.vLLMRollout(cfg) for _ in range(2)]
    out = loop.TrajectoryCollector().multi_turn_loop(None, _WorkerGroup(rollouts), None,
                                                     is_train=True)
    return out.batch["responses"].tolist(), rollouts


def test_a_group_does_not_collapse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 1: ``rollout.seed`` became every request's seed; a group sampled one answer."""
    run = sweep_runs("alfworld-qwen7b-slurm")[1]
    ov = _overrides(run, tmp_path)
    assert "actor_rollout_ref.rollout.seed" not in ov
    responses, rollouts = _rollout(run, tmp_path, monkeypatch)
    first_turn = responses[:GROUP]
    assert len({tuple(r) for r in first_turn}) == GROUP        # 8 distinct rollouts
    # the engine seed follows the run seed, through the hook
    assert {r.inference_engine.engine_seed for r in rollouts} == {run.seed}
    det = build_command(run, run_dir(tmp_path, run).path).determinism
    assert det["seeding"]["vllm_engine_seed"]["value"] == run.seed
    assert "rollout.seed" in det["seeding"]["not_set"]


def test_sampling_depends_only_on_run_seed_and_step(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 4 (sampling): fresh engines (a requeue) sample what the first ones did."""
    runs = sweep_runs("alfworld-qwen7b-slurm")
    grpo0 = next(r for r in runs if r.arm == "grpo" and r.seed == 0)
    ccpo0 = next(r for r in runs if r.arm == "ccpo-return-hard" and r.seed == 0)
    grpo1 = next(r for r in runs if r.arm == "grpo" and r.seed == 1)
    a, _ = _rollout(grpo0, tmp_path, monkeypatch, step=7)
    b, _ = _rollout(ccpo0, tmp_path, monkeypatch, step=7)   # another arm, fresh engines
    assert a == b
    assert _rollout(grpo0, tmp_path, monkeypatch, step=8)[0] != a
    assert _rollout(grpo1, tmp_path, monkeypatch, step=7)[0] != a


# ------------------------------------------------------------- env streams (defect 3)
def _verl_agent_streams(env_seed: int, train_batch: int, group_n: int,
                        val_batch: int) -> set[int]:
    """The seeds verl-agent's make_envs gives its ALFWorld workers (pinned commit)."""
    train = {env_seed + i // group_n for i in range(train_batch * group_n)}
    val = {env_seed + 1000 + i for i in range(val_batch)}
    return train | val


def test_two_seeds_of_a_sweep_share_no_stream(tmp_path: Path) -> None:
    runs = [r for r in sweep_runs("alfworld-qwen7b-slurm", ["seeds=[0,1,2,3,4]"])
            if r.arm == "grpo"]
    streams = {}
    for run in runs:
        ov = _overrides(run, tmp_path)
        streams[run.seed] = _verl_agent_streams(
            int(ov["env.seed"]), int(ov["data.train_batch_size"]), int(ov["env.rollout.n"]),
            int(ov["data.val_batch_size"]))
    for a in streams:
        for b in streams:
            if a < b:
                assert not streams[a] & streams[b], (a, b)
    for run in runs:                                        # the mapping is in run.json
        det = build_command(run, run_dir(tmp_path, run).path).determinism["seeding"]
        assert det["env_seed"]["value"] == int(_overrides(run, tmp_path)["env.seed"])


# ------------------------------------------------------------- tasks per step (defect 4)
class _Handle:
    """A Ray actor handle's calling convention over a local object."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._obj, name)
        return types.SimpleNamespace(remote=lambda *a, **k: method(*a, **k))


def _envs_module(n_games: int = 40) -> types.ModuleType:
    from textworld.gym.envs.utils import shuffled_cycle

    mod = types.ModuleType("fake_alfworld_envs")

    class GameEnv:
        """textworld's batch gym env: seed() shuffles the games, reset() takes the next."""

        def __init__(self) -> None:
            self.games = [f"game-{i:03d}" for i in range(n_games)]
            self.seed(0)

        def seed(self, seed: Any) -> list[Any]:
            rng = np.random.RandomState(seed)
            games = list(self.games)
            rng.shuffle(games)
            self._it = shuffled_cycle(games, rng=rng)
            return [seed]

        def reset(self) -> tuple[list[str], dict[str, list[Any]]]:
            return [next(self._it)], {"admissible_commands": [["look"]]}

    class AlfworldWorker:
        def __init__(self, config: Any, seed: int, base_env: Any) -> None:
            self.env = GameEnv()
            self.env.seed(seed)

        def reset(self) -> tuple[Any, Any]:
            return self.env.reset()

    class AlfworldEnvs:
        def __init__(self, seed: int, env_num: int, group_n: int) -> None:
            self.num_processes = env_num * group_n
            self.group_n = group_n
            self.workers = [_Handle(mod.AlfworldWorker(None, seed + i // group_n, None))
                            for i in range(self.num_processes)]

        def reset(self) -> list[str]:
            return [w.reset.remote()[0][0] for w in self.workers]

    mod.AlfworldWorker = AlfworldWorker
    mod.AlfworldEnvs = AlfworldEnvs
    return mod


class _Manager:
    """verl-agent's AlfWorldEnvironmentManager: ``envs`` is the AlfworldEnvs."""

    def __init__(self, envs: Any) -> None:
        self.envs = envs


def _tasks_collector() -> types.ModuleType:
    mod = types.ModuleType("fake_rollout_loop")

    class TrajectoryCollector:
        def __init__(self) -> None:
            self.config = OmegaConf.create({"env": {"rollout": {"n": 2}}})

        def multi_turn_loop(self, gen_batch: Any, actor_rollout_wg: Any, envs: Any,
                            is_train: bool = True) -> DataProto:
            games = envs.envs.reset()
            out = DataProto.from_dict(tensors={"x": torch.zeros(len(games), 1)})
            out.non_tensor_batch["traj_uid"] = np.array([f"t{i}" for i in range(len(games))],
                                                        dtype=object)
            out.non_tensor_batch["game"] = np.array(games, dtype=object)
            return out

    mod.TrajectoryCollector = TrajectoryCollector
    return mod


def _games(run: RunConfig, tmp: Path, monkeypatch: pytest.MonkeyPatch, steps: list[int],
           mods: tuple[Any, Any] | None = None) -> list[list[str]]:
    """Games of each training step of ``steps``, on environments made once (verl-agent's
    construction seeds from the run's ``env.seed``)."""
    cmd = build_command(run, run_dir(tmp, run).path)
    for k, v in cmd.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CCPO_LAB_RUN_DIR")      # no step-1 dump here
    ov = _overrides(run, tmp)
    monkeypatch.setattr(P, "STATE", P.HookState())
    envs_mod, loop = mods or (_envs_module(), _tasks_collector())
    if hasattr(P, "patch_alfworld_envs"):
        P.patch_alfworld_envs(envs_mod)
    P.patch_rollout_loop(loop)
    P.STATE.config = OmegaConf.create({"env": {"seed": int(ov["env.seed"])}})
    manager = _Manager(envs_mod.AlfworldEnvs(int(ov["env.seed"]), 3, 2))
    collector = loop.TrajectoryCollector()
    out = []
    for step in steps:
        P.STATE.trainer = types.SimpleNamespace(global_steps=step)
        batch = collector.multi_turn_loop(None, None, manager, is_train=True)
        out.append(list(batch.non_tensor_batch["game"]))
    return out


def test_a_requeued_run_sees_the_games_of_an_uninterrupted_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = sweep_runs("alfworld-qwen7b-slurm")
    grpo0 = next(r for r in runs if r.arm == "grpo" and r.seed == 0)
    uninterrupted = _games(grpo0, tmp_path, monkeypatch, [1, 2, 3, 4])
    requeued = _games(grpo0, tmp_path, monkeypatch, [3, 4])   # workers re-created at step 3
    assert requeued == uninterrupted[2:]
    for games in uninterrupted:                                 # a group shares its game
        assert games[0::2] == games[1::2]


def test_every_arm_of_a_seed_sees_the_same_games_at_every_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when the arms are requeued at different steps (environments re-created)."""
    arms = [r for r in sweep_runs("alfworld-qwen7b-slurm") if r.seed == 1]
    per_arm = []
    for k, run in enumerate(arms):          # arm k is requeued before step k + 1
        cut = min(k + 1, 4)
        per_arm.append(_games(run, tmp_path, monkeypatch, list(range(1, cut)))
                       + _games(run, tmp_path, monkeypatch, list(range(cut, 5))))
    assert all(g == per_arm[0] for g in per_arm)
    other = next(r for r in sweep_runs("alfworld-qwen7b-slurm") if r.seed == 2)
    assert _games(other, tmp_path, monkeypatch, [1, 2, 3, 4]) != per_arm[0]


def test_batch_padding_depends_only_on_run_seed_and_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """verl-agent's ``adjust_batch`` draws padding rows with the global ``np.random``."""
    monkeypatch.setenv("CCPO_LAB_SEED", "3")
    monkeypatch.setattr(P, "STATE", P.HookState())
    rt = types.ModuleType("fake_ray_trainer")

    def adjust_batch(config: Any, data: Any, mode: str = "copy") -> Any:
        return np.random.choice(50, 7, replace=False).tolist()

    class RayPPOTrainer:
        def __init__(self, config: Any) -> None:
            self.global_steps = 5

        def _validate(self) -> dict[str, float]:
            return {}

    rt.adjust_batch = adjust_batch
    rt.RayPPOTrainer = RayPPOTrainer
    rt.compute_advantage = lambda data, adv_estimator, **kw: data
    rt.AdvantageEstimator = []
    P.patch_ray_trainer(rt)
    P.STATE.trainer = rt.RayPPOTrainer(OmegaConf.create({"algorithm": {"adv_estimator": "x"}}))
    np.random.seed(1)
    first = rt.adjust_batch(None, None)
    np.random.seed(2)
    assert rt.adjust_batch(None, None) == first          # not the global state's draw
    P.STATE.trainer.global_steps = 6
    assert rt.adjust_batch(None, None) != first
