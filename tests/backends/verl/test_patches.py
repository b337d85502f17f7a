"""The hook patches on verl-agent's batches and classes.

verl-agent itself cannot be installed here, so its classes are stood in for by small
classes with the signatures of the pinned commit (``RayPPOTrainer``, ``TrajectoryCollector``,
``ActorRolloutRefWorker``, ``DataParallelPPOActor``); the batches are real verl 0.9.1
``DataProto`` objects laid out as verl-agent lays them out.
"""

from __future__ import annotations

import json
import types
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto

from ccpo_lab.backends.verl.agent import patches as P
from ccpo_lab.backends.verl.agent.phi import PHI_KEY
from ccpo_lab.estimators import StepBatch, get_estimator
from ccpo_lab.runs.rollouts import hash_tokens, read_rollouts

# Two tasks x two rollouts; rows in verl-agent's gather order (trajectory by trajectory).
# (task, traj, anchor_obs, env reward, valid)
ROWS = [
    ("A", "a0", "o0", 0.0, True), ("A", "a0", "o1", 10.0, True),
    ("A", "a1", "o0", 0.0, False), ("A", "a1", "o2", 0.0, True), ("A", "a1", "o1", 0.0, True),
    ("B", "b0", "p0", 10.0, True),
    ("B", "b1", "p0", 0.0, True), ("B", "b1", "p1", 0.0, True),
]
TURNS = [0, 1, 0, 1, 2, 0, 0, 1]
L, PLEN, D = 4, 5, 6


def _config(name: str, params: dict[str, Any] | None = None) -> Any:
    return OmegaConf.create({
        "algorithm": {"adv_estimator": name,
                      "ccpo_lab": {"estimator": name, "params": params or {}}},
        "actor_rollout_ref": {"actor": {"use_invalid_action_penalty": True,
                                        "invalid_action_penalty_coef": 0.1}},
        "env": {"rollout": {"n": 2}},
    })


def _batch(rows: list[int], *, with_step: bool = True, seed: int = 0) -> DataProto:
    g = torch.Generator().manual_seed(seed)
    n = len(rows)
    resp_len = torch.tensor([1 + (i % L) for i in rows])
    rmask = (torch.arange(L)[None, :] < resp_len[:, None]).long()
    pmask = torch.ones(n, PLEN, dtype=torch.long)
    pmask[:, :2] = torch.tensor([[0, 0] if i % 2 else [0, 1] for i in rows])
    prompts = torch.stack([torch.arange(PLEN) + 10 * i for i in rows]) * pmask
    responses = torch.stack([torch.arange(L) + 100 * i for i in rows]) * rmask
    phi_all = torch.randn(len(ROWS), D, generator=g)
    nt = {
        "uid": np.array([ROWS[i][0] for i in rows], dtype=object),
        "traj_uid": np.array([ROWS[i][1] for i in rows], dtype=object),
        "anchor_obs": np.array([ROWS[i][2] for i in rows], dtype=object),
        "rewards": np.array([ROWS[i][3] for i in rows], dtype=object),
        "is_action_valid": np.array([ROWS[i][4] for i in rows], dtype=bool),
        "episode_lengths": np.array([sum(r[1] == ROWS[i][1] for r in ROWS) for i in rows],
                                    dtype=np.float32),
    }
    if with_step:
        nt[P.STEP_KEY] = np.array([TURNS[i] for i in rows], dtype=np.int64)
    tensors = {
        "prompts": prompts, "responses": responses,
        "attention_mask": torch.cat([pmask, rmask], dim=1),
        "response_mask": rmask,
        "token_level_rewards": torch.zeros(n, L),
        PHI_KEY: phi_all[rows],
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=nt)


