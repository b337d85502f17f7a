"""``ccpo-lab card --weights``: the upload-ready folder (issue 34).

The hand-computed study (tests/report/conftest.py) gets real local-backend checkpoints:
a real :class:`ActionScorer`'s state saved by the backend's own ``save_checkpoint`` in the
runner's layout (``{"trainer": {"policy": ...}}``), so the choice rule can be checked
against known per-seed means (grpo: .5, .625, .75; arm mean .625). The verl layout is
built with a tiny transformers model saved on the spot. The card is parsed with
``huggingface_hub``'s own parsers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ccpo_lab.backends.local.checkpoint import checkpoint_path, save_best, save_checkpoint
from ccpo_lab.backends.local.policy import ActionScorer, PolicyShape
from ccpo_lab.cli.main import main
from ccpo_lab.publish.choose import RULE, choose
from ccpo_lab.publish.folder import card_weights, write_folder
from ccpo_lab.publish.push import push_plan
from ccpo_lab.report.analysis import build_report
from ccpo_lab.report.card import gather_card, render_card
from ccpo_lab.runs.layout import RunDir
from tests.conftest import snapshot

SHAPE = PolicyShape(64, 4, 8, "conv")


def _state(seed: int) -> dict:
    pol = ActionScorer(SHAPE, torch.Generator().manual_seed(seed))
    return {"run_id": "x", "trainer": {"step": 0, "policy": pol.state_dict()}}


def _complete(study: Path, arm: str, seed: int, steps: tuple[int, ...] = (25, 30),
              best: int | None = 20) -> RunDir:
    """Seed ``seed`` of ``arm`` completed at step 30 with checkpoints at ``steps`` (the
    backend keeps the newest two) and the best evaluation's at ``best``."""
    rd = RunDir(study / arm / f"seed-{seed}")
    for i, step in enumerate(steps):
        save_checkpoint(rd.checkpoints, step, _state(100 * seed + i))
    if best is not None:
        save_best(rd.checkpoints, best, 0.875, "val/success_rate", _state(100 * seed + 99))
    rd.state_json.write_text(json.dumps({"state": "completed", "step": 30,
                                         "total_steps": 30}), encoding="utf-8")
    return rd


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _card(study: Path, out: Path, arm: str = "grpo", *extra: str) -> int:
    return main(["card", str(study), "--arm", arm, "--out", str(out), "--weights", *extra])


def test_the_folder_holds_the_representative_seed_s_final_weights(study: Path,
                                                                  tmp_path: Path) -> None:
    from safetensors.torch import load_file

    rds = {k: _complete(study, "grpo", k) for k in (0, 1, 2)}
    out = tmp_path / "pub"
    assert _card(study, out) == 0
    doc = json.loads((out / "manifest.json").read_text())
    # seed 1's window mean (.625) is the arm's; not seed 2, whose evaluations were best
    assert (doc["arm"], doc["seed"], doc["main"]["step"], doc["main"]["final"]) == \
        ("grpo", 1, 30, True)
    assert doc["run_id"] == rds[1].read_run()["run_id"] and doc["rule"] == RULE
    assert doc["why"] == ("seed 1's window mean 62.5% is the closest to the arm's 62.5% "
                          "among 3 seed(s) with a final checkpoint")
    assert [(r["name"], r["role"], r["folder"]) for r in doc["revisions"]] == [
        ("step_20", "best", "revisions/step_20"), ("step_25", "kept", "revisions/step_25"),
        ("step_30", "final", ".")]
    # every file but the manifest, with its size and sha256
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*")
               if p.is_file() and p.name != "manifest.json"}
    assert {f["path"] for f in doc["files"]} == on_disk
    for f in doc["files"]:
        assert f["sha256"] == _sha(out / f["path"]) and f["size"] == (out / f["path"]).stat(
        ).st_size
    # the weights are the checkpoint's policy, and load into the policy class by its config
    want = torch.load(checkpoint_path(rds[1].checkpoints, 30), weights_only=True)
    got = load_file(out / "model.safetensors")
    assert got.keys() == want["trainer"]["policy"].keys()
    assert all(torch.equal(got[k], v) for k, v in want["trainer"]["policy"].items())
    config = json.loads((out / "policy_config.json").read_text())
    assert config["loadable_with_transformers"] is False and not (out / "config.json").exists()
    ActionScorer(PolicyShape(**{**config["shape"], "vocab_size": 64, "embed_dim": 4,
                                "hidden_dim": 8}),
                 torch.Generator()).load_state_dict(got, strict=True)
    best = load_file(out / "revisions" / "step_20" / "model.safetensors")
    assert not all(torch.equal(best[k], got[k]) for k in got)


