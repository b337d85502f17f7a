"""Configuration names launchers by strings resolved on use (issue 25): loading a sweep
imports no launcher module and no run-files module; the kinds' settings are configuration's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ccpo_lab.config.launchers.kinds import BUILTIN, kinds, settings_class
from ccpo_lab.errors import UserError
from tests.conftest import REPO

PROBE = """
import json, sys
from ccpo_lab.config.sweep import load_sweep
for path, overrides in json.loads(sys.argv[1]):
    load_sweep(path, overrides)
print(json.dumps(sorted(m for m in sys.modules
                        if m.startswith(("ccpo_lab.launch", "ccpo_lab.runs")))))
"""


@pytest.mark.parametrize("sweep", ["demo.yaml", "smoke.yaml", "alfworld-qwen7b-slurm.yaml",
                                   "demo-adaptive.yaml"])
def test_loading_a_sweep_imports_no_launcher(sweep: str) -> None:
    loads = [[str(REPO / "sweeps" / sweep), []],
             [str(REPO / "sweeps" / sweep), ["launcher=slurm", "launcher.partition=gpu",
                                             "launcher.sbatch_extra.comment=x"]],
             [str(REPO / "sweeps" / sweep), ["launcher=inline"]]]
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(loads)], cwd=REPO,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_builtin_kinds_name_their_launcher_by_string() -> None:
    assert kinds()[:3] == ["inline", "local", "slurm"]
    for kind, (settings, launcher) in BUILTIN.items():
        assert settings().kind == kind
        module, _, cls = launcher.partition(":")
        # the module is the kind without its dashes (ray-jobs: ccpo_lab.launch.rayjobs)
        assert module == f"ccpo_lab.launch.{kind.replace('-', '')}" and cls.endswith("Launcher")
    with pytest.raises(UserError, match="unknown launcher") as e:
        settings_class("nope", file="x.yaml")
    assert e.value.valid == kinds() and e.value.file == "x.yaml"
