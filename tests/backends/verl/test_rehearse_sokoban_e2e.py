"""End to end on Sokoban: ``ccpo-lab rehearse sweeps/sokoban-verl.yaml`` drives verl-agent's
real trainer (CPU, the pinned checkout) on verl-agent's own text Sokoban (``env.env_name=
Sokoban``, gym_sokoban's rooms), inline; every check passes, and the facts that make arms
comparable are asserted again from the files: step-1 rollouts identical across the arms of
a seed, rooms the same for every arm and different between seeds, groups not collapsed.

Needs ``CCPO_LAB_VERL_AGENT`` and ``CCPO_LAB_TRAINER_PYTHON`` (the environment
``scripts/verl-agent-contract.sh`` builds, with gym and gym_sokoban), as the ALFWorld one
(``test_rehearse_e2e.py``) does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHECKOUT = os.environ.get("CCPO_LAB_VERL_AGENT")
TRAINER = os.environ.get("CCPO_LAB_TRAINER_PYTHON")
REPO = Path(__file__).resolve().parents[3]
ARMS = ("grpo", "ccpo-global-successor")

pytestmark = [
    pytest.mark.verl_agent, pytest.mark.rehearsal, pytest.mark.slow,
    pytest.mark.skipif(not CHECKOUT or not TRAINER, reason="needs CCPO_LAB_VERL_AGENT (a "
                       "verl-agent checkout) and CCPO_LAB_TRAINER_PYTHON (its trainer "
                       "environment): make test sets both when CCPO_LAB_VERL_AGENT is given"),
    pytest.mark.skipif(os.environ.get("CCPO_LAB_IN_TRAINER_ENV") == "1",
                       reason="runs in ccpo-lab's environment, not the trainer's"),
]


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    results = tmp_path_factory.mktemp("sokoban-rehearsal")
    argv = [sys.executable, "-m", "ccpo_lab.cli.main", "rehearse",
            str(REPO / "sweeps" / "sokoban-verl.yaml"), f"arms=[{','.join(ARMS)}]",
            f"backend.verl.verl_agent_path={CHECKOUT}", f"backend.verl.python={TRAINER}",
            "launcher=inline", "--results", str(results)]
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=3 * 3600,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    seconds = time.monotonic() - t0
    print(f"\nccpo-lab rehearse (Sokoban): exit {r.returncode} in {seconds:.0f} s\n{r.stdout}")
    return {"rc": r.returncode, "out": r.stdout, "err": r.stderr,
            "dir": results / "sokoban-verl-rehearsal"}


def test_rehearse_exits_0_with_every_check_passed(rehearsal: dict[str, object]) -> None:
    out = str(rehearsal["out"])
    assert rehearsal["rc"] == 0, out[-3000:] + str(rehearsal["err"])[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith(("PASS", "FAIL"))]
    assert [ln.split()[1] for ln in lines] == ["trainer", "metrics", "advantages", "verify",
                                               "resume", "weights", "report", "sync"], out
    assert all(ln.startswith("PASS") for ln in lines), out


def test_the_runs_played_verl_agents_sokoban(rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    for arm in ARMS:
        run = json.loads((d / arm / "seed-0" / "run.json").read_text())
        argv = " ".join(run["trainer"]["argv"])
        assert "env.env_name=Sokoban" in argv and "env.sokoban.mode=tiny_rgb_array" in argv
        assert "env.alfworld" not in argv
    eps = _jsonl(d / ARMS[0] / "seed-0" / "rollouts" / "step-000001.jsonl")
    first = str(eps[0]["turns"][0]["obs"])  # type: ignore[index]
    assert " P \t" in first or " S \t" in first      # the room as verl-agent's text rows


def test_step1_identical_across_arms_and_rooms_differ_between_seeds(
        rehearsal: dict[str, object]) -> None:
    d = Path(str(rehearsal["dir"]))
    fps = {(a, k): json.loads((d / a / f"seed-{k}" / "run.json").read_text())["step1"]
           ["fingerprint"] for a in ARMS for k in (0, 1)}
    for seed in (0, 1):
        assert fps[(ARMS[0], seed)] == fps[(ARMS[1], seed)]
    assert fps[(ARMS[0], 0)] != fps[(ARMS[0], 1)]
    rooms = {}
    for seed in (0, 1):
        eps = _jsonl(d / ARMS[0] / f"seed-{seed}" / "rollouts" / "step-000001.jsonl")
        by_task: dict[str, set[str]] = {}
        for e in eps:
            by_task.setdefault(str(e["task_id"]), set()).add(json.dumps(e["turns"]))
        assert all(len(v) > 1 for v in by_task.values())      # no group collapsed
        rooms[seed] = sorted(str(e["turns"][0]["obs"]) for e in eps  # type: ignore[index]
                             if e["rollout"] == 0)
    assert rooms[0] != rooms[1]
    verify = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "verify", str(d)],
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stdout + verify.stderr