def test_the_card_of_the_folder_parses_and_says_what_the_weights_are(study: Path,
                                                                    tmp_path: Path) -> None:
    from huggingface_hub import ModelCard, ModelCardData
    from huggingface_hub.repocard import metadata_load

    for k in (0, 1, 2):
        _complete(study, "grpo", k)
    out = tmp_path / "pub"
    assert _card(study, out, "grpo", "--license", "apache-2.0") == 0
    card = ModelCard.load(out / "README.md")
    assert isinstance(card.data, ModelCardData) and card.data.license == "apache-2.0"
    meta = metadata_load(out / "README.md")
    assert meta is not None and "ccpo-lab" in meta["tags"] and "library_name" not in meta
    weights = card.text.split("\n## Weights\n", 1)[1].split("\n## ", 1)[0]
    assert "seed 1, step 30" in weights and "**not a transformers model**" in weights
    assert RULE in weights and "- `step_20`: step 20, kept because it had the best" in weights
    # the card's results are the card's without weights (the report's numbers)
    assert main(["card", str(study), "--arm", "grpo", "--out", str(tmp_path / "plain"),
                 "--license", "apache-2.0"]) == 0
    plain = (tmp_path / "plain" / "README.md").read_text()
    assert plain.split("\n## Status\n")[0] == card.content.split("\n## Status\n")[0]


def test_an_interim_arm_publishes_its_newest_kept_checkpoint_marked_interim(
        study: Path, tmp_path: Path) -> None:
    rd = RunDir(study / "grpo" / "seed-2")
    save_checkpoint(rd.checkpoints, 25, _state(7))
    save_best(rd.checkpoints, 30, 0.75, "val/success_rate", _state(8))  # best, not main
    rep = build_report(study)
    choice = choose(rep, "grpo", "local")
    assert (choice.seed, choice.main.step, choice.final) == (2, 25, False)
    out = tmp_path / "pub"
    assert _card(study, out) == 0
    doc = json.loads((out / "manifest.json").read_text())
    assert doc["main"]["final"] is False and doc["main"]["step"] == 25
    assert "interim: no seed has finished" in (out / "README.md").read_text()


