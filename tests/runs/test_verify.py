"""``ccpo-lab verify``: step-1 fingerprints per seed, first divergence, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.runs.verify import step1_agreement, verify_sweep
from tests.report.builders import episodes, init_sweep, sweep_file, write_step1


@pytest.fixture
def sweep(tmp_path: Path) -> tuple[Path, dict]:
    p = sweep_file(tmp_path, arms=("grpo", "gigpo", "ccpo-return-hard"), seeds=(0, 1))
    _, sweep_dir, rds = init_sweep(p, tmp_path / "results")
    return sweep_dir, rds


def test_identical(sweep: tuple[Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir, rds = sweep
    fps = {key: write_step1(rd, episodes()) for key, rd in rds.items()}
    assert len(set(fps.values())) == 1
    assert main(["verify", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert f"seed 0: identical (3 arms, fingerprint {fps[('grpo', 0)][:12]})" in out
    assert "seed 1: identical" in out and "verified for all 2 seeds" in out


def test_difference_shows_first_divergence(sweep: tuple[Path, dict],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir, rds = sweep
    for (arm, seed), rd in rds.items():
        changed = (arm, seed) == ("gigpo", 1)
        write_step1(rd, episodes(change=(2, 1, "take key 1") if changed else None))
    assert main(["verify", str(sweep_dir)]) == 1
    cap = capsys.readouterr()
    assert "seed 0: identical" in cap.out
    assert "seed 1: DIFFERENT" in cap.out
    assert "gigpo vs grpo: first divergence at episode 2 (task t02, rollout 0), turn 1" in cap.out
    lines = cap.out.splitlines()
    i = next(k for k, ln in enumerate(lines) if "first divergence" in ln)
    assert lines[i + 1].split() == ["grpo:", "obs:", "task", "2:", "you", "see", "a", "desk"]
    assert lines[i + 2].split() == ["action:", "go", "to", "desk", "1"]
    assert lines[i + 3].split()[:2] == ["gigpo:", "obs:"]
    assert lines[i + 4].split() == ["action:", "take", "key", "1"]
    assert "NOT verified for 1 of 2 seeds (seed 1)" in cap.err


def test_missing_fingerprint(sweep: tuple[Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir, rds = sweep
    for key, rd in rds.items():
        if key != ("ccpo-return-hard", 0):
            write_step1(rd, episodes())
    assert main(["verify", str(sweep_dir)]) == 1
    out = capsys.readouterr().out
    assert "seed 0: NOT VERIFIED (2 of 3 arms agree)" in out
    assert "missing fingerprint: ccpo-return-hard" in out
    assert "seed 1: identical" in out


def test_rollouts_missing_for_divergence(sweep: tuple[Path, dict]) -> None:
    sweep_dir, rds = sweep
    for (arm, _seed), rd in rds.items():
        write_step1(rd, episodes(change=(0, 0, "x") if arm == "gigpo" else None))
    (rds[("gigpo", 0)].rollouts / "step-000001.jsonl").unlink()
    checks = verify_sweep(sweep_dir)
    assert [c.status for c in checks] == ["different", "different"]
    assert "step-1 rollouts not found" in str(checks[0].divergences["gigpo"])
    assert checks[1].divergences["gigpo"].turn == 0  # type: ignore[union-attr]


def test_no_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path)]) == 2
    assert "no runs found" in capsys.readouterr().err


@pytest.mark.parametrize(("x", "y", "status", "detail"), [
    ({0: "a", 1: "b"}, {0: "a", 1: "b"}, "verified", "step-1 rollouts identical"),
    ({0: "a", 1: "c"}, {0: "a", 1: "b"}, "different", "step-1 rollouts differ (seed 1)"),
    ({0: "a", 1: None}, {0: "a", 1: "b"}, "not verified", "no step-1 fingerprint (seed 1)"),
    ({3: "a"}, {0: "a"}, "not verified", "no seed in common: step-1 identity not verifiable"),
])
def test_step1_agreement(x: dict, y: dict, status: str, detail: str) -> None:
    a = step1_agreement(x, y)
    assert (a.status, a.detail, a.verified) == (status, detail, status == "verified")


def _group_episodes(n_tasks: int, collapsed: set[int], seed_tag: str = "") -> list[dict]:
    """Step-1 episodes of ``n_tasks`` groups of 4 rollouts; groups in ``collapsed`` have
    four identical rollouts (what a per-request vLLM seed shared by a group produces)."""
    eps = []
    for t in range(n_tasks):
        for r in range(4):
            act = "go to desk 1" if t in collapsed else f"go to shelf {r}"
            turns = [{"obs": f"task {t}{seed_tag}: you are in a room", "action": act,
                      "input_hash": f"h{t}"},
                     {"obs": f"task {t}: you arrive", "action": "look",
                      "input_hash": f"h{t}{act}"}]
            eps.append({"task_id": f"task-{t:04d}", "rollout": r, "task_type": "alfworld",
                        "turns": turns})
    return eps


def test_collapsed_groups_fail_verification(sweep: tuple[Path, dict],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Identical step-1 rollouts prove nothing when every group of a seed is degenerate."""
    sweep_dir, rds = sweep
    for (_arm, seed), rd in rds.items():
        write_step1(rd, _group_episodes(4, {0, 1, 2, 3} if seed == 1 else {2}))
    assert main(["verify", str(sweep_dir)]) == 1
    cap = capsys.readouterr()
    assert "seed 0: identical" in cap.out and "3 of 4 step-1 groups distinct" in cap.out
    assert "seed 1: identical" in cap.out and "0 of 4 step-1 groups distinct" in cap.out
    err = [ln for ln in cap.err.splitlines() if ln]
    assert err == ["step-1 groups COLLAPSED for seed 1: 0 of 4 groups have rollouts that "
                   "differ (every rollout of a group sampled the same actions: check the "
                   "rollout seeding)"]
    checks = verify_sweep(sweep_dir)
    assert [(c.groups, c.distinct_groups) for c in checks] == [(4, 3), (4, 0)]


def test_distinct_groups_pass(sweep: tuple[Path, dict],
                              capsys: pytest.CaptureFixture[str]) -> None:
    sweep_dir, rds = sweep
    for (_arm, _seed), rd in rds.items():
        write_step1(rd, _group_episodes(3, set()))
    assert main(["verify", str(sweep_dir)]) == 0
    assert "3 of 3 step-1 groups distinct" in capsys.readouterr().out
