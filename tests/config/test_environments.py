"""The environment axis: sweep keys, run identity, the per-environment folder, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.runs.family import FAMILY, environment_dirs, read_family, write_family
from ccpo_lab.runs.layout import RunDir, init_run_dir, load_run_config
from tests.conftest import snapshot

SWEEP = """name: s
arms: [grpo, gigpo]
seeds: [0, 1]
backend: {kind: local}
protocol: {total_steps: 10, lr: 0.001}
"""


def _sweep(workdir: Path, text: str = SWEEP, name: str = "s.yaml") -> Path:
    path = workdir / "sweeps" / name
    path.write_text(text)
    return path


def test_alfworld_is_the_default_and_keeps_every_run_id(workdir: Path) -> None:
    plain = load_sweep(_sweep(workdir))
    named = load_sweep(_sweep(workdir, SWEEP + "environments: [alfworld]\n", "t.yaml"))
    assert [r.run_id for r in plain.runs] == [r.run_id for r in named.runs]
    assert all(r.environment == "alfworld" for r in plain.runs)
    assert "environment" not in plain.runs[0].identity
    # settings of an environment the sweep does not run on change nothing
    other = load_sweep(_sweep(workdir), ["env.sokoban.num_boxes=3"])
    assert [r.run_id for r in other.runs] == [r.run_id for r in plain.runs]


def test_environment_and_its_settings_are_part_of_identity(workdir: Path) -> None:
    path = _sweep(workdir)
    alf = load_sweep(path).runs[0]
    sok = load_sweep(path, ["environments=[sokoban]"]).runs[0]
    sok3 = load_sweep(path, ["environments=[sokoban]", "env.sokoban.num_boxes=3"]).runs[0]
    assert len({alf.run_id, sok.run_id, sok3.run_id}) == 3
    assert sok.identity["environment"]["name"] == "sokoban"
    assert sok3.env_settings.num_boxes == 3


def test_config_yaml_round_trip(workdir: Path, tmp_path: Path) -> None:
    sw = load_sweep(_sweep(workdir), ["environments=[sokoban]", "env.sokoban.dim_room=[7,8]"])
    run = sw.runs[0]
    rd = RunDir(tmp_path / "r" / "seed-0")
    init_run_dir(rd, run)
    back = load_run_config(rd)
    assert back.run_id == run.run_id
    assert back.environment == "sokoban" and back.env_settings.dim_room == [7, 8]
    assert json.loads(rd.run_json.read_text())["environment"] == "sokoban"


def test_per_environment_directories(workdir: Path, tmp_path: Path) -> None:
    sw = load_sweep(_sweep(workdir), ["environments=[alfworld,sokoban]"])
    assert sw.multi_environment
    parts = sw.per_environment()
    assert [p.environment for p in parts] == ["alfworld", "sokoban"]
    assert [p.sweep_dir(tmp_path) for p in parts] == [tmp_path / "s" / "alfworld",
                                                      tmp_path / "s" / "sokoban"]
    # the same arm and seed: the ALFWorld part's runs are the single-environment ones
    assert [r.run_id for r in parts[0].runs] == [r.run_id for r in load_sweep(
        _sweep(workdir)).runs]
    assert [r.run_id for r in sw.runs] == [r.run_id for p in parts for r in p.runs]
    with pytest.raises(ValueError):
        sw.sweep_dir(tmp_path)  # each environment has its own


BAD = [
    ("unknown", ["environments=[alfworld,nethack]"], ["environments[1]", "nethack",
                                                      "sokoban"]),
    ("backend-lacks-it", ["environments=[webshop]"], ["environments[0]", "webshop",
                                                      "local backend"]),
    ("key-of-another", ["+env.sokoban.n_receptacles=3"], ["env.sokoban.n_receptacles",
                                                          "unknown key"]),
    ("out-of-range", ["env.sokoban.dim_room=[4,6]"], ["env.sokoban.dim_room[0]", "4"]),
    ("visual-mode", ["env.sokoban.mode=rgb_array"], ["env.sokoban.mode", "rgb_array"]),
    ("twice", ["environments=[sokoban,sokoban]"], ["environments", "twice"]),
    ("empty", ["environments=[]"], ["environments"]),
]


@pytest.mark.parametrize(("overrides", "fragments"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_environment_input(workdir: Path, capsys: pytest.CaptureFixture[str],
                               overrides: list[str], fragments: list[str]) -> None:
    path = _sweep(workdir)
    before = snapshot(workdir)
    code = main(["sweep", str(path), *overrides, "--results", str(workdir / "results")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert snapshot(workdir) == before, "a bad input wrote something"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for f in fragments:
        assert f in lines[0], lines[0]


def test_bad_environment_key_in_file_names_the_file(workdir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(workdir, SWEEP + "env:\n  alfworld:\n    num_boxes: 2\n")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "env.alfworld.num_boxes" in err, err


def test_family_folder(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    write_family(folder, "s", ["alfworld", "sokoban"])
    (folder / "sokoban").mkdir()
    assert read_family(folder) == ["alfworld", "sokoban"]
    assert environment_dirs(folder) == [("sokoban", folder / "sokoban")]
    write_family(folder, "s", ["sokoban", "webshop"])  # an added one is appended
    assert read_family(folder) == ["alfworld", "sokoban", "webshop"]
    (folder / FAMILY).write_text('{"environments": ["../x"]}')
    with pytest.raises(Exception, match="environment names"):
        read_family(folder)


def _launched(workdir: Path, results: Path) -> Path:
    """A sweep over two environments whose runs exist (pending), as a launch leaves them."""
    sw = load_sweep(_sweep(workdir), ["environments=[alfworld,sokoban]"])
    write_family(sw.family_dir(results), sw.name, sw.environments)
    for part in sw.per_environment():
        for run in part.runs:
            init_run_dir(RunDir(part.sweep_dir(results) / run.arm / f"seed-{run.seed}"), run)
    return sw.family_dir(results)


def test_status_per_environment(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _launched(workdir, workdir / "results")
    assert main(["status", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "== environment alfworld" in out and "== environment sokoban" in out
    assert main(["status", str(folder), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert sorted({r["environment"] for r in records}) == ["alfworld", "sokoban"]
    assert len(records) == 8
    assert main(["status", str(folder / "sokoban"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4


def test_one_folder_one_kind_of_sweep(workdir: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    results = workdir / "results"
    folder = _launched(workdir, results)
    before = snapshot(workdir)
    code = main(["sweep", str(_sweep(workdir)), "--results", str(results), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "several environments" in err and FAMILY in err, err
    assert snapshot(workdir) == before
    (folder / FAMILY).unlink()
    (folder / "sweep.json").write_text("{}")
    code = main(["sweep", str(_sweep(workdir)), "environments=[alfworld,sokoban]",
                 "--results", str(results), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and "single-environment sweep" in err, err


def test_dry_run_of_several_environments_writes_nothing(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(workdir)
    before = snapshot(workdir)
    code = main(["sweep", str(path), "environments=[alfworld,sokoban]",
                 "--results", str(workdir / "results"), "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert snapshot(workdir) == before
    assert "== environment sokoban" in out and "sweep s on sokoban: 2 arms x 2 seeds" in out


def test_a_budget_is_the_whole_study_s(workdir: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    """Each environment's runs fit the budget, all of them do not: refused, nothing
    written; a budget for all of them passes the check."""
    results = workdir / "results"
    rate = ["launcher.seconds_per_step=36", "environments=[alfworld,sokoban]"]
    smoke = str(workdir / "sweeps" / "smoke.yaml")
    # smoke: 4 runs x 4 steps x 36 s = 0.16 CPU-hours per environment, 0.32 in all
    before = snapshot(workdir)
    assert main(["sweep", smoke, *rate, "budget.device_hours=0.25", "--results",
                 str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "budget.device_hours" in err, err
    assert snapshot(workdir) == before
    assert main(["sweep", smoke, *rate, "budget.device_hours=0.4", "--dry-run", "--results",
                 str(results)]) == 0


def test_rehearse_takes_one_environment(workdir: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    assert main(["rehearse", str(_sweep(workdir)), "environments=[alfworld,sokoban]",
                 "--results", str(workdir / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "environments=[alfworld]" in err, err
    assert not (workdir / "results").exists()


def test_an_environment_s_protocol_overrides_the_sweep_s(workdir: Path) -> None:
    path = _sweep(workdir, SWEEP + "environments: [alfworld, sokoban]\n"
                  "env: {sokoban: {protocol: {max_steps: 15, group_size: 4}}}\n", "e.yaml")
    alf, sok = load_sweep(path).per_environment()
    assert alf.runs[0].protocol.max_steps == 50 and sok.runs[0].protocol.max_steps == 15
    assert sok.runs[0].protocol.group_size == 4 and sok.runs[0].protocol.lr == 0.001
    # the ALFWorld runs are the single-environment ones; the overrides reach the identity
    # through the run's protocol
    assert alf.runs[0].run_id == load_sweep(_sweep(workdir)).runs[0].run_id
    plain = load_sweep(_sweep(workdir, SWEEP + "environments: [alfworld, sokoban]\n",
                              "f.yaml")).per_environment()[1]
    assert plain.runs[0].run_id != sok.runs[0].run_id
    assert "protocol" not in sok.runs[0].identity["environment"]["sokoban"]


@pytest.mark.parametrize(("override", "fragments"), [
    ("+env.sokoban.protocol.max_stepz=3", ["env.sokoban.protocol.max_stepz", "unknown key"]),
    ("+env.sokoban.protocol.max_steps=0", ["max_steps", "0"]),
    ("+env.sokoban.protocol.lr=fast", ["env.sokoban.protocol.lr", "fast"]),
])
def test_bad_environment_protocol(workdir: Path, capsys: pytest.CaptureFixture[str],
                                  override: str, fragments: list[str]) -> None:
    path = _sweep(workdir, SWEEP + "environments: [sokoban]\n")
    assert main(["sweep", str(path), override, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for f in fragments:
        assert f in err, err


def test_an_environment_s_modules_are_checked_before_anything_is_launched(
        workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """Without gym_sokoban, a sweep over ALFWorld and Sokoban launches neither."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gym_sokoban" else real(name, *a))
    path = _sweep(workdir)
    before = snapshot(workdir)
    assert main(["sweep", str(path), "environments=[alfworld,sokoban]", "--results",
                 str(workdir / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gym_sokoban" in err and "ccpo-lab[local]" in err
    assert snapshot(workdir) == before
