"""The ``skypilot`` launcher's tasks, checked by SkyPilot's own parser (issue 33).

SkyPilot cannot be installed beside the project's pinned packages (every release from 0.9
on needs ``click<8.2``; the lock pins 8.5.1), so its parser runs in a test-only virtual
environment, ``~/.cache/ccpo-lab-skypilot`` (``python -m venv`` there, then
``pip install skypilot==0.14.1``), or the interpreter ``$CCPO_LAB_SKY_PYTHON`` names; the
tests that need it are skipped, saying so, when it is absent. No cloud is reached:
``sky.Task.from_yaml_config`` reads the task as ``sky jobs launch`` would before
provisioning anything.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccpo_lab.cli.main import main
from ccpo_lab.config.sweep import load_sweep
from ccpo_lab.errors import UserError
from ccpo_lab.launch.manifest import write_manifest
from ccpo_lab.launch.plan import launcher_for, plan_sweep
from ccpo_lab.runs.layout import init_run_dir

SKY_PYTHON = Path(os.environ.get("CCPO_LAB_SKY_PYTHON",
                                  Path.home() / ".cache" / "ccpo-lab-skypilot" / "bin" /
                                  "python"))
needs_sky = pytest.mark.skipif(
    not SKY_PYTHON.exists(),
    reason=f"SkyPilot's parser is not installed at {SKY_PYTHON} (a test-only venv: SkyPilot "
           "cannot be installed beside the project's pinned click; see this module)")

PARSE = """
import json, sys, yaml, sky
out = []
for path in sys.argv[1:]:
    try:
        t = sky.Task.from_yaml_config(yaml.safe_load(open(path)))
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
        continue
    (r,) = list(t.resources)
    out.append({"name": t.name, "num_nodes": t.num_nodes, "accelerators": r.accelerators,
                "use_spot": r.use_spot, "recovery": r.job_recovery,
                "storage": sorted(t.storage_mounts), "files": sorted(t.file_mounts or {}),
                "run": t.run, "setup": t.setup, "envs": t.envs})
