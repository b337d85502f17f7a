"""``ccpo-lab evaluate --reference`` on the CPU backend: the real engine, tiny Hugging Face
models built on the spot, read offline (``HF_HUB_OFFLINE=1``) from a Hub cache layout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.launch.submit import launch_sweep
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.export import csv_tables
from ccpo_lab.runs.evals import eval_files, read_eval_file
from ccpo_lab.runs.layout import RunDir, load_run_config
from ccpo_lab.runs.references import reference_dirs
from ccpo_lab.stats.crossed import compare_crossed
from ccpo_lab.tracking.evaluation import parent_metrics
from tests.conftest import snapshot
from tests.evaluation.tiny_hf import save_tiny_model, to_hub_cache

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
EASY = ["protocol.max_steps=16", "backend.local.n_receptacles=3",
        "backend.local.n_distractors=0", "backend.local.closed_fraction=0.0",
        "backend.local.n_eval_games=8",
        "protocol.val_batch_size=8"]
"""Small rooms, short plans and 16 turns: episodes of an untrained policy sometimes win,
so their lengths and outcomes tell policies and sampling streams apart."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke sweep (2 arms x 2 seeds), trained inline, and a tiny model folder."""
    root = tmp_path_factory.mktemp("refs")
    sw = load_sweep(REPO / "sweeps" / "smoke.yaml", ["launcher=inline", *EASY])
    assert launch_sweep(sw, root / "results") == 0
    save_tiny_model(root / "tiny-agent")
    return sw.sweep_dir(root / "results")


