"""Command-line overrides: errors blamed on the override that caused them, and a key given
twice refused as a YAML file's duplicate key is (Hydra would keep the last silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_bad_inputs import GOOD, _run

UNSET = "${oc.env:CCPO_LAB_TEST_NOT_SET}"

CASES = [
    ("env-interpolation-in-an-override", GOOD, [f"protocol.lr={UNSET}"],
     ["command line: protocol.lr: cannot resolve", "'CCPO_LAB_TEST_NOT_SET' not found",
      f"(got 'protocol.lr={UNSET}')"]),
    ("missing-key-interpolation-in-an-override", GOOD,
     ["seeds=[0]", "backend.local.num_threads=${protocol.nope}"],
     ["command line: backend.local.num_threads: cannot resolve",
      "(got 'backend.local.num_threads=${protocol.nope}')"]),
    ("an-override-setting-the-mapping-that-holds-it", GOOD,
     [f"++backend.verl.env={{SCRATCH: '{UNSET}'}}"],
     ["command line: backend.verl.env.SCRATCH: cannot resolve", "(got \"backend.verl.env="]),
    ("the-file-interpolation-is-the-files", GOOD + f"description: '{UNSET}'\n", ["seeds=[3]"],
     ["s.yaml: description: cannot resolve", "'CCPO_LAB_TEST_NOT_SET' not found"]),
    ("a-key-given-twice", GOOD, ["seeds=[0,1,2]", "seeds=[5]"],
     ["command line: seeds: duplicate override (first 'seeds=[0,1,2]', then 'seeds=[5]'); "
      "each key may be given once"]),
    ("a-key-given-twice-with-plus", GOOD, ["protocol.lr=0.1", "++protocol.lr=0.2"],
     ["command line: protocol.lr: duplicate override"]),
    ("the-launcher-given-twice", GOOD, ["launcher=slurm", "launcher.kind=local"],
     ["command line: launcher.kind: duplicate override (first 'launcher=slurm'"]),
    ("the-backend-given-twice", GOOD, ["backend=local", "backend.kind=verl"],
     ["command line: backend.kind: duplicate override (first 'backend=local'"]),
]


@pytest.mark.parametrize(("text", "extra", "fragments"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_override(workdir: Path, capsys: pytest.CaptureFixture[str], text: str,
                      extra: list[str], fragments: list[str]) -> None:
    path = workdir / "sweeps" / "s.yaml"
    path.write_text(text)
    line = _run(workdir, capsys, ["sweep", str(path), *extra, "--dry-run",
                                  "--results", str(workdir / "results")])
    for frag in fragments:
        assert frag in line, line


def test_distinct_keys_and_the_same_value_twice_are_not_duplicates(workdir: Path) -> None:
    from ccpo_lab.config.sweep import load_sweep

    sw = load_sweep(workdir / "sweeps" / "smoke.yaml",
                    ["protocol.lr=0.1", "protocol.total_steps=6", "seeds=[4]", "seeds=[4]",
                     "protocol.lr=0.10"])
    assert sw.config.protocol.lr == 0.1 and sw.config.protocol.total_steps == 6
    assert list(sw.config.seeds) == [4]
