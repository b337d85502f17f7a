"""An adaptive sweep end to end on the CPU backend: real runs, the inline launcher.

Why these arms. Tiny real runs (one training step) cannot make an estimator beat
another reliably, so the comparison that resolves early needs an effect that does not
depend on learning: ``grpo-one-step`` is GRPO whose episodes end after one environment
step, so it can never finish a task (held-out success 0 on every seed), against GRPO
warm-started by behaviour cloning (about 32-46% held-out success at seeds 0-2). The
other comparison, GiGPO against GRPO after one step from the same warm start, differs
only by noise: it runs into the maximum (futility is off in this design, so it is not
stopped early). The runs are deterministic, so the outcome is too; measured: look 1
rejects grpo-one-step (paired t = -8.5 on 3 seeds, p = 0.013 <= its Pocock boundary
0.021) and adds seed 3 to gigpo and grpo; look 2 (4 seeds, the maximum) leaves gigpo
unresolved (p = 0.25). Pocock spending because 3 seeds of at most 4 leave an O'Brien-
Fleming boundary (0.008) too close to that p for a margin. 11 runs, one after another
(inline): 1 min 43 s of CPU measured (4 min wall on a machine loaded 5-6 on 2 cores),
most of it loading games into the ALFWorld engine (the CPU speed work shortens it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ccpo_lab.adaptive.store import read_record
from ccpo_lab.cli.main import main
from ccpo_lab.report.analysis import build_report
from ccpo_lab.runs.layout import SweepDir
from tests.conftest import REPO, snapshot

pytestmark = pytest.mark.slow

SWEEP = """\
name: adapt
arms: [grpo, gigpo, grpo-one-step]
seeds: [0, 1, 2]
arms_dir: {arms}
backend:
  kind: local
  local:
    n_train_games: 24
    n_eval_games: 48
    n_receptacles: 3
    n_distractors: 0
    closed_fraction: 0.0
    embed_dim: 64
    hidden_dim: 64
    warmstart_demos: 96
    warmstart_epochs: 16
    games_cache: {cache}
protocol:
  total_steps: 1
  train_batch_size: 2
  group_size: 2
  val_batch_size: 48
  test_freq: 1
  save_freq: 1
  max_steps: 12
  history_length: 1
  max_prompt_length: 128
  lr: 3.0e-3
  ppo_mini_batch_size: 4
  entropy_coeff: 0.0
  val_temperature: 0.1
launcher:
  kind: inline
analysis:
  window_start: 0
  reference: grpo
  bootstrap_reps: 1000
  adaptive:
    max_seeds: 4
    seeds_per_look: 1
    spending: pocock
    futility: false
"""

ONE_STEP = """\
name: grpo-one-step
description: GRPO whose episodes end after one environment step (it cannot finish a task).
extends: grpo
training:
  max_steps: 1
"""


def test_one_comparison_resolves_early_and_one_runs_into_the_maximum(tmp_path: Path) -> None:
    arms = tmp_path / "arms"
    arms.mkdir()
    for name in ("grpo", "gigpo"):
        shutil.copy(REPO / "arms" / f"{name}.yaml", arms / f"{name}.yaml")
    (arms / "grpo-one-step.yaml").write_text(ONE_STEP)
    path = tmp_path / "adapt.yaml"
    path.write_text(SWEEP.format(arms=arms, cache=tmp_path / "games"))
    results = tmp_path / "results"
    assert main(["sweep", str(path), "--results", str(results)]) == 0

    sweep_dir = results / "adapt"
    record = read_record(SweepDir(sweep_dir))
    assert record is not None and record.state.finished
    first, second = record.state.looks
    by_arm = {d.arm: d for d in first.decisions}
    early = by_arm["grpo-one-step"]
    assert early.action == "worse" and early.n_pairs == 3 and not early.final
    assert early.p_value is not None and early.nominal is not None
    assert early.p_value <= early.nominal
    assert by_arm["gigpo"].action == "continue"
    assert first.add == {"gigpo": (3,), "grpo": (3,)}
    (last,) = second.decisions
    assert (last.arm, last.action, last.final, last.n_pairs) == ("gigpo", "unresolved", True, 4)
    assert record.inputs[0]["grpo-one-step"] == {0: 0.0, 1: 0.0, 2: 0.0}
    seeds = {a: sorted(int(p.name.split("-")[1]) for p in (sweep_dir / a).glob("seed-*"))
             for a in ("grpo", "gigpo", "grpo-one-step")}
    assert seeds == {"grpo": [0, 1, 2, 3], "gigpo": [0, 1, 2, 3], "grpo-one-step": [0, 1, 2]}

    # the same command again: nothing is decided or run again
    before = {k: v for k, v in snapshot(sweep_dir).items() if k != "adaptive.lock"}
    assert main(["sweep", str(path), "--results", str(results)]) == 0
    after = {k: v for k, v in snapshot(sweep_dir).items() if k != "adaptive.lock"}
    assert after == before

    # the report's verdicts are the design's
    model = build_report(sweep_dir, {"bootstrap_reps": 500}).model
    rows = {c.arm: c for c in model.comparisons}
    assert (rows["grpo-one-step"].verdict, rows["grpo-one-step"].adaptive) == ("worse", True)
    assert rows["gigpo"].verdict == "unresolved" and rows["gigpo"].adaptive
    assert model.adaptive is not None and list(model.adaptive.seeds) == [
        {"gigpo": 3, "grpo": 3, "grpo-one-step": 3}, {"gigpo": 4, "grpo": 4, "grpo-one-step": 3}]
