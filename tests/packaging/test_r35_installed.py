"""Issue 35: ccpo-lab installed outside its repository finds its arms and sweeps, a user's
arm extends a shipped one, ``init`` scaffolds a project, and the base install needs no
torch, ray, verl or alfworld.

The wheel is built from this checkout and unpacked (not installed: the test environment
is not touched); commands run with it first on ``sys.path``, from folders that have no
``arms/`` or ``sweeps/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from ccpo_lab.cli.main import main
from ccpo_lab.config.arms import load_arm
from ccpo_lab.config.armspath import SHIPPED_ARMS, arms_path
from ccpo_lab.errors import UserError
from tests.conftest import REPO, snapshot

BLOCKED = ("torch", "ray", "verl", "alfworld", "textworld", "transformers", "vllm")
_BLOCKER = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None  # import fails, find_spec says absent: as when not installed
"""


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout built as a wheel (pip, no build isolation: setuptools is here) and
    unpacked; plus a ``sitecustomize`` that makes torch & co unimportable."""
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(REPO)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = out.glob("ccpo_lab-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = "ccpo_lab/shipped"
    for must in (f"{shipped}/arms/grpo.yaml", f"{shipped}/sweeps/demo.yaml",
                 "ccpo_lab/shipped/project/README.md",
                 "ccpo_lab/shipped/project/arms/my-ccpo.yaml"):
        assert must in names, must
    site = out / "site"
    zipfile.ZipFile(wheel).extractall(site)
    block = out / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(_BLOCKER)
    return site


def _cli(site: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    """``ccpo-lab ARGS`` from the unpacked wheel, torch & co blocked, in ``cwd``."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import ccpo_lab; "
            "assert ccpo_lab.__file__.startswith(sys.argv[1]), ccpo_lab.__file__; "
            "from ccpo_lab.cli.main import main; sys.argv = ['ccpo-lab', *sys.argv[2:]]; "
            "sys.exit(main())")
    full = {**os.environ, "PYTHONPATH": str(site.parent / "block"), **(env or {})}
    full.pop("CCPO_LAB_ARMS", None)
    return subprocess.run([sys.executable, "-c", code, str(site), *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)


def test_the_installed_package_lists_its_arms_from_any_folder(unpacked_wheel: Path,
                                                              tmp_path: Path) -> None:
    r = _cli(unpacked_wheel, tmp_path, "arms", "list")
    assert r.returncode == 0, r.stderr
    for arm in ("grpo", "gigpo", "ccpo-return-hard", "ccpo-return-hard-as-run"):
        assert arm in r.stdout
    assert "shipped" in r.stdout


def test_init_then_dry_run_from_the_project_without_torch(unpacked_wheel: Path,
                                                          tmp_path: Path) -> None:
    """The 'done when' of issue 35, with torch, ray, verl and alfworld unimportable."""
    r = _cli(unpacked_wheel, tmp_path, "init", "proj")
    assert r.returncode == 0, r.stderr
    proj = tmp_path / "proj"
    assert sorted(str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file()) == [
        "README.md", "arms/my-ccpo.yaml", "sweeps/study.yaml", "sweeps/verl-study.yaml"]
    for sweep in ("study", "verl-study"):
        r = _cli(unpacked_wheel, proj, "sweep", f"sweeps/{sweep}.yaml", "--dry-run")
        assert r.returncode == 0, r.stderr
        assert "my-ccpo" in r.stdout and "halted" not in r.stderr
    r = _cli(unpacked_wheel, proj, "arms", "list")
    assert r.returncode == 0 and "my-ccpo" in r.stdout and "grpo" in r.stdout
    r = _cli(unpacked_wheel, proj, "arms", "show", "my-ccpo")
    assert "- ccpo-return-hard" in r.stdout and "rho: 0.5" in r.stdout


def test_launching_cpu_runs_without_the_local_extra_says_what_to_install(
        unpacked_wheel: Path, tmp_path: Path) -> None:
    """A base install can plan a CPU-backend sweep but not run it: the launch is refused
    before anything is written, naming what is missing and the extra that brings it (it
    failed each run with a torch traceback before)."""
    assert _cli(unpacked_wheel, tmp_path, "init", "proj").returncode == 0
    proj = tmp_path / "proj"
    r = _cli(unpacked_wheel, proj, "sweep", "sweeps/study.yaml", "launcher=inline",
             "seeds=[0]")
    assert r.returncode == 2, r.stderr[-2000:]
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "torch, alfworld" in err
    assert "pip install 'ccpo-lab[local]'" in err and not (proj / "results").exists()


def test_a_shipped_example_sweep_is_found_by_name(unpacked_wheel: Path, tmp_path: Path) -> None:
    r = _cli(unpacked_wheel, tmp_path, "sweep", "sweeps/smoke.yaml", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "using the shipped example" in r.stderr and "sweep smoke" in r.stdout
    r = _cli(unpacked_wheel, tmp_path, "sweep", "nope.yaml", "--dry-run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "nope.yaml: sweep file not found" in r.stderr and "smoke" in r.stderr


def test_the_base_install_pulls_no_trainer_stack() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = " ".join(meta["dependencies"]).lower()
    for heavy in ("torch", "ray", "verl", "alfworld", "transformers", "vllm"):
        assert heavy not in base, heavy
    assert any(d.startswith("torch") for d in meta["optional-dependencies"]["local"])


# --------------------------------------------------------------------- the arms path
def _arm(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a_user_arm_extends_a_shipped_one(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    _arm(mine, "soft", "extends: gigpo\nestimator: {gamma: 0.9}\n")
    arm = load_arm("soft", mine)
    assert arm.chain == ("soft", "gigpo") and arm.estimator.params["gamma"] == 0.9
    assert arm.estimator.params["mode"] == load_arm("gigpo", SHIPPED_ARMS).estimator.params[
        "mode"]


def test_an_arm_that_extends_its_own_name_extends_the_next_one(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    _arm(mine, "gigpo", "description: my gigpo\nextends: gigpo\nestimator: {gamma: 0.5}\n")
    arm = load_arm("gigpo", mine)
    assert arm.chain == ("gigpo", "gigpo") and arm.estimator.params["gamma"] == 0.5
    assert arm.source == str(mine / "gigpo.yaml")
    assert arm.shadows == ()  # it extends the shipped gigpo: nothing is hidden


def test_a_copy_of_a_shipped_arm_shadows_nothing(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    _arm(mine, "grpo", (SHIPPED_ARMS / "grpo.yaml").read_text())
    assert load_arm("grpo", mine).shadows == ()


def test_the_arms_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, env1, env2, here = (tmp_path / n for n in ("first", "env1", "env2", "here"))
    for d in (first, env1, env2, here / "arms"):
        d.mkdir(parents=True)
    monkeypatch.setenv("CCPO_LAB_ARMS", f"{env1}{os.pathsep}{env2}")
    path = arms_path(first, "arms_dir", cwd=here)
    assert [why for _, why in path.entries] == ["arms_dir", "$CCPO_LAB_ARMS",
                                                "$CCPO_LAB_ARMS", "./arms", "shipped"]
    assert path.dirs[-1] == SHIPPED_ARMS
    _arm(env2, "x", "estimator: {name: grpo}\n")
    _arm(here / "arms", "x", "estimator: {name: grpo, gamma: 0.5}\n")
    assert path.find("x") == env2 / "x.yaml"  # the first on the path wins


@pytest.mark.parametrize("bad", ["missing", "file"])
def test_an_arms_path_entry_that_is_not_a_folder_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        bad: str) -> None:
    entry = tmp_path / "entry"
    if bad == "file":
        entry.write_text("x")
    monkeypatch.setenv("CCPO_LAB_ARMS", str(entry))
    monkeypatch.chdir(tmp_path)
    assert main(["arms", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(entry) in err and "$CCPO_LAB_ARMS" in err


def test_a_sweep_arms_dir_that_is_not_a_folder_is_refused(workdir: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep

    sweep = workdir / "sweeps" / "smoke.yaml"
    sweep.write_text(sweep.read_text() + "arms_dir: ../nowhere\n")
    with pytest.raises(UserError) as err:
        load_sweep(sweep)
    assert err.value.key == "arms_dir" and "../nowhere" in str(err.value)


def test_arms_list_says_which_file_shadows_which(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _arm(tmp_path / "arms", "grpo", "description: mine\nestimator: {name: grpo, gamma: 0.5}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CCPO_LAB_ARMS", raising=False)
    assert main(["arms", "list"]) == 0
    out = capsys.readouterr()
    assert "./arms" in out.out and "shipped" in out.out
    assert f"shadows {SHIPPED_ARMS / 'grpo.yaml'}" in out.err


# --------------------------------------------------------------------------- init
def test_init_refuses_a_folder_that_holds_files(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nothing was written" in err
    assert snapshot(tmp_path) == before
    assert main(["init", str(tmp_path / "notes.txt")]) == 2
    assert snapshot(tmp_path) == before


def test_init_into_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    assert main(["init", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "sweeps" / "study.yaml").is_file()
