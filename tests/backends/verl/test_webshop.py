"""WebShop on the verl backend: the data check before anything is written, ``ccpo-lab
doctor``'s lines (one per missing part, each saying what to do), the dry run's command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.backends.verl import webshop as W
from ccpo_lab.backends.verl.doctor import Context, check_environment
from ccpo_lab.backends.verl.runner import check_sweep
from ccpo_lab.config.environments import WebshopSettings
from ccpo_lab.errors import UserError
from tests.backends.verl.conftest import REPO, sweep_runs

SWEEP = "webshop-qwen7b-slurm"


def _checkout(root: Path, *, small: bool = True, index: bool = True) -> Path:
    """A stand-in checkout holding WebShop's data where verl-agent reads it."""
    pkg = root / W.PACKAGE
    (pkg / "data").mkdir(parents=True)
    for name in W.data_files(small):
        (pkg / "data" / name).write_text("[]")
    if index:
        (pkg / W.INDEX).mkdir(parents=True)
        (pkg / W.INDEX / "segments_1").write_text("")
    (root / "verl" / "trainer").mkdir(parents=True)
    (root / "verl" / "trainer" / "main_ppo.py").write_text("")
    return root


def test_a_sweep_without_webshops_data_is_refused_in_one_line(tmp_path: Path) -> None:
    runs = sweep_runs(SWEEP, [f"backend.verl.verl_agent_path={tmp_path}"])
    with pytest.raises(UserError) as e:
        check_sweep(runs, [None] * len(runs))
    assert e.value.key == "backend.verl.verl_agent_path" and "items_shuffle_1000.json" in \
        str(e.value) and "\n" not in str(e.value)


def test_the_index_and_the_full_products_are_checked(tmp_path: Path) -> None:
    co = _checkout(tmp_path / "a", index=False)
    assert [w for _, w, _ in W.missing_data(WebshopSettings(), co)] == [
        "WebShop's search index (setup.sh's run_indexing.sh)"]
    co = _checkout(tmp_path / "b")
    assert W.missing_data(WebshopSettings(), co) == []
    missing = W.missing_data(WebshopSettings(use_small=False), co)
    assert [p.name for _, _, p in missing] == ["items_shuffle.json", "items_ins_v2.json"]


def test_a_data_dir_elsewhere_is_named_by_its_key(tmp_path: Path) -> None:
    co = _checkout(tmp_path / "co")
    other = tmp_path / "elsewhere"
    other.mkdir()
    for name in W.data_files(True):
        (other / name).write_text("[]")
    runs = sweep_runs(SWEEP, [f"backend.verl.verl_agent_path={co}",
                              f"env.webshop.data_dir={other}"])
    with pytest.raises(UserError) as e:
        check_sweep(runs, [None] * len(runs))
    assert e.value.key == "env.webshop.data_dir" and "verl-agent reads" in str(e.value)
    runs = sweep_runs(SWEEP, [f"backend.verl.verl_agent_path={co}",
                              f"env.webshop.data_dir={co / W.PACKAGE / 'data'}"])
    check_sweep(runs, [None] * len(runs))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)


def test_sweep_exits_2_and_writes_nothing_without_the_data(tmp_path: Path) -> None:
    results = tmp_path / "results"
    r = _cli("sweep", str(REPO / "sweeps" / f"{SWEEP}.yaml"), "launcher=inline",
             f"backend.verl.verl_agent_path={tmp_path / 'none'}", "--results", str(results))
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert len(errors) == 1 and "backend.verl.verl_agent_path" in errors[0]
    assert not results.exists()


def test_dry_run_composes_verl_agents_webshop_command(tmp_path: Path) -> None:
    co = _checkout(tmp_path / "co")
    r = _cli("sweep", str(REPO / "sweeps" / f"{SWEEP}.yaml"), "--dry-run",
             f"backend.verl.verl_agent_path={co}", "--results", str(tmp_path / "results"))
    assert r.returncode == 0, r.stdout + r.stderr
    for want in ("env.env_name=Webshop", "env.webshop.use_small=True",
                 "env.webshop.human_goals=False", "env.max_steps=15",
                 "data.max_prompt_length=4096", "data.train_batch_size=16"):
        assert want in r.stdout, want


