"""A run as a SkyPilot task (the ``skypilot`` launcher's YAML, as a mapping).

The task (``sky.Task.from_yaml_config`` reads it; nothing here imports SkyPilot):

* ``resources``: ``accelerators: <launcher.accelerator>:<GPUs per node>`` (the backend's
  count), ``use_spot``, ``job_recovery`` (``FAILOVER``, ``max_restarts_on_errors``),
  ``infra``, ``image_id``, ``disk_size``; ``num_nodes``: the backend's nodes;
* ``file_mounts``: the results bucket at ``launcher.mount_path`` (``MOUNT_CACHED``:
  checkpoints written there survive a preemption), and the run's directory and the
  sweep's manifest as ccpo-lab wrote them here (copied once, to seed the bucket);
* ``setup``: the user's lines, then ccpo-lab's install (``launcher.install``; a verl run
  also ``ccpo-lab install-into`` its trainer interpreter);
* ``run``: on node 0, the run's directory is seeded into the bucket unless it is there
  already (a recovered job finds its checkpoints and resumes), then
  ``python -m ccpo_lab.runs.execute <bucket path of the run>``; on several nodes node 0
  first starts a Ray head on ``SKYPILOT_NODE_IPS``' first address, the others join it
  (``SKYPILOT_NODE_RANK`` > 0), node 0 waits until every GPU registered and the trainer
  joins through ``RAY_ADDRESS``.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ccpo_lab.config.launchers.skypilot import SkyPilotSettings
from ccpo_lab.placement import Needs

INIT = "~/.ccpo-lab/init"
"""Where the run's directory and the sweep's manifest are copied on each node."""
RAY_PORT = 6379
"""The run's own Ray head port (SkyPilot's Ray uses another)."""
GPU_WAIT_S = 900
"""Seconds node 0 waits for every node's GPUs to join the run's Ray cluster."""


def job_name(run_id: str) -> str:
    """The managed job's name: ``ccpo-<16 hex digits of the run id>``."""
    return f"ccpo-{run_id[:16]}"


def _setup(s: SkyPilotSettings, backend: str | None, python: str) -> str:
    lines = [*s.setup, "set -e", s.install]
    if backend == "verl":
        lines.append(f"ccpo-lab install-into {python}")
    return "\n".join(lines) + "\n"


def _seed(run: str, sweep: str) -> list[str]:
    """Shell lines that copy the run's directory and manifest into the bucket once."""
    return [f'R={run}', 'mkdir -p "$R"',
            f'[ -e "$R/run.json" ] || cp -a {INIT}/run/. "$R/"',
            f'[ -e {sweep}/sweep.json ] || cp {INIT}/sweep.json {sweep}/sweep.json']


def _run(run: str, sweep: str, python: str, needs: Needs) -> str:
    execute = f'{python} -u -m ccpo_lab.runs.execute "$R"'
    if needs.nodes <= 1:
        return "\n".join(["set -e", *_seed(run, sweep), 'mkdir -p "$R/logs"', 'cd "$R/logs"',
                          f"exec {execute}"]) + "\n"
    ray = f"{python} -m ray.scripts.scripts"
    wait = (f'{python} -c "from ccpo_lab.backends.verl.ray_cluster import wait_for_resources; '
            f"wait_for_resources('$HEAD_IP:{RAY_PORT}', 'GPU', {needs.gpus}, {GPU_WAIT_S})\"")
    per_node = "--num-gpus=$SKYPILOT_NUM_GPUS_PER_NODE --disable-usage-stats"
    return "\n".join([
        'HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
        'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then',
        "  set -e", *("  " + x for x in _seed(run, sweep)),
        f'  {ray} start --head --node-ip-address="$HEAD_IP" --port={RAY_PORT} {per_node}',
        f"  {wait}", '  mkdir -p "$R/logs"', '  cd "$R/logs"',
        f'  RAY_ADDRESS="$HEAD_IP:{RAY_PORT}" exec {execute}',
        "else",
        f'  until {ray} start --address="$HEAD_IP:{RAY_PORT}" {per_node}; do sleep 5; done',
        "fi"]) + "\n"


def task_config(s: SkyPilotSettings, needs: Needs, *, run_dir: Path, sweep_dir: Path,
                run_id: str, backend: str | None, python: str) -> dict[str, Any]:
    """The SkyPilot task of one run (a YAML mapping): see the module docstring.
    ``run_dir``/``sweep_dir``: here; their place in the bucket mirrors the results
    folder (``<mount>/<sweep>/<arm>/<seed-N>``)."""
    rel = run_dir.resolve().relative_to(sweep_dir.resolve().parent)
    mount = s.mount_path.rstrip("/")
    run, sweep = f"{mount}/{rel.as_posix()}", f"{mount}/{sweep_dir.name}"
    resources: dict[str, Any] = {"use_spot": s.use_spot,
                                 "job_recovery": {"strategy": "FAILOVER",
                                                  "max_restarts_on_errors":
                                                      s.max_restarts_on_errors}}
    if needs.gpus_per_node:
        resources["accelerators"] = f"{s.accelerator}:{needs.gpus_per_node}"
    elif needs.cpus:
        resources["cpus"] = f"{needs.cpus}+"
    for key in ("infra", "image_id", "disk_size"):
        if getattr(s, key) is not None:
            resources[key] = getattr(s, key)
    mounts: dict[str, Any] = {f"{INIT}/run": str(run_dir.resolve()),
                              f"{INIT}/sweep.json": str((sweep_dir / "sweep.json").resolve())}
    if s.bucket:
        mounts[mount] = {"source": s.bucket, "mode": "MOUNT_CACHED"}
    python = shlex.quote(python)
    return {"name": job_name(run_id), "num_nodes": needs.nodes, "resources": resources,
            "envs": {**{k: str(v) for k, v in s.envs.items()}, "CCPO_LAB_SKYPILOT_RUN": run},
            "file_mounts": mounts, "setup": _setup(s, backend, python),
            "run": _run(run, sweep, python, needs)}
