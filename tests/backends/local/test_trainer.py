"""The local backend's training loop: update rule, run files, step-1 evidence, checks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from ccpo_lab.backends.local.checkpoint import load_checkpoint, read_best
from ccpo_lab.backends.local.policy import ActionScorer, PolicyShape, chosen_logprobs, collate
from ccpo_lab.backends.local.ppo import UpdateBatch, ppo_loss, ppo_update
from ccpo_lab.backends.local.prompts import PromptSettings, turn_input
from ccpo_lab.backends.local.settings import LocalBackendConfig
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.schema import EstimatorConfig
from ccpo_lab.errors import UserError
from ccpo_lab.runs.layout import RunDir, init_run_dir
from ccpo_lab.runs.metrics import read_metrics
from ccpo_lab.runs.rollouts import fingerprint, read_rollouts

TASKS = ("pick_and_place", "pick_two_obj_and_place", "look_at_obj_in_light",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
         "pick_clean_then_place_in_recep")

TINY = """\
name: tiny
arms: [grpo, gigpo]
seeds: [0, 1]
backend:
  kind: local
  local:
    n_train_games: 4
    n_eval_games: 3
    n_receptacles: 3
    n_distractors: 0
    closed_fraction: 0.0
    max_plan_len: 8
    vocab_size: 256
    embed_dim: 8
    hidden_dim: 8
    warmstart_demos: 2
    warmstart_epochs: 2
    encoder: {encoder}
    games_cache: {cache}
protocol:
  total_steps: {steps}
  train_batch_size: 2
  group_size: 2
  val_batch_size: 3
  test_freq: 2
  save_freq: {save_freq}
  max_steps: 5
  history_length: 2
  max_prompt_length: 128
  lr: 1.0e-3
  ppo_mini_batch_size: 8
launcher:
  kind: inline
analysis:
  window_start: 0
