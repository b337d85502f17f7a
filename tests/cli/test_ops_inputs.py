"""Input a study's operator gets wrong, refused at load time with one line (exit 2, nothing
written), and what a person writes accepted as they mean it (issue 15, items 11-14)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from tests.cli.test_bad_inputs import _run

SMOKE_HEAD = "name: s\narms: [grpo]\nseeds: [0]\n"

CASES = [
    # (id, sweep text, extra args, expected fragments)
    ("name-trailing-newline", 'name: "abc\\n"\narms: [grpo]\nseeds: [0]\n', [],
     ["s.yaml: name: invalid name", "'abc\\n'"]),
    ("arm-trailing-newline", 'name: s\narms: ["grpo\\n"]\nseeds: [0]\n', [],
     ["s.yaml: arms[0]: invalid name", "'grpo\\n'"]),
    ("total-steps-huge", SMOKE_HEAD, ["protocol.total_steps=1000000000"],
     ["command line: protocol.total_steps: out of range", "1000000000", "[1, 100000]"]),
    ("group-size-huge", SMOKE_HEAD + "protocol: {group_size: 100000}\n", [],
     ["s.yaml: protocol.group_size: out of range", "[1, 1024]"]),
    ("lr-above-one", SMOKE_HEAD + "protocol: {lr: 5}\n", [],
     ["s.yaml: protocol.lr: out of range", "(0, 1.0]"]),
    ("train-games-zero", SMOKE_HEAD, ["backend.local.n_train_games=0"],
     ["command line: backend.local.n_train_games: must be an integer in 1..100000", "(got 0)"]),
    ("train-games-huge", SMOKE_HEAD, ["backend.local.n_train_games=100000000"],
     ["backend.local.n_train_games: must be an integer in 1..100000"]),
    ("closed-fraction-seven", SMOKE_HEAD, ["backend.local.closed_fraction=7"],
     ["command line: backend.local.closed_fraction: must be in [0, 1]", "7.0"]),
    ("receptacles-negative", SMOKE_HEAD, ["backend.local.n_receptacles=-3"],
     ["command line: backend.local.n_receptacles: must be in 3..12", "-3"]),
    ("duplicate-top-key", SMOKE_HEAD + "protocol: {lr: 0.1}\nprotocol: {lr: 0.2}\n", [],
     ["s.yaml: duplicate key 'protocol' at line 5 (first at line 4)"]),
    ("duplicate-seeds", SMOKE_HEAD + "seeds: [1]\n", [],
     ["s.yaml: duplicate key 'seeds' at line 4 (first at line 3)"]),
    ("duplicate-nested-key", SMOKE_HEAD + "protocol:\n  lr: 0.1\n  total_steps: 3\n  lr: 0.2\n",
     [], ["s.yaml: duplicate key 'lr' at line 7 (first at line 5)"]),
    ("ignored-protocol-key", SMOKE_HEAD + "protocol: {max_response_length: 8}\n", [],
     ["s.yaml: protocol.max_response_length: not used by the local backend",
      "(got 8)", "valid:", "max_prompt_length"]),
    ("ignored-protocol-key-override", SMOKE_HEAD, ["protocol.max_response_length=64"],
     ["command line: protocol.max_response_length: not used by the local backend"]),
    ("slurm-qos-newline", SMOKE_HEAD + 'launcher: {kind: slurm, qos: "a\\nb"}\n', [],
     ["s.yaml: launcher.qos: control characters are not allowed", "'a\\nb'"]),
    ("slurm-mem-negative", SMOKE_HEAD, ["launcher=slurm", "launcher.mem_gb=-5"],
     ["command line: launcher.mem_gb: out of range", "-5"]),
    ("slurm-bad-additional-parameter",
     SMOKE_HEAD + 'launcher:\n  kind: slurm\n  sbatch_extra:\n    additional_parameters: '
                  '{"bad flag": 1}\n', [],
     ["launcher.sbatch_extra.additional_parameters.bad flag: not an sbatch long option name"]),
    ("slurm-written-flag-from-command-line", SMOKE_HEAD,
     ["launcher=slurm", "launcher.sbatch_extra.additional_parameters.output=x"],
     ["launcher.sbatch_extra.additional_parameters.output: set by ccpo-lab itself"]),
    ("slurm-unknown-extra-from-command-line", SMOKE_HEAD,
     ["launcher=slurm", "launcher.sbatch_extra.bogus=1"],
     ["command line: launcher.sbatch_extra.bogus: unknown sbatch parameter", "comment"]),
    ("unresolvable-interpolation", "name: ${oc.env:CCPO_LAB_TEST_NOT_SET}\narms: [grpo]\n"
                                   "seeds: [0]\n", [],
     ["s.yaml: name: cannot resolve", "CCPO_LAB_TEST_NOT_SET"]),
]


@pytest.mark.parametrize(("text", "extra", "fragments"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_at_load_time(workdir: Path, capsys: pytest.CaptureFixture[str], text: str,
                              extra: list[str], fragments: list[str]) -> None:
    path = workdir / "sweeps" / "s.yaml"
    path.write_text(text)
    line = _run(workdir, capsys, ["sweep", str(path), *extra, "--dry-run",
                                  "--results", str(workdir / "results")])
    for frag in fragments:
        assert frag in line, line
    # the real launch refuses it the same way, before writing anything
    assert _run(workdir, capsys, ["sweep", str(path), *extra, "--results",
                                  str(workdir / "results")]) == line


def test_a_duplicate_key_in_an_arm_file_names_it(workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "arms" / "a.yaml").write_text("estimator:\n  name: grpo\n"
                                             "training: {lr: 0.1}\ntraining: {lr: 0.2}\n")
    path = workdir / "sweeps" / "s.yaml"
    path.write_text("name: s\narms: [a]\nseeds: [0]\n")
    line = _run(workdir, capsys, ["sweep", str(path), "--dry-run"])
    assert "a.yaml: duplicate key 'training' at line 4 (first at line 3)" in line


def test_import_refuses_an_arm_with_a_trailing_newline(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = workdir / "m.jsonl"
    log.write_text('{"step": 0, "data": {"val/success_rate": 0.5}}\n')
    sweep_dir = workdir / "res" / "imported"
    line = _run(workdir, capsys, ["import", str(sweep_dir), str(log), "--arm", "a\n",
                                  "--seed", "0"])
    assert "--arm: invalid name" in line and "'a\\n'" in line
    assert not (workdir / "res").exists()


@pytest.mark.parametrize("command", [
    ["sweep", "{sweeps}/smoke.yaml", "--results", "{file}", "--dry-run"],
    ["sweep", "{sweeps}/smoke.yaml", "--results", "{file}/below"],
    ["report", "{workdir}", "--out", "{file}"],
    ["games", "make", "{file}"],
    ["games", "make", "{file}/below"],
])
def test_a_file_where_a_directory_is_wanted(workdir: Path, capsys: pytest.CaptureFixture[str],
                                             command: list[str]) -> None:
    blocker = workdir / "a-file"
    blocker.write_text("not a directory\n")
    args = [c.format(sweeps=workdir / "sweeps", file=blocker, workdir=workdir) for c in command]
    line = _run(workdir, capsys, args)
    assert f"{blocker}" in line and "is a file, expected a directory" in line
    assert "internal error" not in line


def test_what_a_person_writes_is_accepted(workdir: Path) -> None:
    path = workdir / "sweeps" / "s.yaml"
    path.write_text(SMOKE_HEAD + "protocol:\n  lr: 1e-6\n  kl_loss_coef: 2E-3\n")
    sw = load_sweep(path)
    assert sw.config.protocol.lr == 1e-6 and sw.config.protocol.kl_loss_coef == 0.002
    assert load_sweep(path, ["protocol.lr=1e-6"]).runs[0].run_id == sw.runs[0].run_id
    # launcher.sbatch_extra from the command line, as any other key
    sw = load_sweep(path, ["launcher=slurm", "launcher.sbatch_extra.comment=study-7",
                           "launcher.sbatch_extra.additional_parameters.nodelist=gpu-3"])
    assert dict(sw.config.launcher.sbatch_extra) == {  # type: ignore[attr-defined]
        "comment": "study-7", "additional_parameters": {"nodelist": "gpu-3"}}
    sw = load_sweep(path, ["launcher=slurm", "launcher.sbatch_extra={comment: x, exclude: n1}"])
    assert dict(sw.config.launcher.sbatch_extra) == {  # type: ignore[attr-defined]
        "comment": "x", "exclude": "n1"}


def test_an_interpolation_resolves_with_or_without_overrides(
        workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCPO_LAB_TEST_STUDY", "study7")
    path = workdir / "sweeps" / "s.yaml"
    path.write_text("name: ${oc.env:CCPO_LAB_TEST_STUDY}\narms: [grpo]\nseeds: [0]\n")
    assert load_sweep(path).name == "study7"
    assert load_sweep(path, ["seeds=[1]"]).name == "study7"


def test_the_shipped_sweeps_load(repo: Path) -> None:
    for path in sorted((repo / "sweeps").glob("*.yaml")):
        parts = load_sweep(path).per_environment()
        assert all(part.runs for part in parts), path


def test_the_slurm_dry_run_checks_its_parameters_and_writes_nothing(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "launcher=slurm",
                 "launcher.sbatch_extra.comment=ok", "--dry-run",
                 "--results", str(workdir / "results")]) == 0
    capsys.readouterr()
    assert not (workdir / "results").exists()