print(json.dumps(out, default=str))
"""
SEVEN_B = ("alfworld-qwen7b-slurm.yaml", "alfworld-qwen7b-node.yaml")
TWO_NODES = ["backend.verl.nnodes=2", "backend.verl.ppo_micro_batch_size_per_gpu=16"]


def sky_parse(paths: list[Path]) -> list[dict[str, Any]]:
    """What SkyPilot's parser makes of each task file (or the error it raises)."""
    r = subprocess.run([str(SKY_PYTHON), "-c", PARSE, *map(str, paths)], capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    out: list[dict[str, Any]] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def tasks(workdir: Path, sweep: str, overrides: list[str], accelerator: str = "H200"
          ) -> list[Path]:
    """Every run's task file for ``sweep`` (its run directories written as a launch
    would, under ``workdir/results``)."""
    sw = load_sweep(workdir / "sweeps" / sweep,
                    ["launcher=skypilot", f"launcher.accelerator={accelerator}",
                     "launcher.bucket=s3://ccpo-test-bucket/results", *overrides])
    results = workdir / "results"
    plan = plan_sweep(sw, results)
    for p in plan:
        assert p.run_dir is not None
        init_run_dir(p.run_dir, p.run)
    write_manifest(sw, sw.sweep_dir(results), [(p.run, p.run_dir) for p in plan])
    launcher = launcher_for(sw, results)
    out = []
    for i, p in enumerate(plan):
        path = workdir / "tasks" / sweep / f"{i}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(launcher.task(p.run_dir)))  # type: ignore[attr-defined]
        out.append(path)
    return out


@needs_sky
@pytest.mark.slow
@pytest.mark.parametrize("sweep", SEVEN_B)
@pytest.mark.parametrize("nodes", [1, 2])
def test_the_7b_sweeps_tasks_pass_skypilots_parser(workdir: Path, sweep: str,
                                                   nodes: int) -> None:
    paths = tasks(workdir, sweep, TWO_NODES if nodes == 2 else [])
    parsed = sky_parse(paths)
    assert len(parsed) == 15 and not [p for p in parsed if "error" in p], parsed[:1]
    assert len({p["name"] for p in parsed}) == 15  # one managed job per run
    for p in parsed:
        assert p["num_nodes"] == nodes and p["accelerators"] == {"H200": 8}
        assert p["use_spot"] is True and p["recovery"]["strategy"] == "FAILOVER"
        assert p["storage"] == ["/ccpo-results"]  # the bucket: checkpoints survive
        assert "ccpo-lab install-into python3" in p["setup"]
        assert p["envs"]["CCPO_LAB_SKYPILOT_RUN"].startswith("/ccpo-results/alfworld-qwen7b")
        assert '-m ccpo_lab.runs.execute "$R"' in p["run"]
        if nodes == 2:
            assert "SKYPILOT_NODE_RANK" in p["run"] and "SKYPILOT_NODE_IPS" in p["run"]
            assert "wait_for_resources" in p["run"] and ", 'GPU', 16," in p["run"]
        else:
            assert "SKYPILOT_NODE_RANK" not in p["run"]


@needs_sky
@pytest.mark.slow
def test_the_generated_script_seeds_the_bucket_once_and_resumes(workdir: Path) -> None:
    """The run section, executed by bash with a directory for the bucket: the first
    start seeds the run's directory; a recovery finds it and does not overwrite it."""
    (path,) = tasks(workdir, "smoke.yaml", ["arms=[grpo]", "seeds=[0]"])
    (parsed,) = sky_parse([path])
    assert "error" not in parsed and parsed["accelerators"] is None
    mount, home = workdir / "bucket", workdir / "home"
    init = home / ".ccpo-lab" / "init"
    task = yaml.safe_load(path.read_text())
    (init / "run").mkdir(parents=True)
    src = Path(task["file_mounts"]["~/.ccpo-lab/init/run"])
    for f in src.iterdir():
        if f.is_file():
            (init / "run" / f.name).write_bytes(f.read_bytes())
    (init / "sweep.json").write_bytes(Path(task["file_mounts"]
                                           ["~/.ccpo-lab/init/sweep.json"]).read_bytes())
    script = task["run"].replace("/ccpo-results", str(mount)).replace(
        "exec python -u -m ccpo_lab.runs.execute", "echo would-execute")
    env = {**os.environ, "HOME": str(home)}
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                       timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    run = mount / "smoke" / "grpo" / "seed-0"
    assert (run / "run.json").is_file() and (mount / "smoke" / "sweep.json").is_file()
    assert r.stdout.strip() == f'would-execute {run}'
    (run / "state.json").write_text('{"state": "running", "step": 3}')  # the bucket's
    (init / "run" / "state.json").write_text('{"state": "pending"}')   # a stale copy
    assert subprocess.run(["bash", "-c", script], env=env, timeout=60, check=False,
                          capture_output=True).returncode == 0
    assert json.loads((run / "state.json").read_text())["step"] == 3


@needs_sky
@pytest.mark.slow
def test_skypilots_parser_leaves_accelerator_names_to_its_launch(workdir: Path) -> None:
    """What docs/launcher-skypilot.md says: offline, SkyPilot's parser accepts any
    accelerator name (a Kubernetes cluster may define its own); an unknown one is
    rejected only when ``sky jobs launch`` looks for machines (not reachable here)."""
    (path,) = tasks(workdir, "alfworld-qwen7b-slurm.yaml", ["arms=[grpo]", "seeds=[0]"],
                    accelerator="H2000")
    (parsed,) = sky_parse([path])
    assert parsed.get("accelerators") == {"H2000": 8}, parsed


def test_without_the_extra_a_launch_is_one_line_and_writes_nothing(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("yaml")
    try:
        import sky  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("SkyPilot is installed in this environment")
    results = workdir / "results"
    assert main(["sweep", str(workdir / "sweeps" / "smoke.yaml"), "launcher=skypilot",
                 "launcher.bucket=s3://b/c", "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ccpo-lab[skypilot]" in err
    assert "launcher.kind" in err and not results.exists()


def test_bad_settings_are_refused_at_load(workdir: Path) -> None:
    smoke = workdir / "sweeps" / "smoke.yaml"
    for bad, key in (("launcher.bucket=my-bucket", "launcher.bucket"),
                     ("launcher.accelerator='H100;rm'", "launcher.accelerator"),
                     ("launcher.mount_path=relative", "launcher.mount_path"),
                     ("launcher.max_restarts_on_errors=-1",
                      "launcher.max_restarts_on_errors")):
        with pytest.raises(UserError) as e:
            load_sweep(smoke, ["launcher=skypilot", bad])
        assert e.value.key == key
