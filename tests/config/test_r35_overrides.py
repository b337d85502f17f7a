"""Issue 35: every Hydra override form works or is refused in one line saying what to
write. Sweep forms (``a,b``, ``choice``, ``range``) give a list-valued key its list and are
refused on a key taking one value; ``~key`` resets a key as if the sweep file did not set
it; ``--multirun`` / ``-m`` is refused: ccpo-lab expands arms x seeds itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ccpo_lab.backends.local.settings import LocalBackendConfig
from ccpo_lab.config.protocol import ProtocolConfig
from ccpo_lab.config.sweep import Sweep, load_sweep
from ccpo_lab.errors import UserError
from tests.cli.test_bad_inputs import _run


def _smoke(workdir: Path, *overrides: str) -> Sweep:
    return load_sweep(workdir / "sweeps" / "smoke.yaml", list(overrides))


def _refused(workdir: Path, override: str) -> str:
    with pytest.raises(UserError) as e:
        _smoke(workdir, override)
    line = str(e.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize(("override", "seeds"), [
    ("seeds=range(0,5)", [0, 1, 2, 3, 4]),
    ("seeds=range(0,10,2)", [0, 2, 4, 6, 8]),
    ("seeds=range(5)", [0, 1, 2, 3, 4]),
    ("seeds=0,1,2", [0, 1, 2]),
    ("seeds=choice(3,1)", [3, 1]),
    ("+seeds=range(2)", [0, 1]),
    ("++seeds=4,5", [4, 5]),
])
def test_a_sweep_form_gives_a_list_key_its_list(workdir: Path, override: str,
                                                 seeds: list[int]) -> None:
    sw = _smoke(workdir, override)
    assert list(sw.config.seeds) == seeds
    same = _smoke(workdir, f"seeds={seeds}".replace(" ", ""))
    assert [r.run_id for r in sw.runs] == [r.run_id for r in same.runs]


@pytest.mark.parametrize("override", ["arms=grpo,gigpo", "arms=choice(grpo,gigpo)"])
def test_a_sweep_form_gives_the_arms(workdir: Path, override: str) -> None:
    assert list(_smoke(workdir, override).config.arms) == ["grpo", "gigpo"]


@pytest.mark.parametrize(("override", "key", "advice"), [
    ("protocol.total_steps=range(3)", "protocol.total_steps",
     "range(...) gives several values; protocol.total_steps takes one: write "
     "protocol.total_steps=0"),
    ("protocol.lr=0.1,0.2", "protocol.lr",
     "a,b is Hydra's multirun sweep (one job per value); ccpo-lab runs one sweep per command "
     "and protocol.lr takes one value: write protocol.lr=0.1"),
    ("protocol.lr=choice(0.1,0.2)", "protocol.lr", "give each its own arm (training: {lr: "),
    ("protocol.lr=interval(0,1)", "protocol.lr", "protocol.lr takes one value: write "
     "protocol.lr=VALUE"),
    ("description=a,b", "description", "quote it (description='a,b')"),
    ("launcher=local,slurm", "launcher", "launcher takes one value: write launcher=local"),
    ("backend=choice(local,verl)", "backend", "backend takes one value: write backend=local"),
])
def test_a_sweep_form_on_a_key_taking_one_value_is_refused(workdir: Path, override: str,
                                                           key: str, advice: str) -> None:
    line = _refused(workdir, override)
    assert line.startswith(f"command line: {key}: "), line
    assert advice in line and f"(got '{override}')" in line, line


@pytest.mark.parametrize(("override", "advice"), [
    ("seeds=sort(3,1,2)", "write seeds=[1,2,3]"),
    ("seeds=shuffle(0,1)", "shuffle(...) asks Hydra for the jobs in random order"),
    ("seeds=tag(a,choice(0,1))", "write seeds=[0,1]"),
    ("seeds=glob(*)", "seeds is not a group; ccpo-lab expands arms x seeds itself from lists: "
     "write seeds=[A,B,...]"),
    ("seeds=interval(0,1)", "write seeds=[A,B,...]"),
])
def test_other_sweep_forms_on_a_list_key_are_refused(workdir: Path, override: str,
                                                     advice: str) -> None:
    line = _refused(workdir, override)
    assert line.startswith("command line: seeds: ") and advice in line, line


def test_a_huge_range_is_refused_without_being_listed(workdir: Path) -> None:
    start = time.monotonic()
    line = _refused(workdir, "seeds=range(0,1000000000000)")
    assert "seeds: gives more than 100,000 values" in line, line
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("override", ["~protocol.lr", "~protocol.lr=3.0e-3", "~protocol"])
def test_delete_resets_a_key_to_its_schema_default(workdir: Path, override: str) -> None:
    sw = _smoke(workdir, override)
    assert sw.config.protocol.lr == ProtocolConfig().lr != 3.0e-3


def test_delete_resets_sections_and_mapping_entries(workdir: Path) -> None:
    assert _smoke(workdir, "~backend.local").config.backend.local == LocalBackendConfig()
    for override in ("~launcher", "~launcher.kind"):
        assert _smoke(workdir, override).config.launcher.kind == "inline"
    path = workdir / "sweeps" / "env.yaml"
    path.write_text((workdir / "sweeps" / "smoke.yaml").read_text().replace(
        "    hidden_dim: 32", "    hidden_dim: 32\n  verl:\n    env: {A: x, B: y}"))
    sw = load_sweep(path, ["~backend.verl.env.A"])
    assert sw.config.backend.verl.env == {"B": "y"}


@pytest.mark.parametrize(("override", "fragment"), [
    ("~seeds", "command line: seeds: empty seed list"),
    ("~protocol.lr=0.5", "command line: protocol.lr: ~protocol.lr=VALUE resets protocol.lr "
     "only when the sweep file sets it to VALUE, and it sets 0.003: write ~protocol.lr"),
    ("~protocol.nope", "command line: protocol.nope: unknown key in override; valid: "),
])
def test_a_delete_that_cannot_apply_is_refused(workdir: Path, override: str,
                                               fragment: str) -> None:
    assert fragment in _refused(workdir, override)


@pytest.mark.parametrize("flag", ["--multirun", "-m"])
def test_multirun_is_refused_in_one_line(workdir: Path, capsys: pytest.CaptureFixture[str],
                                         flag: str) -> None:
    line = _run(workdir, capsys, ["sweep", str(workdir / "sweeps" / "smoke.yaml"), flag,
                                  "seeds=0,1", "--dry-run", "--results",
                                  str(workdir / "results")])
    assert line == ("error: command line: --multirun: ccpo-lab has no multirun: it expands "
                    "arms x seeds itself; give lists (arms=[grpo,gigpo] seeds=[0,1,2], or "
                    "seeds=range(0,5)) and one value for every other key")


def test_a_sweep_on_a_scalar_key_fails_in_one_line_through_the_cli(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _run(workdir, capsys, ["sweep", str(workdir / "sweeps" / "smoke.yaml"),
                                  "protocol.lr=0.1,0.2", "--dry-run", "--results",
                                  str(workdir / "results")])
    assert line.startswith("error: command line: protocol.lr: a,b is Hydra's multirun "
                           "sweep"), line
    assert "write protocol.lr=0.1" in line and "(got 'protocol.lr=0.1,0.2')" in line


def test_a_sweep_form_works_through_the_cli(workdir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from ccpo_lab.cli.main import main

    code = main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "seeds=range(0,3)",
                 "arms=grpo,gigpo", "--dry-run", "--results", str(workdir / "results")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 arms x 3 seeds = 6 runs" in out
