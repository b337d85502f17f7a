"""Slurm parameter validation and quoting (no cluster needed)."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from ccpo_lab.errors import UserError
from ccpo_lab.launch.params import (
    MAX_ARRAY_ENV,
    chunks,
    max_array_size,
    sbatch_extra_keys,
    sbatch_text,
    signal_delay_s,
    slurm_parameters,
)
from ccpo_lab.launch.slurm import SlurmSettings
from ccpo_lab.placement import Needs


def _launcher(**kw: object) -> SlurmSettings:
    return dataclasses.replace(SlurmSettings(), **kw)


def _flags(text: str) -> dict[str, str]:
    """``#SBATCH --key=value`` lines, values shell-unquoted."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --"):].partition("=")
            out[key] = shlex.split(value)[0] if value else ""
    return out


def test_first_class_fields_map_to_sbatch_flags() -> None:
    params = slurm_parameters(_launcher(partition="gpu", account="lab", qos="high",
                                        time_min=2880, cpus_per_task=64, mem_gb=900,
                                        constraint="h200", array_parallelism=4),
                              job_name="ccpo-study", needs=Needs(nodes=1, gpus_per_node=8))
    flags = _flags(sbatch_text(params, "/r/_jobs/%j", "python -m x", map_count=15))
    assert flags["partition"] == "gpu" and flags["account"] == "lab" and flags["qos"] == "high"
    assert flags["time"] == "2880" and flags["gpus-per-node"] == "8"
    assert flags["cpus-per-task"] == "64" and flags["mem"] == "900GB"
    assert flags["constraint"] == "h200" and flags["job-name"] == "ccpo-study"
    assert flags["array"] == "0-14%4"
    assert flags["signal"] == "USR2@90"


def test_hostile_strings_stay_quoted_values() -> None:
    evil = "gpu; touch /tmp/pwned $(id) `id` 'x\""
    params = slurm_parameters(_launcher(partition=evil, account="a b",
                                        sbatch_extra={"comment": evil,
                                                      "additional_parameters":
                                                          {"mail-user": evil}}),
                              job_name="ccpo-x")
    text = sbatch_text(params, "/tmp/res ults/$(id)/%j", "python -m x")
    flags = _flags(text)
    assert flags["partition"] == evil and flags["comment"] == evil
    assert flags["mail-user"] == evil and flags["account"] == "a b"
    assert flags["output"].startswith("/tmp/res ults/$(id)/")
    srun = next(line for line in text.splitlines() if line.startswith("srun"))
    assert shlex.split(srun)[3].replace("%t", "0") == flags["output"]


@pytest.mark.parametrize("field", ["partition", "account", "qos", "constraint"])
def test_control_characters_are_refused(field: str) -> None:
    with pytest.raises(UserError, match="control characters") as e:
        slurm_parameters(_launcher(**{field: "gpu\nrm -rf ~"}), job_name="x")
    assert e.value.key == f"launcher.{field}"


def test_setup_lines_are_one_line_each() -> None:
    params = slurm_parameters(_launcher(setup=["module load cuda/12", "source env.sh"]),
                              job_name="x")
    text = sbatch_text(params, "/r/%j", "python -m x")
    assert "module load cuda/12\nsource env.sh" in text
    with pytest.raises(UserError, match="control characters") as e:
        slurm_parameters(_launcher(setup=["ok", "a\nb"]), job_name="x")
    assert e.value.key == "launcher.setup[1]"


def test_unknown_extra_key_lists_valid_ones() -> None:
    with pytest.raises(UserError) as e:
        slurm_parameters(_launcher(sbatch_extra={"exclud": "node1"}), job_name="x")
    assert e.value.key == "launcher.sbatch_extra.exclud"
    assert "exclude" in e.value.valid and "gres" in e.value.valid
    assert "partition" not in e.value.valid  # first-class field, not an extra
    assert "exclude" in sbatch_extra_keys()


def test_extra_key_owned_by_a_field_points_at_it() -> None:
    with pytest.raises(UserError, match="launcher.time_min"):
        slurm_parameters(_launcher(sbatch_extra={"time": 5}), job_name="x")
    with pytest.raises(UserError, match="launcher.partition"):
        slurm_parameters(_launcher(sbatch_extra={"additional_parameters": {"partition": "a"}}),
                         job_name="x")


def test_additional_parameters_are_checked() -> None:
    ok = slurm_parameters(_launcher(sbatch_extra={"additional_parameters": {"hold": True,
                                                                            "requeue": True}}),
                          job_name="x")
    text = sbatch_text(ok, "/r/%j", "python -m x")
    assert "#SBATCH --hold\n" in text and "#SBATCH --requeue\n" in text
    for bad, match in ((({"output": "/x"}), "set by ccpo-lab"),
                       (({"Bad Flag": 1}), "not an sbatch long option"),
                       (({"hold": [1]}), "expected a string")):
        with pytest.raises(UserError, match=match):
            slurm_parameters(_launcher(sbatch_extra={"additional_parameters": bad}),
                             job_name="x")


def test_extra_value_types() -> None:
    params = slurm_parameters(_launcher(sbatch_extra={"exclude": "n1,n2", "exclusive": True,
                                                      "srun_args": ["--cpu-bind=none"]}),
                              job_name="x")
    text = sbatch_text(params, "/r/%j", "python -m x")
    assert "#SBATCH --exclude=n1,n2" in text and "--cpu-bind=none" in text
    with pytest.raises(UserError, match="expected a string, number or boolean"):
        slurm_parameters(_launcher(sbatch_extra={"exclude": ["n1"]}), job_name="x")


def test_signal_delay_fits_short_limits() -> None:
    assert signal_delay_s(1) == 15 and signal_delay_s(2) == 30 and signal_delay_s(60) == 90
    assert signal_delay_s(1) < 60


def test_chunks_split_at_array_limit() -> None:
    assert chunks(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert chunks(list(range(4)), 1001) == [[0, 1, 2, 3]]


def test_max_array_size_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_ARRAY_ENV, "3")
    assert max_array_size() == 3
    monkeypatch.setenv(MAX_ARRAY_ENV, "zero")
    with pytest.raises(UserError) as e:
        max_array_size()
    assert e.value.key == MAX_ARRAY_ENV