def _expected(name: str, params: dict[str, Any]) -> dict[tuple[str, int], float]:
    est = get_estimator(name, **params)
    g = torch.Generator().manual_seed(0)
    phi = torch.randn(len(ROWS), D, generator=g)
    sb = StepBatch(task_uid=[r[0] for r in ROWS], traj_uid=[r[1] for r in ROWS], step=TURNS,
                   anchor_obs=[r[2] for r in ROWS],
                   reward=[r[3] for r in ROWS],  # raw: the estimator applies the penalty
                   valid=[r[4] for r in ROWS], phi=phi if name == "ccpo" else None)
    adv = est(sb).advantages
    return {(r[1], t): float(a) for r, t, a in zip(ROWS, TURNS, adv, strict=True)}


@pytest.mark.parametrize("name,params", [
    ("grpo", {}), ("gigpo", {}),
    ("ccpo", {"gate": "hard", "target": "return", "backoff_task": True, "jweight_c": 1.0}),
])
def test_dataproto_path_equals_the_pure_estimator(name: str, params: dict[str, Any],
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCPO_LAB_RUN_DIR", str(tmp_path))
    (tmp_path / "run.json").write_text("{}")
    monkeypatch.setattr(P, "STATE", P.HookState())
    # balanced order plus two padding copies (rows 1 and 4), as adjust_batch makes them
    order = [5, 2, 7, 0, 3, 6, 1, 4, 1, 4]
    data = _batch(order)
    data_phi = data.batch[PHI_KEY].clone()
    out = P.ccpo_lab_advantage(data, name, params, _config(name, params))
    want = _expected(name, params)
    mask = data.batch["response_mask"]
    for j, i in enumerate(order):
        key = (ROWS[i][1], TURNS[i])
        assert torch.allclose(out.batch["advantages"][j], want[key] * mask[j].float(),
                              atol=1e-5), (j, key)
    assert torch.equal(out.batch["returns"], out.batch["advantages"])
    assert PHI_KEY not in out.batch.keys()  # noqa: SIM118
    assert P.STATE.pending["adv/padding_rows"] == 2.0
    assert any(k.startswith("adv/") and k != "adv/padding_rows" for k in P.STATE.pending)
    phi = data_phi.float()     # the features the batch carried: what the reference pass gave
    assert P.STATE.pending["adv/phi_dim"] == float(phi.shape[-1])
    assert P.STATE.pending["adv/phi_rows"] == float(len(order))
    assert abs(P.STATE.pending["adv/phi_norm_mean"] - float(phi.norm(dim=-1).mean())) < 1e-6
    rec = json.loads((tmp_path / "run.json").read_text())["estimator_instantiated"]
    assert rec["name"] == name and rec["params"] == get_estimator(name, **params).params


def test_rows_without_turn_index_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "STATE", P.HookState())
    with pytest.raises(KeyError, match="rollout-loop hook"):
        P.ccpo_lab_advantage(_batch([0, 1], with_step=False), "grpo", {}, _config("grpo"))


def _fake_ray_trainer() -> types.ModuleType:
    mod = types.ModuleType("fake_ray_trainer")

    class AdvantageEstimator(str, Enum):
        GAE = "gae"
        GRPO = "grpo"
        GiGPO = "gigpo"

    def compute_advantage(data: Any, adv_estimator: Any, gamma: float = 1.0,
                          **kw: Any) -> Any:
        data.meta_info["verl_agent_estimator"] = str(getattr(adv_estimator, "value",
                                                             adv_estimator))
        return data

    class RayPPOTrainer:
        def __init__(self, config: Any, tokenizer: Any = None) -> None:
            if config.algorithm.adv_estimator not in {e.value for e in AdvantageEstimator}:
                raise NotImplementedError
            self.seen = config.algorithm.adv_estimator
            self.config = config

        def _validate(self) -> dict[str, float]:
            mod.collector.multi_turn_loop(None, None, None, is_train=False)
            return {"val/success_rate": 0.5}

    mod.AdvantageEstimator = AdvantageEstimator
    mod.compute_advantage = compute_advantage
    mod.RayPPOTrainer = RayPPOTrainer
    return mod