def test_an_earlier_folder_is_replaced_and_a_foreign_directory_refused(
        study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _complete(study, "grpo", 1)
    out = tmp_path / "pub"
    assert _card(study, out) == 0
    assert _card(study, out) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me\n")
    before = snapshot(foreign)
    capsys.readouterr()
    assert _card(study, foreign) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds other files" in err[0] and str(foreign) in err[0]
    assert snapshot(foreign) == before


def test_a_damaged_checkpoint_leaves_nothing_half_written(study: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    rd = _complete(study, "grpo", 1)
    damaged = checkpoint_path(rd.checkpoints, 25)
    damaged.write_bytes(damaged.read_bytes()[:100])
    out = tmp_path / "new" / "pub"
    assert _card(study, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read this checkpoint" in err[0] and str(damaged) in err[0]
    assert not (tmp_path / "new").exists()  # no folder, no stage, no parent made for it


def test_no_card_for_an_arm_with_no_finished_evaluation(study: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    for seed in range(3):
        (study / "ccpo-return-hard" / f"seed-{seed}" / "metrics.jsonl").unlink(missing_ok=True)
    assert _card(study, tmp_path / "pub", "ccpo-return-hard") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished evaluation" in err[0] and "--arm" in err[0]
    assert not (tmp_path / "pub").exists()


def test_an_arm_without_kept_weights_exits_2(study: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _card(study, tmp_path / "pub", "gigpo") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "keeps weights that can be published" in err[0]
    assert not (tmp_path / "pub").exists()


def _hf_model(dest: Path, seed: int) -> Path:
    """A tiny GPT-2 saved by transformers (config.json, model.safetensors)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=32,
                               n_positions=16)).save_pretrained(dest)
    return dest


def test_a_verl_run_publishes_its_merged_hugging_face_weights(study: Path,
                                                              tmp_path: Path) -> None:
    """verl's layout: ``hf_model/final`` and ``hf_model/best`` (the merger's), a retained
    checkpoint with weights in ``actor/huggingface`` and one of FSDP shards only."""
    from transformers import AutoModelForCausalLM

    for seed in (0, 1, 2):
        rd = RunDir(study / "grpo" / f"seed-{seed}")
        _hf_model(rd.path / "hf_model" / "final", seed)
        rd.state_json.write_text(json.dumps({"state": "completed", "step": 30,
                                             "total_steps": 30}), encoding="utf-8")
    rd = RunDir(study / "grpo" / "seed-1")
    _hf_model(rd.path / "hf_model" / "best", 11)
    (rd.checkpoints / "best").mkdir(parents=True)
    (rd.checkpoints / "best" / "best.json").write_text(json.dumps({"step": 20, "value": .75}))
    _hf_model(rd.checkpoints / "global_step_25" / "actor" / "huggingface", 12)
    shards = rd.checkpoints / "global_step_30" / "actor"
    (shards / "huggingface").mkdir(parents=True)
    (shards / "huggingface" / "config.json").write_text("{}")
    (shards / "model_world_size_1_rank_0.pt").write_bytes(b"shard")
    rep = build_report(study)
    choice = choose(rep, "grpo", "verl")
    assert (choice.seed, choice.main.step, choice.main.path) == (1, 30, rd.path / "hf_model"
                                                                 / "final")
    assert [(s.step, s.role) for s in choice.revisions] == [(20, "best"), (25, "kept"),
                                                            (30, "final")]
    inputs = gather_card(rep, "grpo")
    from dataclasses import replace

    text = render_card(replace(inputs, weights=card_weights(choice, rd.read_run())))
    out = tmp_path / "pub"
    doc = write_folder(out, text, choice, rd.read_config(), rd.read_run(), "study")
    assert doc["loadable_with_transformers"] is True
    assert "library_name: transformers" in (out / "README.md").read_text()
    main_model = AutoModelForCausalLM.from_pretrained(out)
    want = AutoModelForCausalLM.from_pretrained(rd.path / "hf_model" / "final")
    assert all(torch.equal(a, b) for a, b in zip(main_model.state_dict().values(),
                                                 want.state_dict().values(), strict=True))
    AutoModelForCausalLM.from_pretrained(out / "revisions" / "step_25")
    assert [p["name"] for p in doc["revisions"]] == ["step_20", "step_25", "step_30"]


def test_the_push_plan_uploads_main_then_one_branch_per_revision() -> None:
    doc = {"revisions": [{"name": "step_20", "folder": "revisions/step_20"},
                         {"name": "step_30", "folder": "."}]}
    assert [(s.op, s.revision, s.folder) for s in push_plan(doc)] == [
        ("create_repo", "main", None), ("upload_folder", "main", "."),
        ("create_branch", "step_20", None), ("upload_folder", "step_20", "revisions/step_20"),
        ("upload_card", "step_20", "."), ("create_branch", "step_30", None),
        ("upload_folder", "step_30", ".")]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from ccpo_lab.cli.main import "
                           "main; sys.exit(main(sys.argv[1:]))", *args], env=env, text=True,
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL,
                          check=False)


def test_a_push_without_a_token_exits_2_before_anything(study: Path, tmp_path: Path) -> None:
    _complete(study, "grpo", 1)
    home = tmp_path / "hf-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env |= {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "pub"
    before = snapshot(study)
    r = _cli(["card", str(study), "--arm", "grpo", "--out", str(out), "--push",
              "someone/ccpo-grpo"], env)
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "no Hugging Face token" in err[0] and "--push" in err[0]
    assert not out.exists() and snapshot(study) == before
    r = _cli(["card", str(study), "--arm", "grpo", "--out", str(out), "--push", "a/b/c"],
             env | {"HF_TOKEN": "hf_test"})
    assert r.returncode == 2 and "not a Hugging Face repository id" in r.stderr
    assert not out.exists()


def test_a_push_that_cannot_reach_the_hub_leaves_the_folder_complete(study: Path,
                                                                     tmp_path: Path) -> None:
    """With a token but the Hub unreachable (``HF_HUB_OFFLINE=1``: huggingface_hub's own
    refusal), the folder is written whole and the push fails as one line."""
    _complete(study, "grpo", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env |= {"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_OFFLINE": "1",
            "HF_TOKEN": "hf_test"}
    out = tmp_path / "pub"
    r = _cli(["card", str(study), "--arm", "grpo", "--out", str(out), "--push",
              "someone/ccpo-grpo"], env)
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "push to someone/ccpo-grpo failed" in err[0]
    assert "the folder is complete" in err[0]
    doc = json.loads((out / "manifest.json").read_text())
    assert all(_sha(out / f["path"]) == f["sha256"] for f in doc["files"])
