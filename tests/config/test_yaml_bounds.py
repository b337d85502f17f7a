"""What a YAML file can expand to is bounded; an error echoes a value at a readable length.

A "billion laughs" alias bomb (each level nine aliases of the one before) is a few
hundred bytes that PyYAML builds as a small graph of shared objects, and that anything
walking it (a schema check, ``repr`` in an error message, MLflow's parameter flattening)
expands to 9**levels values. Every YAML document ccpo-lab reads (arm files, sweep files,
a run's ``config.yaml``) is refused beyond the bounds of :mod:`ccpo_lab.config.yamlio`,
before anything walks it; the refusals are checked in subprocesses with a memory limit
and a timeout (bounds, not timings: the old code ran out of both).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ccpo_lab.cli.main import main
from ccpo_lab.config.yamlio import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    load_yaml_file,
    read_yaml_mapping,
    safe_load_bounded,
)
from ccpo_lab.errors import UserError, short_repr
from tests.conftest import REPO

MEMORY_LIMIT = 1024 * 2**20
"""Address-space limit of the subprocesses (the CLI needs well under half of it)."""


def bomb(levels: int, width: int = 9) -> str:
    """A YAML flow sequence whose aliases expand to ``width**levels`` strings."""
    items = ['&a0 "lol"'] + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
                             for i in range(1, levels + 1)]
    return "[" + ", ".join(items) + "]"


def _cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``ccpo-lab ARGS`` in a subprocess limited to :data:`MEMORY_LIMIT` of memory."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ccpo_lab.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=limit)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert len(lines[0]) < 600
    return lines[0]


def test_an_alias_bomb_in_an_arm_file_is_refused_in_bounded_time_and_memory(
        workdir: Path) -> None:
    (workdir / "arms" / "bomb.yaml").write_text(
        f"name: bomb\nestimator:\n  name: grpo\ntraining:\n  lr: {bomb(9)}\n")
    line = _one_line(_cli(["arms", "show", "bomb"], workdir))
    assert "arms/bomb.yaml: arm file expands to more than 100,000 values once its aliases " \
           "are expanded (line 5)" in line


def test_a_small_alias_bomb_gets_a_short_error_line(workdir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """6 levels (531,441 strings) used to print a 4.3 MB error line; 4 levels (6,561)
    stay under the bound, and the wrong type is named with a cut value."""
    for levels, says in ((6, "expands to more than 100,000 values"),
                         (4, "training.lr: wrong type, expected float (got [")):
        (workdir / "arms" / "bomb.yaml").write_text(
            f"name: bomb\nestimator:\n  name: grpo\ntraining:\n  lr: {bomb(levels)}\n")
        assert main(["arms", "show", "bomb", "--arms-dir", str(workdir / "arms")]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err) < 600 and "\n" not in err


def test_an_alias_bomb_in_a_sweep_file_and_an_override_file(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = workdir / "sweeps" / "bomb.yaml"
    sweep.write_text(f"name: bomb\narms: [grpo]\nseeds: [0]\nanalysis:\n  metric: {bomb(9)}\n")
    assert main(["sweep", str(sweep), "--dry-run", "--results", str(workdir / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{sweep}: sweep file expands to more than 100,000 values" in err


@pytest.mark.parametrize(("text", "says"), [
    ("name: s\narms: &a [grpo, *a]\nseeds: [0]\n", "has an alias inside the collection it "
                                                    "names (line 2)"),
    ("name: s\narms: [grpo]\nseeds: [0]\nprotocol: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n",
     f"nests more than {MAX_YAML_DEPTH} levels deep (line 4)"),
    ("name: s\narms: [grpo]\nseeds: [" + ", ".join(["0"] * (MAX_YAML_VALUES + 10)) + "]\n",
     f"holds more than {MAX_YAML_VALUES:,} values (line 3)"),
], ids=["recursive-alias", "deep-nesting", "too-many-values"])
def test_recursive_deep_and_huge_documents_are_refused(tmp_path: Path, text: str,
                                                       says: str) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        read_yaml_mapping(p, "sweep file")
    assert str(e.value) == f"{p}: sweep file {says}"


def test_a_file_larger_than_a_configuration_is_not_read_whole(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_bytes(b"name: s\n" + b"#" * MAX_YAML_BYTES + b"\n")
    with pytest.raises(UserError, match="sweep file is larger than 4 MiB"):
        read_yaml_mapping(p, "sweep file")


def test_anchors_in_reasonable_use_are_read() -> None:
    doc = safe_load_bounded("base: &b {lr: 0.1, steps: [1, 2]}\nx: *b\ny: {<<: *b, lr: 0.2}\n")
    assert doc == {"base": {"lr": 0.1, "steps": [1, 2]}, "x": {"lr": 0.1, "steps": [1, 2]},
                   "y": {"lr": 0.2, "steps": [1, 2]}}
    # 7 levels of 4 aliases each: about 29,000 values, under the bound
    assert len(safe_load_bounded(bomb(7, width=4))) == 8


def test_a_runs_config_yaml_with_an_alias_bomb_is_not_expanded_by_sync(tmp_path: Path) -> None:
    from tests.report.builders import init_sweep, log_evals, sweep_file

    _, sweep_dir, rds = init_sweep(sweep_file(tmp_path, seeds=(0,), arms=("grpo",)),
                                   tmp_path / "results")
    rd = rds[("grpo", 0)]
    log_evals(rd, {0: 0.25, 5: 0.5})        # a run that started: sync logs its parameters
    rd.config_yaml.write_text(rd.config_yaml.read_text() + f"extra: {bomb(9)}\n")
    with pytest.raises(ValueError, match="config.yaml: YAML expands to more than 100,000"):
        load_yaml_file(rd.config_yaml)
    proc = _cli(["sync", str(sweep_dir)], tmp_path, timeout=300)
    assert "MemoryError" not in proc.stderr and proc.returncode in (0, 1, 2), proc.stderr
    out = proc.stdout + proc.stderr
    assert "grpo seed 0: config.yaml" in out and \
        "YAML expands to more than 100,000 values" in out, out


def test_echoed_values_keys_and_choices_are_cut_in_bounded_time() -> None:
    big = ["x" * 1000] * 10**6
    nested: list[object] = ["lol"]
    for _ in range(30):
        nested = [nested] * 9               # 9**30 values, shared: a repr would never end
    e = UserError("wrong type " + "m" * 5000, file="f" * 5000 + ".yaml", key="k" * 5000,
                  value=nested, valid=big, detail="\n".join(["row"] * 1000))
    text = str(e)
    first, *rest = text.splitlines()
    assert len(first) < 3000 and "characters]..." in first and "more)" in first
    assert len(rest) <= 41 and rest[-1] == "  ... (960 more lines)"
    assert len(short_repr(big)) <= 160 and short_repr([1, 2]) == "[1, 2]"
    assert str(UserError("bad", key="a.b", value=1e-3, valid=["x"])) == \
        "a.b: bad (got 0.001); valid: x"