class _Tok:
    """Stands in for the model's tokenizer: decodes ids as text."""

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(str(int(x)) for x in ids)


def _fake_rollout_loop(batches: list[DataProto]) -> types.ModuleType:
    mod = types.ModuleType("fake_rollout_loop")

    class TrajectoryCollector:
        def __init__(self) -> None:
            self.config = _config("grpo")
            self.tokenizer = _Tok()

        def multi_turn_loop(self, gen_batch: Any, actor_rollout_wg: Any, envs: Any,
                            is_train: bool = True) -> DataProto:
            return batches.pop(0)

    mod.TrajectoryCollector = TrajectoryCollector
    return mod


def test_trainer_accepts_ccpo_and_routes_advantages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "STATE", P.HookState())
    rt = _fake_ray_trainer()
    P.patch_ray_trainer(rt)
    cfg = _config("ccpo")
    trainer = rt.RayPPOTrainer(cfg)
    assert trainer.seen == "grpo" and cfg.algorithm.adv_estimator == "ccpo"
    routed = rt.compute_advantage(_batch(list(range(8))), "ccpo", gamma=0.95)
    assert "advantages" in routed.batch.keys()  # noqa: SIM118
    # a verl-agent name without ccpo_lab's section stays with verl-agent
    P.STATE.config = OmegaConf.create({"algorithm": {"adv_estimator": "gigpo"}})
    kept = rt.compute_advantage(_batch([0]), rt.AdvantageEstimator.GiGPO)
    assert kept.meta_info["verl_agent_estimator"] == "gigpo"
    assert "advantages" not in kept.batch.keys()  # noqa: SIM118
    with pytest.raises(NotImplementedError):   # unknown, unrouted names still fail
        rt.RayPPOTrainer(OmegaConf.create({"algorithm": {"adv_estimator": "foo"}}))


def test_rollout_loop_adds_turns_dumps_step1_and_eval_lengths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "STATE", P.HookState())
    monkeypatch.setenv("CCPO_LAB_RUN_DIR", str(tmp_path))
    (tmp_path / "run.json").write_text("{}")
    first = _batch(list(range(8)), with_step=False)
    # another arm: same content, other random uids
    other = _batch(list(range(8)), with_step=False)
    other.non_tensor_batch["uid"] = np.array([u + "x" for u in other.non_tensor_batch["uid"]],
                                             dtype=object)
    other.non_tensor_batch["traj_uid"] = np.array(
        [u + "-9f" for u in other.non_tensor_batch["traj_uid"]], dtype=object)
    later = _batch(list(range(8)), with_step=False)
    val = _batch(list(range(8)), with_step=False)
    loop = _fake_rollout_loop([first, other, later, val])
    P.patch_rollout_loop(loop)
    rt = _fake_ray_trainer()
    P.patch_ray_trainer(rt)
    rt.collector = loop.TrajectoryCollector()
    trainer = rt.RayPPOTrainer(_config("grpo"))
    trainer.global_steps = 1

    out = rt.collector.multi_turn_loop(None, None, None, is_train=True)
    assert out.non_tensor_batch[P.STEP_KEY].tolist() == TURNS
    fp1 = json.loads((tmp_path / "run.json").read_text())["step1"]["fingerprint"]
    eps = read_rollouts(tmp_path / "rollouts")
    assert [(e["task_id"], e["rollout"], len(e["turns"])) for e in eps] == [
        ("task-0000", 0, 2), ("task-0000", 1, 3), ("task-0001", 0, 1), ("task-0001", 1, 2)]
    turn = eps[1]["turns"][0]
    assert turn["obs"] == "o0" and turn["valid"] is False and turn["action"] == "200 201 202"
    assert turn["input_hash"] == hash_tokens([21, 22, 23, 24])   # left padding dropped

    rt.collector.multi_turn_loop(None, None, None, is_train=True)      # the other arm
    fp2 = json.loads((tmp_path / "run.json").read_text())["step1"]["fingerprint"]
    assert fp1 == fp2

    trainer.global_steps = 2
    (tmp_path / "run.json").write_text("{}")
    rt.collector.multi_turn_loop(None, None, None, is_train=True)
    assert "step1" not in json.loads((tmp_path / "run.json").read_text())

    metrics = trainer._validate()
    # episode lengths of the 4 trajectories: 2, 3, 1, 2
    assert metrics == {"val/success_rate": 0.5, "val/length/mean": 2.0}


