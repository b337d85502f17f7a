"""The training loop's fast paths change nothing: a short sweep that learns writes the same
``metrics.jsonl`` and step-1 rollouts, byte for byte, with them and with the plain code.

The plain path is the code they replace, selected here by patching: the policy recomputes
the action tokens' overlap flags from every (sub-)batch it scores and finds the distinct
action rows of each sub-batch itself (not the ranks :func:`collate` numbered), the
rollouts score every lockstep batch (no reuse of an identical batch's logits),
gradient-free passes run under ``torch.no_grad``, engines load without the disk cache,
every episode runs on a fast-downward library copy of its own (none is passed on to
another engine's episode), and every run clones its own warm start (none is loaded from
another run's).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from ccpo_lab.backends.local import speedups, warmstart
from ccpo_lab.backends.local import trainer as trainer_mod
from ccpo_lab.backends.local.policy import ActionScorer, PolicyInput, token_overlap
from ccpo_lab.runs.cost import MEASURED_PREFIXES
from ccpo_lab.runs.metrics import read_metrics

pytestmark = pytest.mark.slow

OVERRIDES = ["arms=[gigpo,ccpo-return-hard]", "analysis.reference=gigpo", "seeds=[0]",
             "protocol.total_steps=4", "protocol.group_size=3", "protocol.test_freq=2",
             "protocol.max_steps=8", "backend.local.n_receptacles=3",
             "backend.local.n_distractors=0", "backend.local.closed_fraction=0.0",
             "backend.local.max_plan_len=8", "backend.local.warmstart_demos=4",
             "backend.local.warmstart_epochs=30"]


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    real_forward, real_play = ActionScorer.forward, trainer_mod.play

    def forward(self: ActionScorer, batch: PolicyInput) -> tuple[torch.Tensor, torch.Tensor]:
        flags = token_overlap(batch.action_ids, batch.prompt_ids, batch.segments)
        return real_forward(self, dataclasses.replace(batch, token_flags=flags,
                                                      action_row=None))

    def play(*args: object, logits_cache: object = None, **kwargs: object) -> object:
        return real_play(*args, **kwargs)

    def no_disk_cache(directory: Path | None) -> None:
        return None

    def fresh_lib() -> object:
        return speedups._ORIGINALS["load_lib"][2]()

    monkeypatch.setattr(ActionScorer, "forward", forward)
    monkeypatch.setattr(speedups, "acquire_lib", fresh_lib)
    monkeypatch.setattr(speedups, "release_lib", lambda lib: None)
    monkeypatch.setattr(warmstart, "_load", lambda path: None)
    monkeypatch.setattr(warmstart, "_store", lambda path, data: None)
    monkeypatch.setattr(trainer_mod, "play", play)
    monkeypatch.setattr(torch, "inference_mode", torch.no_grad)
    monkeypatch.setattr("ccpo_lab.backends.local.speedups.use_disk_cache", no_disk_cache)


def _sweep(workdir: Path, results: Path, games: Path) -> dict[str, bytes]:
    from ccpo_lab.backends.local.runner import train
    from ccpo_lab.config.sweep import load_sweep
    from ccpo_lab.runs.layout import RunDir, init_run_dir

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    [*OVERRIDES, f"backend.local.games_cache={games}"])
    out = {}
    for run in sw.runs:
        rd = RunDir(sw.sweep_dir(results) / run.arm / f"seed-{run.seed}")
        init_run_dir(rd, run)
        train(run, rd)
        # every value the training computes (timings and memory measure the machine)
        out[f"{run.arm}/metrics.jsonl"] = json.dumps(
            [(r["step"], {k: v for k, v in r["data"].items()
                          if not k.startswith(MEASURED_PREFIXES)})
             for r in read_metrics(rd.metrics)]).encode()
        for f in sorted(rd.rollouts.iterdir()):
            out[f"{run.arm}/{f.name}"] = f.read_bytes()
    return out


def test_fast_paths_write_the_same_bytes_as_the_plain_code(
        workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    games = tmp_path / "games"
    fast = _sweep(workdir, tmp_path / "fast", games)
    assert any((games / d / trainer_mod.ENGINE_CACHE).is_dir() for d in
               (p.name for p in games.iterdir()))
    # one warm start for the seed: the second arm loaded the first one's
    shared = list(games.glob(f"*/{trainer_mod.WARMSTART_CACHE}/warmstart-*.pt"))
    assert len(shared) == 1
    with monkeypatch.context() as m:
        _plain(m)
        plain = _sweep(workdir, tmp_path / "plain", games)
    assert sorted(fast) == sorted(plain) and len(fast) == 4
    assert speedups._FREE_LIBS  # the fast sweep passed library copies on
    for name in fast:
        assert fast[name] == plain[name], name
    # the comparison means something only if the policy learned on the way
    for name in ("gigpo/metrics.jsonl", "ccpo-return-hard/metrics.jsonl"):
        rows = read_metrics(Path(tmp_path / "fast" / "smoke" / name.split("/")[0] / "seed-0"
                                 / "metrics.jsonl"))
        assert any(r["data"].get("actor/grad_norm", 0.0) > 0 for r in rows[1:]), name
        assert any(r["data"].get("episode/success_rate", 0.0) > 0 for r in rows[1:]), name
