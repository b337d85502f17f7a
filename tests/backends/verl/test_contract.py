"""Contract test against the real verl-agent source (CPU): ``pytest -m verl_agent``.

Runs when ``CCPO_LAB_VERL_AGENT`` points at a verl-agent checkout (the pinned commit) and
this interpreter is a trainer environment built the documented way (torch, verl-agent's
dependencies, ccpo-lab installed ``--no-deps``): ``scripts/verl-agent-contract.sh CHECKOUT``
builds one and runs this file. What is real: verl-agent's Hydra config, ``make_envs`` with
its ALFWorld environment manager and Ray environment actors on games from ``ccpo-lab games
make`` (the real ``alfworld`` engine), ``TrajectoryCollector.multi_turn_loop``,
``adjust_batch``, ``EpisodeRewardManager``, ``apply_invalid_action_penalty``,
``compute_advantage`` and GiGPO's step returns, with ccpo-lab's hooks installed by Ray's
``worker_process_setup_hook`` in every actor. Stand-ins, for what cannot exist here: the
actor worker group (no vLLM, no weights: it answers with admissible, and some inadmissible,
actions in the ``<think>..</think><action>..</action>`` format verl-agent's projection
parses, drawn with each request's seed), a byte-level tokenizer built offline, the
reference policy's features for CCPO (random, keyed by row), and torchvision (whose Linux
wheels need CUDA; ``standins/torchvision``: verl-agent's ALFWorld module imports it only for
AlfredThorEnv images). The vLLM side of the seeding (``patch_vllm_rollout``) needs vLLM and
a GPU: ``scripts/gpu-smoke.sh`` covers it.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

CHECKOUT = os.environ.get("CCPO_LAB_VERL_AGENT")
REPO = Path(__file__).resolve().parents[3]
STANDINS = REPO / "ccpo_lab" / "backends" / "verl" / "standins"
SHIPPED = ("alfworld-qwen7b-slurm", "alfworld-qwen7b-node")

pytestmark = [
    pytest.mark.verl_agent,
    pytest.mark.skipif(not CHECKOUT, reason="CCPO_LAB_VERL_AGENT is unset: no verl-agent "
                       "checkout to test against (scripts/verl-agent-contract.sh CHECKOUT)"),
    pytest.mark.skipif(os.environ.get("CCPO_LAB_IN_TRAINER_ENV") != "1",
                       reason="runs in the trainer environment "
                       "(scripts/verl-agent-contract.sh CHECKOUT; make test runs it)"),
]

GROUP = 4          # rollouts per task
TASKS = 2          # tasks per training step
MAX_TURNS = 5
RESPONSE_LEN = 96
PENALTY = 0.1


# ------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def checkout() -> Path:
    path = Path(str(CHECKOUT)).resolve()
    assert (path / "verl" / "trainer" / "main_ppo.py").is_file(), path
    for p in (str(STANDINS), str(path)):
        if p not in sys.path:
            sys.path.insert(0, p)
    from ccpo_lab.backends.verl.agent import hooks as verl_agent_hooks

    verl_agent_hooks.setup()
    import verl

    assert Path(verl.__file__).resolve().is_relative_to(path), verl.__file__
    return path


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ALFWORLD_DATA: generated games (``ccpo-lab games make``) plus ALFWorld's logic files."""
    from importlib import resources

    from ccpo_lab.backends.local.games import GameGenConfig, GameSpec, ensure_games

    cache = Path(os.environ.get("CCPO_LAB_CONTRACT_GAMES",
                                Path.home() / ".cache" / "ccpo-lab" / "contract-games"))
    spec = GameSpec(n_train=8, n_eval=4, seed=0,
                    config=GameGenConfig(n_receptacles=3, n_distractors=0))
    gs = ensure_games(cache, spec)
    logic = gs.root / "logic"
    logic.mkdir(exist_ok=True)
    data = resources.files("alfworld") / "data"
    for name in ("alfred.pddl", "alfred.twl2"):
        if not (logic / name).exists():
            (logic / name).symlink_to(Path(str(data / name)))
    return gs.root


def _sweep_run(arm: str, seed: int = 0, extra: tuple[str, ...] = ()) -> Any:
    from ccpo_lab.config.sweep import load_sweep

    ov = [f"arms=[{arm}]", f"seeds=[{seed}]", "analysis.reference=null",
          f"protocol.train_batch_size={TASKS}", f"protocol.group_size={GROUP}",
          "protocol.val_batch_size=2", f"protocol.max_steps={MAX_TURNS}",
          "protocol.max_prompt_length=6144", f"protocol.max_response_length={RESPONSE_LEN}",
          "backend.verl.n_gpus_per_node=2", "backend.verl.ppo_micro_batch_size_per_gpu=4",
          "backend.verl.log_prob_micro_batch_size_per_gpu=3", *extra]
    return load_sweep(REPO / "sweeps" / "alfworld-qwen7b-slurm.yaml", ov).runs[0]