def test_reference_pass_returns_last_prompt_features(monkeypatch: pytest.MonkeyPatch) -> None:
    from ccpo_lab.backends.verl.agent.phi import last_prompt_hidden

    monkeypatch.setenv("CCPO_LAB_CAPTURE_PHI", "1")
    g = torch.Generator().manual_seed(1)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed = torch.nn.Embedding(1000, D)
            self.model.norm = torch.nn.LayerNorm(D)
            with torch.no_grad():
                self.model.embed.weight.copy_(torch.randn(1000, D, generator=g))

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.model.norm(self.model.embed(input_ids)).sum(-1)

    dp = types.ModuleType("fake_dp_actor")

    class DataParallelPPOActor:
        use_remove_padding = False

        def __init__(self) -> None:
            self.actor_module = Model()

        def _forward_micro_batch(self, micro_batch: Any, temperature: float,
                                 calculate_entropy: bool = False) -> Any:
            return None, self.actor_module(micro_batch["input_ids"])[:, -L:]

    dp.DataParallelPPOActor = DataParallelPPOActor

    fw = types.ModuleType("fake_fsdp_workers")

    class ActorRolloutRefWorker:
        def __init__(self) -> None:
            self.ref_policy = dp.DataParallelPPOActor()

        def compute_ref_log_prob(self, data: DataProto) -> DataProto:
            parts = list(data.batch.split(3))[::-1]          # micro-batches, reversed
            outs = [self.ref_policy._forward_micro_batch(mb, temperature=1.0)[1]
                    for mb in parts]
            return DataProto.from_dict(tensors={"ref_log_prob": torch.cat(outs[::-1])})

    ActorRolloutRefWorker.compute_ref_log_prob.attrs_3141562937 = {"dispatch": "dp"}
    fw.ActorRolloutRefWorker = ActorRolloutRefWorker
    P.patch_dp_actor(dp)
    P.patch_fsdp_workers(fw)
    assert fw.ActorRolloutRefWorker.compute_ref_log_prob.attrs_3141562937 == {"dispatch": "dp"}

    data = _batch(list(range(8)))
    data.batch["input_ids"] = torch.cat([data.batch["prompts"], data.batch["responses"]], 1)
    worker = fw.ActorRolloutRefWorker()
    out = worker.compute_ref_log_prob(data)
    model = worker.ref_policy.actor_module
    with torch.no_grad():
        hidden = model.model.norm(model.model.embed(data.batch["input_ids"]))
    want = last_prompt_hidden(hidden, data.batch["attention_mask"], L, packed=False)
    assert out.batch[PHI_KEY].shape == (8, D)
    assert torch.allclose(out.batch[PHI_KEY], want)
    monkeypatch.setenv("CCPO_LAB_CAPTURE_PHI", "0")
    assert PHI_KEY not in worker.compute_ref_log_prob(data).batch.keys()  # noqa: SIM118


def test_core_algos_without_a_registry_gets_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    fake = types.ModuleType("verl.trainer.ppo.core_algos")
    monkeypatch.setitem(sys.modules, "verl.trainer.ppo.core_algos", fake)
    P.patch_core_algos(fake)
    assert set(fake.ADV_ESTIMATOR_REGISTRY) == {"gigpo", "ccpo"}
