"""verl's batch pipeline before the advantage, on the CPU backend (issue 30)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ccpo_lab.backends.local.verl_batch import (
    PaddingUndefined,
    balanced_partitions,
    pad_rows,
    passed_rows,
    size_divisor,
)
from ccpo_lab.errors import UserError


def test_divisor_is_verl_agents_lcm() -> None:
    assert size_divisor(8, 32, 32) == 256
    assert size_divisor(2, 8, 64) == 128  # lcm(64 x 2, 64 x 2, 8 x 2)


@pytest.mark.parametrize("n", [8, 15, 16, 17, 100])
def test_padding_copies_distinct_rows_to_a_multiple(n: int) -> None:
    rows = pad_rows(n, 16, np.random.default_rng(0))
    assert len(rows) % 16 == 0 and list(rows[:n]) == list(range(n))
    copies = rows[n:]
    assert len(set(copies.tolist())) == len(copies) and (copies < n).all()
    assert len(copies) == (-n) % 16
    assert np.array_equal(rows, pad_rows(n, 16, np.random.default_rng(0)))


def test_padding_that_needs_more_copies_than_rows_is_undefined() -> None:
    with pytest.raises(PaddingUndefined, match="3 rows need 13 copies"):
        pad_rows(3, 16, np.random.default_rng(0))


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_partitions_are_equal_sized_and_balanced(k: int) -> None:
    rng = np.random.default_rng(k)
    lens = rng.integers(5, 400, size=16 * k).tolist()
    parts = balanced_partitions(lens, k)
    assert sorted(i for p in parts for i in p) == list(range(len(lens)))
    assert {len(p) for p in parts} == {16}
    assert all(p == sorted(p) for p in parts)
    sums = [sum(lens[i] for i in p) for p in parts]
    assert max(sums) - min(sums) <= max(lens)  # largest differencing balances well


def test_passed_rows_pad_then_reorder() -> None:
    rng = np.random.default_rng(3)
    lens = rng.integers(5, 100, size=37).tolist()
    rows = passed_rows(lens, 2, 8, np.random.default_rng(1))
    assert len(rows) == 48 and set(rows.tolist()) == set(range(37))
    assert rows.tolist() != sorted(rows.tolist())  # reordered


def test_a_padding_that_can_be_undefined_is_refused_on_loading(tmp_path: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep

    p = tmp_path / "s.yaml"
    p.write_text("name: s\narms: [grpo]\nseeds: [0]\nbackend:\n  kind: local\n  local:\n"
                 "    batch_world_size: 4\n    batch_micro_size: 8\n"
                 "protocol: {train_batch_size: 2, group_size: 4}\n")
    with pytest.raises(UserError, match="padding is undefined") as err:
        load_sweep(p)
    assert "backend.local.batch_micro_size" in str(err.value) and str(p) in str(err.value)
    p.write_text(p.read_text().replace("batch_micro_size: 8", "batch_micro_size: 2"))
    assert load_sweep(p).runs[0].backend.local.batch_world_size == 4


def test_the_settings_leave_existing_run_ids_alone(tmp_path: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep

    base = "name: s\narms: [grpo]\nseeds: [0]\nbackend:\n  kind: local\n"
    p = tmp_path / "s.yaml"
    p.write_text(base)
    plain = load_sweep(p).runs[0].run_id
    p.write_text(base + "  local: {batch_micro_size: 32, batch_world_size: 0}\n")
    assert load_sweep(p).runs[0].run_id == plain  # the defaults, written out
    p.write_text(base + "  local: {batch_world_size: 1, batch_micro_size: 4}\n")
    assert load_sweep(p).runs[0].run_id != plain


@pytest.mark.slow
def test_a_run_pads_and_balances_and_trains_on_the_passed_batch(
        workdir: Path, tmp_path: Path) -> None:
    """Both semantics of an arm run on the padded, balanced batch; the rollouts (and so
    step 1) are the ones a run without the pipeline plays."""
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.execute import execute_run
    from ccpo_lab.runs.layout import RunDir, init_run_dir
    from ccpo_lab.runs.metrics import read_metrics
    from tests.backends.local.test_trainer import TINY

    text = TINY.format(cache=tmp_path / "games", steps=2, save_freq=2, encoder="conv")
    text = text.replace("arms: [grpo, gigpo]", "arms: [gigpo, gigpo-as-run]").replace(
        "seeds: [0, 1]", "seeds: [0]")
    piped = text.replace("    games_cache:", "    batch_world_size: 2\n    batch_micro_size: 2\n"
                         "    games_cache:")
    prints = {}
    for label, body in (("plain", text), ("piped", piped)):
        path = workdir / f"{label}.yaml"
        path.write_text(body)
        sw = load_sweep(path)
        for run in sw.runs:
            rd = RunDir(sw.sweep_dir(workdir / label) / run.arm / "seed-0")
            init_run_dir(rd, run)
            execute_run(rd.path)
            rows = read_metrics(rd.metrics)
            assert [r["step"] for r in rows] == [0, 1, 2]
            for r in rows[1:]:
                d = r["data"]
                if label == "piped":
                    assert d["adv/passed_rows"] % 4 == 0 and d["adv/padding_rows"] >= 0
                    assert d["adv/passed_rows"] == d["adv/padding_rows"] + round(
                        d["episode/length/mean"] * 4)
                else:
                    assert "adv/padding_rows" not in d
            prints[(label, run.arm)] = rd.read_run()["step1"]["fingerprint"]
    assert len(set(prints.values())) == 1  # the same step-1 rollouts everywhere


def test_a_random_state_draws_the_copies_verl_agents_global_seed_draws() -> None:
    """``adjust_batch`` draws ``np.random.choice(bs, to_add, replace=False)`` from the
    global generator: ``RandomState(s)`` gives those rows (checked against verl-agent's
    own function in tests/backends/verl/test_r30_verl_batch.py)."""
    np.random.seed(7)
    want = np.random.choice(37, 11, replace=False)
    assert pad_rows(37, 16, np.random.RandomState(7))[37:].tolist() == want.tolist()


@pytest.mark.parametrize(("key", "value", "range_"), [
    ("batch_world_size", -1, "0..4096"), ("batch_micro_size", 0, "1..65536")])
def test_out_of_range_settings_name_file_key_and_value(key: str, value: int,
                                                       range_: str) -> None:
    from ccpo_lab.backends.local.settings import LocalBackendConfig

    with pytest.raises(UserError) as err:
        LocalBackendConfig(**{key: value}).validate("s.yaml")
    assert str(err.value) == (f"s.yaml: backend.local.{key}: must be an integer in "
                              f"{range_} (got {value})")
    assert "\n" not in str(err.value) and err.value.exit_code == 2


def test_a_step_trains_on_the_passed_batch_and_copies_share_their_rows_advantage(
        workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """batch_world_size 2 x batch_micro_size 4: a described arm's estimator gets
    ``rows=passed`` (M a multiple of 8, each row once or twice, balanced order) and
    returns (M,) advantages, each its row's (the unpadded batch's, indexed by
    ``passed``); the update trains on those M rows; the padding is logged."""
    from ccpo_lab.backends.local import trainer as T
    from ccpo_lab.backends.local.runner import load_games
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.estimators import StepBatch, get_estimator
    from ccpo_lab.runs.layout import RunDir, init_run_dir
    from tests.backends.local.test_trainer import TINY

    text = TINY.format(cache=tmp_path / "games", steps=2, save_freq=2, encoder="conv")
    text = text.replace("arms: [grpo, gigpo]", "arms: [gigpo]").replace(
        "seeds: [0, 1]", "seeds: [0]").replace("group_size: 2", "group_size: 3").replace(
        "train_batch_size: 2", "train_batch_size: 3").replace(
        "    games_cache:", "    batch_world_size: 2\n    batch_micro_size: 4\n    games_cache:")
    path = workdir / "piped.yaml"
    path.write_text(text)
    sw = load_sweep(path)
    run = sw.runs[0]
    assert run.estimator.params["semantics"] == "described"
    rd = RunDir(sw.sweep_dir(workdir / "results") / run.arm / "seed-0")
    init_run_dir(rd, run)
    inner = get_estimator(run.estimator.name, **dict(run.estimator.params))
    calls: list[tuple[StepBatch, torch.Tensor]] = []
    trained: list[int] = []

    def recording(batch: StepBatch) -> Any:
        out = inner(batch)
        calls.append((batch, out.advantages))
        return out

    def update(policy: Any, optim: Any, batch: Any, p: Any, gen: Any) -> dict[str, float]:
        trained.append(len(batch.chosen))
        assert len(batch.adv) == len(batch.chosen) == batch.inputs.lengths.shape[0]
        return real_update(policy, optim, batch, p, gen)

    real_update = T.ppo_update
    monkeypatch.setattr(T, "ppo_update", update)
    trainer = T.Trainer(run, load_games(run, rd), estimator=recording)
    padded = 0
    for _ in range(2):  # 9 episodes: 9 x length rows, padded unless length % 8 == 0
        metrics = trainer.train_step()
        batch, adv = calls[-1]
        passed = batch.passed.numpy()
        assert metrics["adv/passed_rows"] == len(passed) == trained[-1] == len(adv)
        assert metrics["adv/padding_rows"] == len(passed) - batch.n
        assert len(passed) % 8 == 0 and np.bincount(passed, minlength=batch.n).min() == 1
        assert np.bincount(passed).max() <= 2  # copies of distinct rows
        plain = StepBatch(batch.task_uid, batch.traj_uid, batch.step, batch.anchor_obs,
                          batch.reward, batch.valid, batch.phi)
        assert torch.equal(adv, inner(plain).advantages[batch.passed])
        padded += int(metrics["adv/padding_rows"])
    assert padded > 0