def _compose(checkout: Path, overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(checkout / "verl" / "trainer" / "config"),
                               version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


@pytest.fixture(scope="module")
def run_env(checkout: Path, games: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    """A run directory, its trainer config (verl-agent's composition of the generated
    overrides) and a local Ray with ccpo-lab's setup hook in every worker."""
    import ray

    from ccpo_lab.backends.verl.command import build_command
    from ccpo_lab.runs.layout import RunDir

    run = _sweep_run("grpo", seed=1)
    rd = RunDir(tmp_path_factory.mktemp("run") / "grpo" / "seed-1")
    rd.path.mkdir(parents=True)
    (rd.path / "run.json").write_text("{}")
    cmd = build_command(run, rd.path)
    cfg = _compose(checkout, list(cmd.overrides))
    env = {**cmd.env, "ALFWORLD_DATA": str(games),
           "PYTHONPATH": os.pathsep.join([str(STANDINS), str(checkout),
                                          os.environ.get("PYTHONPATH", "")])}
    os.environ.update(env)
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True,
             runtime_env={"worker_process_setup_hook": cfg.ray_init.runtime_env
                          .worker_process_setup_hook, "env_vars": env})
    yield {"run": run, "rd": rd, "cfg": cfg, "cmd": cmd}
    ray.shutdown()


# ------------------------------------------------------------------------- stand-ins
def byte_tokenizer() -> Any:
    """A byte-level tokenizer (every text round-trips) with a Qwen-like chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>",
                                   eos_token="<|im_end|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                          "{{ m['content'] }}<|im_end|>\n{% endfor %}"
                          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


class ActorStandIn:
    """The actor worker group: one answer per request, drawn with the request's seed.

    Most answers are admissible actions of the row's environment in verl-agent's format;
    about one in six is an inadmissible command or lacks the ``<action>`` tags.
    """

    world_size = 2

    def __init__(self, tokenizer: Any, manager: Any) -> None:
        self.tok = tokenizer
        self.manager = manager
        self.seen_seeds: list[list[int]] = []

    def generate_sequences(self, data: Any) -> Any:
        import torch
        from verl import DataProto

        from ccpo_lab.backends.verl.agent.seeds import SEED_KEY

        seeds = data.non_tensor_batch.pop(SEED_KEY)      # put there by ccpo-lab's hook
        self.seen_seeds.append([int(s) for s in seeds])
        admissible = self.manager.envs.get_admissible_commands
        prompts = data.batch["input_ids"]
        n, plen = prompts.shape
        pad = self.tok.pad_token_id
        responses = torch.full((n, RESPONSE_LEN), pad, dtype=torch.long)
        rmask = torch.zeros((n, RESPONSE_LEN), dtype=torch.long)
        for i in range(n):
            rng = np.random.default_rng(int(seeds[i]))
            choices = [a for a in admissible[i % len(admissible)] if a != "help"]
            u = rng.random()
            if u < 0.08:
                text = "<think>no idea</think> i give up"                  # no action tags
            elif u < 0.16:
                text = "<think>try</think><action>fly to the moon</action>"  # inadmissible
            else:
                text = f"<think>ok</think><action>{choices[rng.integers(len(choices))]}</action>"
            ids = self.tok.encode(text, add_special_tokens=False)[:RESPONSE_LEN]
            responses[i, :len(ids)] = torch.tensor(ids)
            rmask[i, :len(ids)] = 1
        pmask = data.batch["attention_mask"]
        ppos = data.batch["position_ids"]
        rpos = ppos[:, -1:] + 1 + torch.arange(RESPONSE_LEN)[None, :]
        return DataProto.from_dict(tensors={
            "prompts": prompts, "responses": responses,
            "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": torch.cat([pmask, rmask], 1),
            "position_ids": torch.cat([ppos, rpos], 1)})


def _gen_batch(n: int) -> Any:
    """The prompt batch the trainer hands the rollout loop (text-mode placeholder rows)."""
    import torch
    from verl import DataProto

    from ccpo_lab.backends.verl.datafiles import placeholder_rows

    rows = placeholder_rows(n, "train")
    return DataProto.from_dict(
        tensors={"input_ids": torch.zeros(n, 1, dtype=torch.long),
                 "attention_mask": torch.ones(n, 1, dtype=torch.long),
                 "position_ids": torch.zeros(n, 1, dtype=torch.long)},
        non_tensors={"raw_prompt": np.array([r["prompt"] for r in rows], dtype=object),
                     "data_source": np.array([r["data_source"] for r in rows], dtype=object)})


def _rollout(run_env: dict[str, Any], manager: Any, step: int, tok: Any) -> tuple[Any, Any]:
    """One training rollout of ``step`` through verl-agent's own loop, hooks installed."""
    from agent_system.multi_turn_rollout import TrajectoryCollector

    from ccpo_lab.backends.verl.agent import patches as P

    P.STATE.config = run_env["cfg"]
    P.STATE.trainer = types.SimpleNamespace(global_steps=step)
    actor = ActorStandIn(tok, manager)
    collector = TrajectoryCollector(config=run_env["cfg"], tokenizer=tok)
    out = collector.multi_turn_loop(gen_batch=_gen_batch(TASKS), actor_rollout_wg=actor,
                                    envs=manager, is_train=True)
    return out, actor


def _train_envs(cfg: Any) -> Any:
    from agent_system.environments import make_envs

    envs, val_envs = make_envs(cfg)
    return envs, val_envs


@pytest.fixture(scope="module")
def step1(run_env: dict[str, Any]) -> dict[str, Any]:
    tok = byte_tokenizer()
    envs, val_envs = _train_envs(run_env["cfg"])
    out, actor = _rollout(run_env, envs, 1, tok)
    return {"tok": tok, "envs": envs, "val_envs": val_envs, "out": out, "actor": actor}


# ------------------------------------------------------------------------- tests
def test_patch_check_passes(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.backends.verl.agent.trainer import check

    assert check(checkout) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [ln for ln in lines if ln.startswith("FAIL")]
    assert sum(ln.startswith("ok") for ln in lines) >= 10


@pytest.mark.parametrize("sweep", SHIPPED)
def test_shipped_sweeps_compose_with_the_checkouts_config(checkout: Path, sweep: str,
                                                          tmp_path: Path) -> None:
    from ccpo_lab.backends.verl.command import build_command
    from ccpo_lab.config.sweep import load_sweep

    for run in load_sweep(REPO / "sweeps" / f"{sweep}.yaml").runs:
        cmd = build_command(run, tmp_path / run.arm / f"seed-{run.seed}")
        cfg = _compose(checkout, list(cmd.overrides))
        assert cfg.algorithm.adv_estimator == run.estimator.name
        assert cfg.env.seed == cmd.determinism["env_seed"]
        assert cfg.env.rollout.n == 8 and cfg.data.train_batch_size == 16
        assert cfg.actor_rollout_ref.rollout.get("seed") is None   # never a request seed
        env_vars = cfg.ray_init.runtime_env.env_vars
        assert env_vars["CCPO_LAB_SEED"] == str(run.seed)
        assert cfg.ray_init.runtime_env.env_vars.RAY_num_server_call_thread == "1"


def test_step1_rollout_through_verl_agents_loop(step1: dict[str, Any],
                                                run_env: dict[str, Any]) -> None:
    from ccpo_lab.runs.rollouts import read_rollouts
    from ccpo_lab.runs.verify import count_groups

    out = step1["out"]
    nt = out.non_tensor_batch
    assert {"uid", "traj_uid", "anchor_obs", "rewards", "is_action_valid",
            "ccpo_lab_step"} <= set(nt)
    assert len(set(nt["traj_uid"])) == TASKS * GROUP
    assert not all(nt["is_action_valid"]) and any(nt["is_action_valid"])
    run = json.loads((run_env["rd"].path / "run.json").read_text())
    assert len(run["step1"]["fingerprint"]) == 64
    eps = read_rollouts(run_env["rd"].rollouts)
    assert len(eps) == TASKS * GROUP
    groups, distinct = count_groups(eps)
    assert groups == TASKS and distinct == TASKS               # no group collapsed
    seeds = step1["actor"].seen_seeds[0]
    assert len(set(seeds)) == len(seeds)                       # one seed per request
    # a group shares its game (same first observation), rows of a group differ
    first = {e["task_id"]: set() for e in eps}
    for e in eps:
        first[e["task_id"]].add(e["turns"][0]["obs"])
    assert all(len(v) == 1 for v in first.values())


def test_a_requeued_run_replays_the_step(step1: dict[str, Any],
                                         run_env: dict[str, Any]) -> None:
    """Step 2 on the environments of step 1 == step 2 on fresh ones (a requeue)."""
    a, _ = _rollout(run_env, step1["envs"], 2, step1["tok"])
    fresh, fresh_val = _train_envs(run_env["cfg"])
    try:
        b, _ = _rollout(run_env, fresh, 2, step1["tok"])
    finally:
        fresh.close()
        fresh_val.close()
    for key in ("anchor_obs", "rewards", "is_action_valid", "ccpo_lab_step"):
        assert list(a.non_tensor_batch[key]) == list(b.non_tensor_batch[key]), key
    assert a.batch["responses"].tolist() == b.batch["responses"].tolist()
    c, _ = _rollout(run_env, step1["envs"], 3, step1["tok"])
    assert list(c.non_tensor_batch["anchor_obs"]) != list(a.non_tensor_batch["anchor_obs"])


def _training_batch(step1: dict[str, Any], cfg: Any, gigpo: bool, pad: bool = True) -> Any:
    """What ``fit`` does between the rollout and ``compute_advantage`` (pinned commit);
    ``pad=False`` leaves out ``adjust_batch``'s padding copies."""
    import torch
    from agent_system.reward_manager import EpisodeRewardManager
    from gigpo import core_gigpo
    from verl.trainer.ppo import ray_trainer as rt
    from verl.trainer.ppo.reward import compute_reward

    from ccpo_lab.backends.verl.agent.phi import PHI_KEY

    batch = copy.deepcopy(step1["out"])
    if gigpo:
        batch.batch["step_rewards"] = core_gigpo.compute_step_discounted_returns(
            batch=batch, gamma=cfg.algorithm.gamma)
    if pad:
        batch = rt.adjust_batch(cfg, batch)
    batch.batch["response_mask"] = rt.compute_response_mask(batch)
    reward_tensor, _ = compute_reward(batch, EpisodeRewardManager(
        tokenizer=step1["tok"], num_examine=0, normalize_by_length=False))
    batch.batch["token_level_scores"] = reward_tensor
    batch, _ = rt.apply_invalid_action_penalty(batch, invalid_action_penalty_coef=PENALTY)
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    # the reference policy's features (stand-in): one random vector per (trajectory, turn)
    keys = [f"{t}/{s}" for t, s in zip(batch.non_tensor_batch["traj_uid"],
                                        batch.non_tensor_batch["ccpo_lab_step"], strict=True)]
    codes = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    g = torch.Generator().manual_seed(0)
    table = torch.randn(len(codes), 16, generator=g)
    batch.batch[PHI_KEY] = table[torch.tensor([codes[k] for k in keys])]
    return batch


def _advantage_kwargs(cfg: Any) -> dict[str, Any]:
    return {"gamma": cfg.algorithm.gamma, "lam": cfg.algorithm.lam,
            "num_repeat": cfg.actor_rollout_ref.rollout.n, "norm_adv_by_std_in_grpo": True,
            "multi_turn": False, "step_advantage_w": cfg.algorithm.gigpo.step_advantage_w,
            "gigpo_mode": cfg.algorithm.gigpo.mode,
            "gigpo_enable_similarity": cfg.algorithm.gigpo.enable_similarity,
            "gigpo_similarity_thresh": cfg.algorithm.gigpo.similarity_thresh}


@pytest.mark.parametrize("arm", ["grpo", "gigpo"])
def test_hook_gives_verl_agents_own_advantages(arm: str, step1: dict[str, Any],
                                               run_env: dict[str, Any],
                                               checkout: Path, tmp_path: Path) -> None:
    """ccpo-lab's grpo/gigpo through the hook == verl-agent's own, on the same batch.

    The batch is the rollout before ``adjust_batch``: verl-agent's own estimators count the
    padding copies in their group statistics, ccpo-lab's hook computes a copied row once
    (``test_padding_copies_do_not_change_ccpo_labs_advantages``).
    """
    from verl.trainer.ppo import ray_trainer as rt

    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.backends.verl.command import build_command

    run = _sweep_run(arm, seed=1)
    cfg = _compose(checkout, list(build_command(run, tmp_path).overrides))
    batch = _training_batch(step1, cfg, gigpo=arm == "gigpo", pad=False)
    kw = _advantage_kwargs(cfg)
    theirs = rt.compute_advantage.__wrapped__(copy.deepcopy(batch),
                                              adv_estimator=cfg.algorithm.adv_estimator, **kw)
    P.STATE.config = cfg                                        # routes arm to ccpo-lab
    ours = rt.compute_advantage(copy.deepcopy(batch), adv_estimator=cfg.algorithm.adv_estimator,
                                **kw)
    diff = (ours.batch["advantages"] - theirs.batch["advantages"]).abs().max().item()
    _record("max_abs_diff_" + arm, diff)
    assert diff <= 1e-5, f"{arm}: largest difference {diff:.3g}"


@pytest.mark.parametrize("arm", ["grpo", "gigpo"])
def test_padding_copies_do_not_change_ccpo_labs_advantages(
        arm: str, step1: dict[str, Any], run_env: dict[str, Any], checkout: Path,
        tmp_path: Path) -> None:
    """On ``adjust_batch``'s padded batch the hook gives every original row what it gives
    without the copies (a copied row is computed once); verl-agent's own estimators count
    the copies in their group statistics, so their difference there is recorded."""
    from verl.trainer.ppo import ray_trainer as rt

    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.backends.verl.command import build_command

    run = _sweep_run(arm, seed=1)
    cfg = _compose(checkout, list(build_command(run, tmp_path).overrides))
    padded = _training_batch(step1, cfg, gigpo=arm == "gigpo")
    plain = _training_batch(step1, cfg, gigpo=arm == "gigpo", pad=False)
    n = len(plain)
    assert len(padded) > n                                      # adjust_batch padded it
    kw = _advantage_kwargs(cfg)
    P.STATE.config = cfg
    est = cfg.algorithm.adv_estimator
    ours_padded = rt.compute_advantage(copy.deepcopy(padded), adv_estimator=est, **kw)
    ours_plain = rt.compute_advantage(copy.deepcopy(plain), adv_estimator=est, **kw)
    theirs_padded = rt.compute_advantage.__wrapped__(copy.deepcopy(padded),
                                                     adv_estimator=est, **kw)
    a = ours_padded.batch["advantages"]
    assert (a[:n] - ours_plain.batch["advantages"]).abs().max().item() <= 1e-6
    _record(f"padded_rows_{arm}", float(len(padded) - n))
    _record(f"max_abs_diff_{arm}_padded_batch_vs_verl_agent",
            (a - theirs_padded.batch["advantages"]).abs().max().item())


def test_ccpo_hook_equals_the_estimator(step1: dict[str, Any], run_env: dict[str, Any],
                                        checkout: Path, tmp_path: Path) -> None:
    import torch
    from verl.trainer.ppo import ray_trainer as rt

    from ccpo_lab.backends.verl.agent import patches as P
    from ccpo_lab.backends.verl.agent.phi import PHI_KEY
    from ccpo_lab.backends.verl.command import build_command
    from ccpo_lab.estimators import StepBatch, get_estimator

    run = _sweep_run("ccpo-return-hard", seed=1)
    cfg = _compose(checkout, list(build_command(run, tmp_path).overrides))
    batch = _training_batch(step1, cfg, gigpo=False)
    nt = batch.non_tensor_batch
    keys = list(zip(nt["traj_uid"], nt["ccpo_lab_step"], strict=True))
    first = sorted({k: i for i, k in reversed(list(enumerate(keys)))}.values())
    valid = np.asarray(nt["is_action_valid"], dtype=bool)[first]
    reward = np.asarray(nt["rewards"], dtype=np.float64)[first]
    if "invalid_penalty" not in get_estimator("grpo").params:
        reward = reward - PENALTY * (~valid)    # before issue 11: penalised rewards in
    # (after issue 11 every estimator takes raw rewards and applies its invalid_penalty)
    sb = StepBatch(task_uid=nt["uid"][first], traj_uid=nt["traj_uid"][first],
                   step=nt["ccpo_lab_step"][first], anchor_obs=nt["anchor_obs"][first],
                   reward=reward, valid=valid, phi=batch.batch[PHI_KEY][first])
    want = get_estimator("ccpo", **run.estimator.params)(sb).advantages
    P.STATE.config = cfg
    out = rt.compute_advantage(copy.deepcopy(batch), adv_estimator="ccpo",
                               **_advantage_kwargs(cfg))
    mask = batch.batch["response_mask"].float()
    row = {k: float(want[j]) for j, k in enumerate(keys[i] for i in first)}
    expect = torch.tensor([row[k] for k in keys])[:, None] * mask
    diff = (out.batch["advantages"].float() - expect).abs().max().item()
    _record("max_abs_diff_ccpo", diff)
    assert diff <= 1e-5


def _record(key: str, value: float) -> None:
    """Append a measured figure to ``$CCPO_LAB_CONTRACT_OUT`` (the script prints them)."""
    path = os.environ.get("CCPO_LAB_CONTRACT_OUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({key: value}) + "\n")