@pytest.fixture
def sweep(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the sweep; the tiny model in an offline Hub cache as acme/tiny-agent."""
    dest = tmp_path / "results"
    shutil.copytree(trained.parent / ".games", dest / ".games")
    shutil.copytree(trained, dest / trained.name)
    shutil.copytree(trained.parent.parent / "tiny-agent", tmp_path / "tiny-agent")
    to_hub_cache(tmp_path / "tiny-agent", tmp_path / "hub", "acme/tiny-agent", COMMIT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return dest / trained.name


def evaluate(sweep: Path, *args: str) -> int:
    return main(["evaluate", str(sweep), "--launcher", "inline", "--wait", *args])


def episodes(path: Path) -> list[str]:
    """An evaluation file's episode lines (its header differs between policies)."""
    return path.read_text().splitlines()[1:]


def ref_files(sweep: Path, prefix: str) -> dict[tuple[int, str], Path]:
    return {(int(rd.seed or 0), p.name): p for rd in reference_dirs(sweep)
            if rd.path.parent.name.startswith(prefix) for p in eval_files(rd)}


def test_base_is_the_policy_each_seed_starts_from_on_the_same_draw(sweep: Path) -> None:
    # Give grpo seed 0's step-2 checkpoint the weights of a fresh start (warm start
    # included): its re-score and the base reference's must be the same episodes, bit
    # for bit, since both play seed 0's games with seed 0's sampling streams.
    from ccpo_lab.backends.local.runner import load_games
    from ccpo_lab.backends.local.trainer import Trainer

    rd = RunDir(sweep / "grpo" / "seed-0")
    run = load_run_config(rd)
    fresh = Trainer(run, load_games(run, rd))
    fresh.initialise()
    fresh.step = 2
    path = rd.checkpoints / "step-000002.pt"
    state = torch.load(path, weights_only=False)
    state["trainer"] = fresh.state_dict()
    torch.save(state, path)
    args = ["--checkpoint", "2", "--arm", "grpo", "--repeats", "2", "--temperature", "1.5",
            "--split", "in"]
    assert evaluate(sweep, *args, "--reference", "base") == 0
    (mine,) = eval_files(rd)
    refs = ref_files(sweep, "_ref-base-")
    name = mine.name.replace("-step000002-", "-step000000-")  # the same setting and draw
    assert sorted(refs) == [(0, name), (1, name)]
    assert episodes(refs[(0, name)]) == episodes(mine)
    assert episodes(refs[(1, name)]) != episodes(mine)  # seed 1: its own start and streams
    ev = read_eval_file(refs[(0, name)])
    assert ev.header["checkpoint"]["weights"].startswith("base: seed 0")


def test_a_folder_and_its_hub_snapshot_play_alike_and_are_never_redone(
        sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--split", "in", "--temperature", "1.0", "--repeats", "2"]
    assert evaluate(sweep, *args, "--reference", str(tmp_path / "tiny-agent"),
                    "--reference", "acme/tiny-agent") == 0
    folder, hub = ref_files(sweep, "_ref-tiny-agent-"), ref_files(sweep, "_ref-acme-tiny")
    assert len(folder) == len(hub) == 2
    for (seed, name), p in folder.items():
        assert episodes(hub[(seed, name)]) == episodes(p)  # the same weights, streams
        assert read_eval_file(p).success.shape == (2, 8)
    doc = json.loads(next(iter(hub.values())).parent.parent.joinpath(
        "reference.json").read_text())
    assert doc["commit"] == COMMIT and doc["revision"] == "main"
    # the arms' files: the same draw
    grpo = {read_eval_file(p).draw_id for p in eval_files(RunDir(sweep / "grpo" / "seed-0"))}
    assert {read_eval_file(p).draw_id for p in folder.values()} == grpo
    capsys.readouterr()
    before = snapshot(sweep)
    assert evaluate(sweep, *args, "--reference", "acme/tiny-agent@main") == 0
    assert "0 evaluation job(s) to submit" in capsys.readouterr().out
    assert snapshot(sweep) == before
    assert main(["status", str(sweep)]) == 0  # the reference's jobs are listed and done
    out = capsys.readouterr().out
    assert out.count("_ref-acme-tiny-agent-") == 2 and out.count("_ref-tiny-agent-") == 2


def test_the_report_compares_each_arm_with_each_reference_by_game(sweep: Path) -> None:
    assert evaluate(sweep, "--split", "in", "--temperature", "1.5", "--reference", "base",
                    "--reference", "acme/tiny-agent") == 0
    ev = build_report(sweep).model.evaluation
    assert ev is not None
    g = next(g for g in ev.groups if g.checkpoint == "final")
    assert {r.reference for r in g.references} == {"base", "acme/tiny-agent"}
    comps = {(c.arm, c.reference): c for c in g.reference_comparisons}
    assert len(comps) == 4
    for (arm, label), c in comps.items():
        prefix = "_ref-base-" if label == "base" else "_ref-acme-tiny"
        refs = ref_files(sweep, prefix)
        seeds = (0, 1)
        x = [e.success.mean(axis=0) for k in seeds
             for e in map(read_eval_file, eval_files(RunDir(sweep / arm / f"seed-{k}")))
             if e.step == 4]
        y = [read_eval_file(p).success.mean(axis=0) for (k, _), p in sorted(refs.items())]
        want = compare_crossed(np.stack(x), np.stack(y))
        assert c.diff == pytest.approx(want.diff) and c.n_seeds == 2 and c.n_games == 8
        assert c.p == pytest.approx(want.p_value)
    # every format carries them: CSV, MLflow's keys on the parent run, Markdown
    model = build_report(sweep).model
    tables = csv_tables(model)
    assert model.evaluation is not None
    n = sum(len(g.reference_comparisons) for g in model.evaluation.groups)
    assert n >= 4 and tables["eval_reference_comparisons"].count("\n") == 1 + n
    keys = parent_metrics(model)
    c = comps[("grpo", "base")]
    assert keys["eval/in/final/grpo_vs_ref_base/diff"] == pytest.approx(c.diff)
    assert keys["eval/in/final/ref_base/n_seeds"] == 2
    assert main(["report", str(sweep)]) == 0


def test_bad_references_are_one_line_and_write_nothing(
        sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(sweep)
    (tmp_path / "empty").mkdir()
    cases = [("acme/nothing", "not in the offline Hugging Face cache"),
             ("acme/tiny-agent@v9", "no snapshot of revision 'v9'"),
             (str(tmp_path / "empty"), "no config.json"),
             ("./missing-folder", "no such folder")]
    for value, why in cases:
        assert main(["evaluate", str(sweep), "--launcher", "inline", "--reference",
                     value]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err and "--reference" in err, err
    assert snapshot(sweep) == before


def test_a_reference_folder_holding_another_policy_is_refused(
        sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate(sweep, "--split", "in", "--seed", "0", "--arm", "grpo",
                    "--reference", str(tmp_path / "tiny-agent")) == 0
    (ref,) = [rd for rd in reference_dirs(sweep)]
    doc = json.loads((ref.path / "reference.json").read_text())
    doc["identity"] = "f" * 64  # as if another folder of that name had been evaluated
    (ref.path / "reference.json").write_text(json.dumps(doc))
    before = snapshot(sweep)
    assert main(["evaluate", str(sweep), "--launcher", "inline", "--split", "in",
                 "--seed", "0", "--arm", "grpo", "--reference",
                 str(tmp_path / "tiny-agent")]) == 2
    assert "holds another policy" in capsys.readouterr().err
    assert snapshot(sweep) == before
