"""The report's checkpoint evaluations, from per-episode files with hand-checked numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from ccpo_lab.evaluation.spec import EvalSetting, EvalTarget
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.export import csv_tables, to_json
from ccpo_lab.report.latex import to_latex
from ccpo_lab.report.tables import to_markdown
from ccpo_lab.runs.evals import eval_path, write_eval_file
from ccpo_lab.runs.layout import RunDir
from ccpo_lab.stats.variance import decompose_crossed, decompose_window
from tests.report.builders import init_sweep, log_evals, sweep_file

SEEDS = (0, 1, 2, 3)
N = 6
TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
         "pick_two_obj_and_place")
# success per (arm, seed) game by game on the common draw (final checkpoint, in)
FINAL = {"grpo": ["110100", "100100", "111100", "010100"],
         "gigpo": ["111100", "110110", "111110", "110100"]}
BEST_STEP = {0: 20, 1: 25, 2: 20, 3: 25}
BEST = {"grpo": ["100100", "100000", "110100", "000100"],
        "gigpo": ["110100", "110100", "111100", "100100"]}
TRAINING_AT_BEST = {"grpo": 0.9, "gigpo": 0.95}  # what selected them


def _games(split: str) -> list[str]:
    return [f"{'valid_seen' if split == 'in' else 'valid_unseen'}/{g:05d}" for g in range(N)]


def write_eval(rd: RunDir, run_id: str, step: int, split: str, bits: str,
               games: list[str] | None = None) -> Path:
    games = games or _games(split)
    t = EvalTarget(step, EvalSetting(split, N, 1, 0.4), {"split": split, "test": 1})
    header = {"eval": 1, "key": t.key, "run_id": run_id, "arm": rd.arm, "seed": rd.seed,
              "backend": "local", "split": split, "episodes": N, "repeats": 1,
              "temperature": 0.4, "checkpoint": {"step": step, "weights": "x"},
              "draw": {"id": t.draw_id, "spec": dict(t.draw), "games": games}}
    eps = [{"repeat": 0, "i": i, "game": games[i], "task_type": TYPES[i],
            "success": b == "1", "reward": 10.0 * (b == "1"), "turns": 4 + i,
            "invalid": 0} for i, b in enumerate(bits)]
    path = eval_path(rd, t.key)
    write_eval_file(path, header, eps)
    return path


@pytest.fixture
def study(tmp_path: Path) -> Path:
    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=SEEDS), tmp_path / "results")
    rng = np.random.default_rng(0)
    for (arm, seed), rd in rds.items():
        run_id = rd.read_run()["run_id"]
        evals = {s: float(np.clip(0.5 + 0.1 * rng.standard_normal(), 0, 1))
                 for s in range(0, 31, 5)}
        evals[BEST_STEP[seed]] = TRAINING_AT_BEST[arm]
        log_evals(rd, evals)
        rd.write_state("completed", step=30)
        (rd.checkpoints / "best").mkdir(parents=True)
        (rd.checkpoints / "best" / "best.json").write_text(json.dumps(
            {"step": BEST_STEP[seed], "value": TRAINING_AT_BEST[arm]}))
        write_eval(rd, run_id, 30, "in", FINAL[arm][seed])
        write_eval(rd, run_id, 30, "out", FINAL[arm][seed][::-1])
        write_eval(rd, run_id, BEST_STEP[seed], "in", BEST[arm][seed])
    return sweep_dir


def _bits(rows: list[str]) -> np.ndarray:
    return np.array([[[c == "1" for c in r]] for r in rows], dtype=np.float64)


def test_the_tables_numbers_are_the_files(study: Path) -> None:
    rep = build_report(study)
    ev = rep.model.evaluation
    assert ev is not None and ev.reference == "grpo"
    names = [(g.checkpoint, g.split) for g in ev.groups]
    assert names == [("final", "in"), ("final", "out"), ("best", "in")]
    g = ev.groups[0]
    grpo, gigpo = (_bits(FINAL[a]) for a in ("grpo", "gigpo"))
    x, y = gigpo.mean(axis=(1, 2)), grpo.mean(axis=(1, 2))
    arm = {a.arm: a for a in g.arms}
    assert arm["gigpo"].mean == pytest.approx(x.mean()) and arm["gigpo"].n_seeds == 4
    t = sps.t.ppf(0.975, 3)
    assert arm["grpo"].ci_t[0] == pytest.approx(y.mean() - t * y.std(ddof=1) / 2)
    assert arm["grpo"].training is not None  # the training-time evaluation at step 30
    (c,) = g.comparisons
    ref = sps.ttest_rel(x, y)
    assert c.diff == pytest.approx((x - y).mean()) and c.p == pytest.approx(ref.pvalue)
    assert c.p_holm == pytest.approx(ref.pvalue) and c.n_pairs == 4
    assert c.verdict == ("better" if ref.pvalue < 0.05 else "unresolved")
    # the decompositions: the arm's outcomes, and the comparison's game-level differences
    v = {(r.arm, r.reference): r for r in g.variance}
    d = decompose_crossed(grpo)
    assert v[("grpo", None)].seed == pytest.approx(d.seed)
    assert v[("grpo", None)].episode == pytest.approx(d.episode)
    assert v[("grpo", None)].halfwidth == pytest.approx(t * y.std(ddof=1) / 2)
    dd = decompose_crossed(gigpo - grpo)
    assert v[("gigpo", "grpo")].episode == pytest.approx(dd.episode)
    assert v[("gigpo", "grpo")].halfwidth == pytest.approx(dd.projection.now)


def test_the_best_checkpoints_selection_bias_is_measured(study: Path) -> None:
    ev = build_report(study).model.evaluation
    assert ev is not None
    sel = {r.arm: r for r in ev.selection}
    for arm in ("grpo", "gigpo"):
        rescore = _bits(BEST[arm]).mean(axis=(1, 2))
        assert sel[arm].training == pytest.approx(TRAINING_AT_BEST[arm])
        assert sel[arm].rescore == pytest.approx(rescore.mean())
        assert sel[arm].bias == pytest.approx(TRAINING_AT_BEST[arm] - rescore.mean())
        assert sel[arm].ci[0] is not None and sel[arm].ci[0] < sel[arm].bias < sel[arm].ci[1]


def test_the_training_window_is_decomposed_with_its_binomial_noise(study: Path) -> None:
    rep = build_report(study)
    ev = rep.model.evaluation
    assert ev is not None
    w = {(r.arm, r.reference): r for r in ev.window}
    runs = {k: r for k, r in rep.runs.items() if k[0] == "grpo"}
    vals = np.array([r.series["val/success_rate"][1][r.series["val/success_rate"][0] >= 20]
                     for _, r in sorted(runs.items())])
    d = decompose_window(vals, vals * (1 - vals) / (24 - 1))
    assert w[("grpo", None)].episode == pytest.approx(d.episode)
    assert w[("grpo", None)].seed == pytest.approx(d.seed)
    assert ("gigpo", "grpo") in w


def test_every_format_carries_the_evaluations(study: Path) -> None:
    model = build_report(study).model
    md = to_markdown(model)
    for title in ("checkpoint evaluation 1: the final checkpoint, in distribution",
                  "checkpoint evaluation 2: the final checkpoint, out of distribution",
                  "checkpoint evaluation 3: the best checkpoint, in distribution",
                  "the best checkpoint: training-time score against its re-score",
                  "where the uncertainty comes from: seeds or episodes"):
        assert title in md
    tex = to_latex(model)
    assert tex.isascii() and "ccpo-eval\\_variance" not in tex and "tab:ccpo-eval_1" in tex
    doc = json.loads(to_json(model))["evaluation"]
    assert [g["checkpoint"] for g in doc["groups"]] == ["final", "final", "best"]
    assert doc["groups"][0]["arms"][0]["per_seed"] == {"0": 0.5, "1": 1 / 3, "2": 2 / 3,
                                                       "3": 1 / 3}
    tables = csv_tables(model)
    rows = list(csv.DictReader(io.StringIO(tables["eval_arms"])))
    assert len(rows) == 6 and rows[0]["checkpoint"] == "final" and rows[0]["ci_t_low"]
    assert len(list(csv.DictReader(io.StringIO(tables["eval_comparisons"])))) == 3
    var = list(csv.DictReader(io.StringIO(tables["eval_variance"])))
    assert {r["evaluation"] for r in var} >= {"final, in, 6 games x 1", "training window"}
    assert len(list(csv.DictReader(io.StringIO(tables["eval_selection"])))) == 2


def test_a_run_on_another_draw_and_unusable_files_are_left_out_and_named(study: Path) -> None:
    rd = RunDir(study / "gigpo" / "seed-2")
    run_id = rd.read_run()["run_id"]
    write_eval(rd, run_id, 30, "in", "111111", games=_games("in")[::-1])  # another order
    bad = rd.path / "evals" / "in-step000010-n6-r1-t0.4-00000000.jsonl"
    bad.write_text('{"eval": 1}\n')
    other = write_eval(RunDir(study / "gigpo" / "seed-3"), "x" * 64, 10, "in", "000000")
    rep = build_report(study).model
    ev = rep.evaluation
    assert ev is not None
    g = ev.groups[0]
    assert {a.arm: a.n_seeds for a in g.arms} == {"grpo": 4, "gigpo": 3}
    assert any("gigpo seed 2: its game list differs from its siblings'" in x for x in g.left_out)
    notes = [n for n in rep.notes if n.arm == "gigpo"]
    assert any(n.file == str(bad) and n.line == 1 and "evaluation not used" in n.text
               for n in notes)
    assert any(n.file == str(other) and "evaluates run xxxxxxxxxxxx, not this one" in n.text
               for n in notes)


@pytest.mark.slow
def test_mlflow_gets_the_tables_on_the_parent_and_each_seed_on_its_child(
        study: Path) -> None:
    from mlflow.tracking import MlflowClient

    from ccpo_lab.tracking.mlflow_sync import sync_sweep

    model = build_report(study).model
    res = sync_sweep(study, report=model)
    client = MlflowClient(res.uri)
    parent = client.get_run(res.parent_run_id).data.metrics
    g = model.evaluation.groups[0]  # type: ignore[union-attr]
    assert parent["eval/in/final/gigpo/mean"] == pytest.approx(g.arms[1].mean)
    assert parent["eval/in/final/gigpo_vs_grpo/p_holm"] == pytest.approx(g.comparisons[0].p_holm)
    assert "eval/in/final/grpo/halfwidth_more_seed" in parent
    assert "eval/training_window/grpo/var_episode" in parent
    assert parent["eval/selection/grpo/bias"] == pytest.approx(model.evaluation.selection[0].bias)
    children = client.search_runs([res.experiment_id], "tags.`ccpo_lab.kind` = 'run'")
    by = {(c.data.tags["ccpo_lab.arm"], int(c.data.tags["ccpo_lab.seed"])): c for c in children}
    history = client.get_metric_history(by[("gigpo", 1)].info.run_id, "eval/in/final/success_rate")
    assert [(m.step, m.value) for m in history] == [(30, pytest.approx(4 / 6))]
    best = client.get_metric_history(by[("gigpo", 1)].info.run_id, "eval/in/best/success_rate")
    assert [m.step for m in best] == [25]  # seed 1's best is step 25
    sync_sweep(study, report=model)  # again: nothing doubles
    again = client.get_metric_history(by[("gigpo", 1)].info.run_id, "eval/in/final/success_rate")
    assert len(again) == 1
