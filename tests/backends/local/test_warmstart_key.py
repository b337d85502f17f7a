"""The shared warm start's key names the machine's arithmetic.

A warm start is cloned once per seed and loaded by the seed's other arms from the game
set's folder. Its parameters' last bits depend on the kernels the CPU runs (ATen's SIMD
level, MKL's and oneDNN's code paths), and the demo's 60 steps amplify a last-bit
difference into other episodes, so a machine with other arithmetic that shares the folder
(a results folder on a cluster's shared disk, copied to another machine, or the same
machine with ``ATEN_CPU_CAPABILITY`` set) must clone its own instead of loading one it
could not have computed. Another CPU is stood in for by a patched CPU description and,
in the processes of the slow tests, by ``MKL_CBWR=COMPATIBLE`` (MKL's portable code path:
the same initial parameters, other matrix products).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from ccpo_lab.backends.local import warmstart
from ccpo_lab.backends.local.games import GameGenConfig, GameSpec, ensure_games
from ccpo_lab.backends.local.policy import ActionScorer, PolicyShape
from ccpo_lab.backends.local.prompts import PromptSettings

REPO = Path(__file__).resolve().parents[3]
SPEC = GameSpec(n_train=3, n_eval=0, seed=5,
                config=GameGenConfig(n_receptacles=3, n_distractors=0, closed_fraction=0.0,
                                     max_plan_len=8))
PROMPTS = PromptSettings(2, 64, 256)
NUMERIC_PREFIXES = ("ATEN_", "MKL_", "ONEDNN_", "DNNL_")
"""Environment variables that choose torch's kernels: removed from the children's."""


def _env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith(NUMERIC_PREFIXES)},
            **extra}


def _child(code: str, **env: str) -> str:
    """stdout of ``code`` run by this Python in a fresh process (:func:`_env`)."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, env=_env(**env), timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def _policy_and_generator() -> tuple[ActionScorer, torch.Generator]:
    gen = torch.Generator().manual_seed(3)
    return ActionScorer(PolicyShape(256, 8, 8, "conv"), gen), gen


KEY = """
from tests.backends.local.test_warmstart_key import key
print(key())
"""


def key() -> str:
    """The warm-start key of the test policy on one (named, not read) game."""
    policy, gen = _policy_and_generator()
    game: Any = SimpleNamespace(gamefile="g0")  # only its file name enters the key
    pool: Any = SimpleNamespace(max_steps=5)
    return warmstart._cache_key(policy, [game], pool, PROMPTS, (2, 2, 1e-3, 0), gen)


def test_the_key_changes_with_the_cpu_and_the_kernel_variables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    here = key()
    assert key() == here
    assert warmstart.arithmetic()[:2] == (warmstart._cpu(),
                                          torch.backends.cpu.get_cpu_capability())
    with monkeypatch.context() as m:
        m.setattr(warmstart, "_cpu", lambda: "another vendor | 6 | 143 | another CPU | 0")
        assert key() != here
    for name in ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY"):
        with monkeypatch.context() as m:
            m.setenv(name, "COMPATIBLE" if name == "MKL_CBWR" else "AVX2")
            assert key() != here, name


@pytest.mark.slow
def test_the_key_is_stable_across_processes_and_names_mkls_code_path() -> None:
    here = _child(KEY)
    assert _child(KEY) == here  # another process of this machine loads the file
    # the same initial parameters (MKL does not draw them), other products: another key
    assert _child(KEY, MKL_CBWR="COMPATIBLE") != here


CLONE = """
import sys
from pathlib import Path
from tests.backends.local.test_warmstart_key import clone
print(clone(Path(sys.argv[1])))
"""


def clone(root: Path) -> bool:
    """Warm-start the test policy on the game set at ``root``, sharing through its folder;
    return whether the result was loaded."""
    from ccpo_lab.backends.local.games import load_game_set
    from ccpo_lab.backends.local.rollout import EnginePool

    games = load_game_set(root)
    policy, gen = _policy_and_generator()
    done = warmstart.warm_start(policy, games.train, EnginePool(8), PROMPTS, n_demos=2,
                                epochs=2, lr=1e-2, seed=0, generator=gen,
                                cache=root / ".warmstart")
    return done.loaded


@pytest.mark.slow
def test_a_warm_start_cloned_with_other_mkl_kernels_is_not_loaded(tmp_path: Path) -> None:
    root = ensure_games(tmp_path / "games", SPEC).root
    other = subprocess.run([sys.executable, "-c", CLONE, str(root)], cwd=REPO, text=True,
                           capture_output=True, timeout=600, check=False,
                           env=_env(MKL_CBWR="COMPATIBLE"))
    assert other.returncode == 0, other.stderr[-2000:]
    assert other.stdout.strip() == "False"  # cloned there
    assert clone(root) is False  # cloned again here, not loaded
    assert clone(root) is True  # this machine's own file is shared
    assert len(list((root / ".warmstart").glob("warmstart-*.pt"))) == 2