"""


def _trained(rd: RunDir) -> list[dict]:
    """The metrics rows without the values that measure the machine (timings, memory)."""
    from ccpo_lab.runs.cost import MEASURED_PREFIXES

    return [{**r, "data": {k: v for k, v in r["data"].items()
                           if not k.startswith(MEASURED_PREFIXES)}}
            for r in read_metrics(rd.metrics)]


def tiny_runs(workdir: Path, cache: Path, steps: int = 3, save_freq: int = 1,
              encoder: str = "conv", results: str = "results") -> dict:
    """{(arm, seed): (RunConfig, RunDir)} of the tiny sweep, directories initialised."""
    from ccpo_lab.config.sweep import load_sweep

    path = workdir / "sweeps" / "tiny.yaml"
    path.write_text(TINY.format(cache=cache, steps=steps, save_freq=save_freq,
                                encoder=encoder))
    sw = load_sweep(path)
    out = {}
    for run in sw.runs:
        rd = RunDir(sw.sweep_dir(workdir / results) / run.arm / f"seed-{run.seed}")
        init_run_dir(rd, run)
        out[(run.arm, run.seed)] = (run, rd)
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("games-cache")


# ----------------------------------------------------------------------------- fast


def _batch() -> tuple[ActionScorer, UpdateBatch]:
    s = PromptSettings(2, 64, 128)
    turns = [turn_input("put a cup in fridge", f"you see a cup {i}",
                        ["take cup 1 from table 1", "go to fridge 1", "look"], [], s)
             for i in range(6)]
    pol = ActionScorer(PolicyShape(128, 8, 8, "conv"), torch.Generator().manual_seed(0))
    inputs = collate(turns)
    chosen = torch.tensor([0, 0, 0, 1, 1, 1])
    with torch.no_grad():
        logits, _ = pol(inputs)
        old = chosen_logprobs(logits, chosen)[0]
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
    return pol, UpdateBatch(inputs, chosen, old, old.clone(), adv)


def _probs(pol: ActionScorer, batch: UpdateBatch) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(pol(batch.inputs)[0], -1)


def test_ppo_update_raises_rewarded_and_lowers_penalised_actions() -> None:
    pol, batch = _batch()
    before = _probs(pol, batch)
    p = ProtocolConfig(lr=1e-2, ppo_epochs=3, ppo_mini_batch_size=4)
    stats = ppo_update(pol, torch.optim.Adam(pol.parameters(), lr=p.lr), batch, p,
                       torch.Generator().manual_seed(0))
    after = _probs(pol, batch)
    assert (after[:3, 0] > before[:3, 0]).all()  # advantage +1 on action 0
    assert (after[3:, 1] < before[3:, 1]).all()  # advantage -1 on action 1
    assert set(stats) == {"actor/pg_loss", "actor/kl_loss", "actor/entropy",
                          "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm"}


def test_ppo_loss_clips_like_verl() -> None:
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.5, 10.0]))
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss, clipped, _ = ppo_loss(logp, old, adv, clip=0.2)
    # A>0: -min(r A, clip(r) A); A<0: max(-r A, -clip(r) A) capped at -3A (dual clip)
    assert loss.tolist() == pytest.approx([-1.2, -0.5, 1.5, 3.0])
    assert clipped.tolist() == [True, False, False, False]


def test_local_settings_are_validated() -> None:
    with pytest.raises(UserError, match="backend.local.hidden_dim"):
        LocalBackendConfig(hidden_dim=0).validate()
    with pytest.raises(UserError, match="backend.local.warmstart_lr"):
        LocalBackendConfig(warmstart_lr=0.0).validate()
    with pytest.raises(UserError,
                       match=r"backend.local.encoder: must be one of conv, gru \(got .lstm.\)"):
        LocalBackendConfig(encoder="lstm").validate()
    LocalBackendConfig().validate()
    LocalBackendConfig(encoder="gru").validate()


def test_estimator_that_differs_from_the_configuration_fails_at_start(
        workdir: Path, cache: Path) -> None:
    from ccpo_lab.backends.local.runner import check_estimator, describe

    run, rd = tiny_runs(workdir, cache)[("grpo", 0)]
    assert check_estimator(run, rd).name == "grpo"
    assert rd.read_run()["estimator_instantiated"] == {"name": "grpo",
                                                       "params": run.estimator.params}
    assert "ccpo_lab.runs.execute" in describe(run, rd)
    partial = {k: v for k, v in run.estimator.params.items() if k != "epsilon"}
    odd = dataclasses.replace(run, estimator=EstimatorConfig("grpo", partial))
    with pytest.raises(RuntimeError, match="differs from the resolved configuration"):
        check_estimator(odd, rd)
    assert "epsilon" in rd.read_run()["estimator_instantiated"]["params"]


# ----------------------------------------------------------------------------- engine


@pytest.mark.slow
def test_a_run_writes_verl_metrics_step1_evidence_and_checkpoints(
        workdir: Path, cache: Path) -> None:
    from ccpo_lab.runs.execute import execute_run

    run, rd = tiny_runs(workdir, cache, steps=3, save_freq=2)[("gigpo", 0)]
    summary = execute_run(rd.path)
    rows = read_metrics(rd.metrics)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    first = rows[0]["data"]
    assert 0.0 <= first["val/success_rate"] <= 1.0 and "warmstart/demo_turns" in first
    for r in rows[1:]:
        d = r["data"]
        assert d["episode/valid_action_ratio"] == 1.0
        assert d["episode/reward/mean"] == pytest.approx(10.0 * d["episode/success_rate"])
        assert 1.0 <= d["episode/length/mean"] <= 5.0
        assert any(k.startswith("adv/") for k in d) and "actor/pg_loss" in d
    assert "val/success_rate" not in rows[1]["data"]
    for r in (rows[0], rows[2], rows[3]):  # before training, test_freq=2, last step
        names = {k[4:-len("_success_rate")] for k in r["data"] if k.startswith("val/")
                 and k.endswith("_success_rate") and k != "val/success_rate"}
        assert names and names <= set(TASKS)
        assert "val/length/mean" in r["data"]
    info = rd.read_run()
    assert info["estimator_instantiated"]["name"] == "gigpo"
    episodes = read_rollouts(rd.rollouts)
    assert info["step1"]["episodes"] == len(episodes) == 4
    assert info["step1"]["fingerprint"] == fingerprint(episodes)
    for ep in episodes:
        assert 1 <= len(ep["turns"]) <= 5
        for t in ep["turns"]:
            assert t["action"] in t["admissible"] and len(t["input_hash"]) == 16
    assert sorted(p.name for p in rd.checkpoints.iterdir()) == ["best", "step-000002.pt",
                                                                "step-000003.pt"]
    best = read_best(rd.checkpoints)  # the best evaluation (step 0 included), kept
    vals = {r["step"]: r["data"]["val/success_rate"] for r in rows
            if "val/success_rate" in r["data"]}
    assert best is not None and best["value"] == max(vals.values())
    assert best["step"] == min(s for s, v in vals.items() if v == best["value"])
    kept = load_checkpoint(rd.checkpoints / "best" / best["file"])
    assert kept["trainer"]["step"] == best["step"] and kept["run_id"] == run.run_id
    assert sorted(p.name for p in (rd.checkpoints / "best").iterdir()) == \
        sorted(["best.json", best["file"]])
    state = json.loads(rd.state_json.read_text())
    assert state["state"] == "completed" and state["step"] == 3
    assert summary["steps"] == 3 and summary["resumed_from"] is None
    assert summary["final_val_success"] == rows[3]["data"]["val/success_rate"]


@pytest.mark.slow
def test_the_gru_policy_still_trains_under_its_own_run_id(workdir: Path, cache: Path) -> None:
    from ccpo_lab.backends.local.runner import train

    conv, _ = tiny_runs(workdir, cache, steps=2, results="conv")[("gigpo", 0)]
    run, rd = tiny_runs(workdir, cache, steps=2, encoder="gru", results="gru")[("gigpo", 0)]
    assert run.backend.local.encoder == "gru" and run.run_id != conv.run_id
    summary = train(run, rd)
    rows = read_metrics(rd.metrics)
    assert summary["steps"] == 2 and [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["data"]["actor/grad_norm"] > 0 for r in rows[1:])


@pytest.mark.slow
def test_step1_rollouts_are_identical_across_arms_and_differ_across_seeds(
        workdir: Path, cache: Path) -> None:
    from ccpo_lab.backends.local.runner import train

    runs = tiny_runs(workdir, cache, steps=1)
    seen = []
    prints = {}
    for key in (("grpo", 0), ("gigpo", 0), ("grpo", 1)):
        run, rd = runs[key]
        train(run, rd, progress=lambda k, n, v: seen.append((k, n, v)))
        prints[key] = rd.read_run()["step1"]["fingerprint"]
        assert _trained(rd)[0] == _trained(runs[("grpo", key[1])][1])[0]  # timings aside
    assert prints[("grpo", 0)] == prints[("gigpo", 0)]
    assert prints[("grpo", 0)] != prints[("grpo", 1)]
    # one warm start per seed, shared through the game set's folder: the second arm loads it
    shared = {key: runs[key][1].read_run()["warm_start"]
              for key in (("grpo", 0), ("gigpo", 0), ("grpo", 1))}
    assert shared[("gigpo", 0)] == {"file": shared[("grpo", 0)]["file"], "loaded": True}
    assert shared[("grpo", 1)]["file"] != shared[("grpo", 0)]["file"]
    assert Path(shared[("grpo", 0)]["file"]).is_file()
    assert [(k, n) for k, n, _ in seen] == [(0, 1), (1, 1)] * 3