def test_doctor_names_each_missing_part_and_what_to_do(tmp_path: Path) -> None:
    run = sweep_runs(SWEEP, [f"backend.verl.verl_agent_path={tmp_path / 'co'}",
                             f"backend.verl.python={sys.executable}"])[0]
    ctx = Context(settings=run.backend.verl, results=tmp_path, environment="webshop",
                  env_settings=run.env_settings)
    lines = {c.name + ":" + c.detail for c in check_environment(ctx) if c.status == "FIX"}
    text = "\n".join(sorted(lines))
    assert "WebShop package" in text and "pyserini" in text and "requirements.txt" in text
    assert "spacy download en_core_web_sm" in text
    assert sum("WebShop data" in ln for ln in lines) == 4   # 3 product files + the index
    assert all("setup.sh" in ln for ln in lines if ln.startswith("WebShop data"))


def test_doctor_on_sokoban_checks_its_modules(tmp_path: Path) -> None:
    run = sweep_runs("sokoban-verl", [f"backend.verl.python={sys.executable}"])[0]
    ctx = Context(settings=run.backend.verl, results=tmp_path, environment="sokoban",
                  env_settings=run.env_settings)
    (check,) = check_environment(ctx)
    assert check.name == "Sokoban modules"
    assert check.status == "ok" or "gym_sokoban==0.0.6" in check.detail


def _webshop_batch(seed: int = 0) -> object:
    """A WebShop-shaped training batch as verl-agent hands it to the estimator: 16 tasks x
    8 rollouts, episodes of 1-15 turns, reward 10 on the last turn of a won episode (a
    purchase with score 1) and 0 otherwise, some invalid actions, page texts as anchors,
    the reference pass's features."""
    import numpy as np
    import torch

    from ccpo_lab.backends.verl.smoke_env import StandInProto

    rng = np.random.default_rng(seed)
    task, traj, obs, step, reward, valid = [], [], [], [], [], []
    for t in range(16):
        for r in range(8):
            n = int(rng.integers(1, 16))
            won = bool(rng.random() < 0.3)
            for k in range(n):
                task.append(f"u{t}")
                traj.append(f"t{t}-{r}")
                obs.append(f"instruction {t} page {min(k, int(rng.integers(0, 3)))}")
                step.append(k)
                reward.append(10.0 if won and k == n - 1 else 0.0)
                valid.append(bool(rng.random() < 0.9))
    rows, width = len(task), 6
    level = torch.zeros(rows, width)
    level[torch.arange(rows), 3] = torch.tensor(reward)
    mask = torch.ones(rows, width, dtype=torch.long)
    return StandInProto({"token_level_rewards": level, "response_mask": mask,
                         "ccpo_phi_feats": torch.randn(rows, 16, generator=torch.Generator()
                                                       .manual_seed(seed))},
                        {"uid": np.array(task, dtype=object),
                         "traj_uid": np.array(traj, dtype=object),
                         "anchor_obs": np.array(obs, dtype=object),
                         "step": np.array(step), "is_action_valid": np.array(valid)})


def test_every_arm_of_the_webshop_sweep_on_a_webshop_shaped_batch() -> None:
    import torch

    from ccpo_lab.backends.verl.agent.advantage import compute_token_advantages

    data = _webshop_batch()
    seen = {}
    for run in sweep_runs(SWEEP):
        if run.seed != 0:
            continue
        adv, out = compute_token_advantages(data, run.estimator.name,  # type: ignore[arg-type]
                                            run.estimator.params)
        assert adv.shape == data.batch["response_mask"].shape  # type: ignore[attr-defined]
        assert torch.isfinite(adv).all() and adv.abs().sum() > 0, run.arm
        seen[run.arm] = adv[:, 0].clone()
    assert len(seen) == 5
    arms = list(seen)
    assert any(not torch.allclose(seen[a], seen[b]) for a in arms for b in arms if a != b)
