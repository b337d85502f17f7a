"""Issue 35: ``ccpo-lab install-into PYTHON`` installs ccpo-lab into a trainer's
environment without changing its torch, vLLM, transformers, flash-attn or verl, and refuses
(exit 2, nothing changed) an install that would.

The real install runs in the contract environment CI builds (scripts/verl-agent-contract.sh),
through a layer over it: a fresh venv of the same interpreter whose ``.pth`` puts the
trainer environment's site-packages on its path. pip sees every trainer package as
installed (and would have to change them in place to replace them), while what it installs
lands in the layer, so the cached environment itself is never written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.backends.verl.install import PROTECTED, constraints_text, install_into
from ccpo_lab.cli.main import main
from ccpo_lab.errors import UserError
from tests.conftest import REPO

TRAINER_VENV = Path.home() / ".cache" / "ccpo-lab" / "verl-agent-cpu"


def test_a_requirement_that_would_replace_torch_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    """In this environment (torch 2.13.0): asking for torch<2 cannot keep it: one line,
    exit 2, and pip installed nothing (a dry run is all that ran)."""
    import torch

    before = torch.__version__
    assert main(["install-into", sys.executable, "--from", "torch<2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "keeping the trainer's packages" in err and f"torch {before}" in err
    assert "nothing was changed" in err
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == before


def test_keep_protects_another_package(capsys: pytest.CaptureFixture[str]) -> None:
    import rich

    from ccpo_lab.backends.verl.install import protected_versions

    have = protected_versions(sys.executable, ["rich"])["rich"]
    assert have is not None
    with pytest.raises(UserError) as err:
        install_into(sys.executable, "rich<10", keep=["rich"], dry_run=True)
    assert err.value.exit_code == 2 and f"rich {have}" in str(err.value)
    assert rich.__file__  # still importable, untouched


def test_the_constraints_pin_what_is_installed() -> None:
    text = constraints_text({"torch": "2.8.0", "vllm": None, "transformers": "4.57.3"})
    assert text == "torch==2.8.0\ntransformers==4.57.3\n"
    assert set(PROTECTED) == {"torch", "vllm", "transformers", "flash-attn", "verl"}


def _trainer_python() -> Path:
    env = os.environ.get("CCPO_LAB_TRAINER_PYTHON")
    py = Path(env) if env else TRAINER_VENV / "bin" / "python"
    if not py.is_file():
        pytest.skip("no trainer environment (scripts/verl-agent-contract.sh builds it)")
    return py


def _layer(trainer: Path, where: Path) -> Path:
    """A venv of ``trainer``'s interpreter that sees the trainer's packages."""
    site = subprocess.run([str(trainer), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # no pip or setuptools of its own: the trainer's (through the .pth) are used, as in it
    subprocess.run([str(trainer), "-m", "venv", "--without-pip", str(where)], check=True,
                   timeout=300)
    py = where / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import sysconfig; "
                          "print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    Path(own, "zz_trainer_env.pth").write_text(site + "\n")
    return py


def _versions(py: Path) -> dict[str, str | None]:
    code = ("import importlib.metadata as md, json, sys\n"
            "def v(n):\n"
            "    try: return md.version(n)\n"
            "    except md.PackageNotFoundError: return None\n"
            "print(json.dumps({n: v(n) for n in sys.argv[1:]}))")
    r = subprocess.run([str(py), "-c", code, *PROTECTED], capture_output=True, text=True,
                       check=True)
    return dict(json.loads(r.stdout))


def _pip_check(py: Path) -> set[str]:
    r = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True)
    return {x.strip() for x in r.stdout.splitlines()
            if x.strip() and x.strip() != "No broken requirements found."}


@pytest.mark.slow
@pytest.mark.verl_agent
def test_install_into_the_contract_environment_keeps_the_trainers_packages(
        tmp_path: Path) -> None:
    trainer = _trainer_python()
    site = Path(subprocess.run([str(trainer), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    listing = sorted(os.listdir(site))
    mtimes = {n: (site / n).stat().st_mtime_ns for n in listing}
    py = _layer(trainer, tmp_path / "layer")
    before = _versions(py)
    assert before["torch"] is not None and before == _versions(trainer)
    complaints = _pip_check(trainer)

    r = subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", "install-into", str(py),
                        "--from", str(REPO)], capture_output=True, text=True, timeout=3000,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"torch {before['torch']}" in r.stdout and "installed:" in r.stdout
    assert _versions(py) == before  # the trainer's packages, as the layer sees them
    assert sorted(os.listdir(site)) == listing  # the trainer env itself: not written
    assert {n: (site / n).stat().st_mtime_ns for n in listing} == mtimes
    after = _pip_check(py)
    assert not [x for x in after if x.lower().startswith("ccpo-lab")], after
    assert after <= complaints, after - complaints  # nothing new broken
    check = subprocess.run([str(py), "-m", "ccpo_lab.backends.verl.trainer_env", "--check"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
