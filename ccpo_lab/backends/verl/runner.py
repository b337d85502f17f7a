"""The verl backend's entry points: ``needs``, ``train``, ``worker`` and ``describe``.

``needs(run)`` states the run's resources once, from ``backend.verl``: ``nnodes`` nodes of
``n_gpus_per_node`` GPUs, the job run by ``backend.verl.python``. The launcher gives each task a
:class:`~ccpo_lab.placement.Placement` (hosts, rank, task count, CPUs); nothing here reads
a scheduler's variables.

``train`` runs verl-agent's trainer for one run directory, to completion, resuming from
the run's last checkpoint:

1. refuses a GPU layout that differs from the sweep's other runs (step-1 comparability)
   and a missing verl-agent checkout;
2. writes the placeholder data files, and on resume drops the ``metrics.jsonl`` rows after
   the checkpoint (the trainer logs them again);
3. records the command, the seeds and determinism settings, and the checkout's commit in
   ``run.json``;
4. with ``nnodes > 1`` and no ``RAY_ADDRESS``, starts a Ray cluster across the placement's
   hosts (:mod:`.ray_cluster`) and stops it afterwards (the other tasks of the job join it
   through :func:`worker`);
5. runs ``python -m ccpo_lab.backends.verl.agent.trainer`` (logs in ``logs/trainer.log`` and
   on stdout); the hooks write ``metrics.jsonl``, the step-1 rollouts and ``state.json``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

from ccpo_lab.backends.verl.agent.cpu import REPORT
from ccpo_lab.backends.verl.agent.weights import HF_DIR, merge_commands, read_best
from ccpo_lab.backends.verl.checkout import REFERENCE_COMMIT, inspect_checkout
from ccpo_lab.backends.verl.command import SETUP_HOOK, TrainerCommand, build_command, data_files
from ccpo_lab.backends.verl.datafiles import write_placeholder_data
from ccpo_lab.backends.verl.layout import check_run_layout, check_sweep_layout
from ccpo_lab.backends.verl.ray_cluster import (
    ClusterSpec,
    join_cluster,
    start_cluster,
    this_host_first,
)
from ccpo_lab.config.schema import RunConfig
from ccpo_lab.errors import UserError
from ccpo_lab.placement import Needs, Placement, this_host
from ccpo_lab.runs.layout import RunDir

LOG_NAME = "trainer.log"
RAY_WORKER_SETUP_HOOK = SETUP_HOOK
"""The hook a launcher that runs the job inside a Ray cluster (``ray-jobs``) puts in the
job's ``runtime_env`` (the trainer's own ``ray_init.runtime_env`` carries it too)."""


def needs(run: RunConfig) -> Needs:
    """``nnodes`` nodes of ``n_gpus_per_node`` GPUs, the job run by ``backend.verl.python``
    (the trainer environment, where ccpo-lab's job side is installed the way
    :mod:`ccpo_lab.backends.verl.trainer_env` says; the placement contract)."""
    s = run.backend.verl
    gpus = 0 if s.device == "cpu" else s.n_gpus_per_node   # cpu: Ray's GPU is logical
    return Needs(nodes=s.nnodes, gpus_per_node=gpus, python=s.python)


def check_sweep(runs: list[RunConfig], run_dirs: list[RunDir | None]) -> None:
    """Before anything is written or submitted: one valid GPU layout over the sweep, the
    same as the runs already in the sweep directory (compared once,
    through the first planned run: the layout is shared by every run of a sweep); on
    WebShop, its data where verl-agent reads it (:func:`.webshop.check_data`)."""
    check_sweep_layout(runs)
    webshop = next((r for r in runs if r.environment == "webshop"), None)
    if webshop is not None:   # its data is the same for every run: checked once
        from ccpo_lab.backends.verl.webshop import check_data

        check_data(webshop)
    first = next(((r, d) for r, d in zip(runs, run_dirs, strict=True) if d is not None), None)
    if first is not None:
        check_run_layout(first[0], first[1].path)


def latest_checkpoint(checkpoints: Path) -> int | None:
    """Step of the last complete checkpoint (verl's ``latest_checkpointed_iteration.txt``)."""
    f = checkpoints / "latest_checkpointed_iteration.txt"
    try:
        step = int(f.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    return step if (checkpoints / f"global_step_{step}").is_dir() else None


def resume_step(rd: RunDir) -> int | None:
    """The step of verl's last complete checkpoint (what :func:`train` resumes from)."""
    return latest_checkpoint(rd.checkpoints)


def command_for(run: RunConfig, rd: RunDir, placement: Placement | None = None
                ) -> TrainerCommand:
    """The command ``train`` would run now (resume-aware)."""
    return build_command(run, rd.path, resume=latest_checkpoint(rd.checkpoints) is not None,
                         placement=placement)


def describe(run: RunConfig, rd: RunDir, placement: Placement | None = None) -> str:
    """How ``run`` is seeded, then its exact trainer command line where ``placement`` puts
    it (for ``sweep --dry-run``: the launcher's planned placement)."""
    cmd = command_for(run, rd, placement)
    seeding = cmd.determinism["seeding"]
    env = seeding["env_seed"]
    head = (f"# seeding: env.seed={env['value']} (verl-agent streams {env['train_streams'][0]}"
            f"-{env['train_streams'][1]}, {env['val_streams'][0]}-{env['val_streams'][1]}; "
            "workers re-seeded per (seed, step)), vLLM engine seed "
            f"{seeding['vllm_engine_seed']['value']}, one sampling seed per request, "
            "rollout.seed unset; Ray limits "
            + " ".join(f"{k}={v}" for k, v in cmd.determinism["ray_env"].items()))
    return head + "\n  " + cmd.render()


def _prepare(run: RunConfig, rd: RunDir, placement: Placement
             ) -> tuple[TrainerCommand, int | None]:
    from ccpo_lab.runs.metrics import truncate_metrics

    check_run_layout(run, rd.path)
    info = inspect_checkout(run.backend.verl.verl_agent_path)
    if not info.exists:
        raise UserError("verl-agent checkout not found (no verl/trainer/main_ppo.py)",
                        key="backend.verl.verl_agent_path", value=str(info.path))
    train_file, val_file = data_files(rd.path)
    write_placeholder_data(train_file, run.protocol.train_batch_size, val_file,
                           run.protocol.val_batch_size)
    resume = latest_checkpoint(rd.checkpoints)
    truncate_metrics(rd.metrics, resume if resume is not None else -1)
    cmd = build_command(run, rd.path, resume=resume is not None, checkout=info,
                        placement=placement)
    rd.logs.mkdir(parents=True, exist_ok=True)
    rd.update_run(
        trainer={"argv": list(cmd.argv), "env": cmd.env, "cwd": cmd.cwd,
                 "resume_from_step": resume},
        verl_agent={"path": str(info.path), "commit": info.commit,
                    "hooks_written_for": REFERENCE_COMMIT},
        determinism=cmd.determinism,
        cpu_adapter=_cpu_adapter_record(run),
    )
    return cmd, resume


def _cpu_adapter_record(run: RunConfig) -> dict[str, Any] | None:
    """``run.json["cpu_adapter"]``: what the CPU adapter changes (None on a GPU device)."""
    if run.backend.verl.device != "cpu":
        return None

    return {"active": True, **REPORT}


def _run_trainer(cmd: TrainerCommand, log_path: Path) -> tuple[int, list[str]]:
    """Run the trainer; tee its output to ``log_path`` and stdout. Returns (rc, tail)."""
    env = {**os.environ, **cmd.env}
    if "PYTHONPATH" in os.environ and "PYTHONPATH" in cmd.env:
        env["PYTHONPATH"] = os.pathsep.join([cmd.env["PYTHONPATH"], os.environ["PYTHONPATH"]])
    tail: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(list(cmd.argv), cwd=cmd.cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)

    old: dict[int, Any] = {}

    def forward(signum: int, frame: Any) -> None:
        # stop the trainer, then let the previous handler act (submitit requeues on USR2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        prev = old.get(signum)
        if callable(prev):
            prev(signum, frame)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
        old[sig] = signal.signal(sig, forward)
    try:
        assert proc.stdout is not None
        with log_path.open("ab") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
                tail.append(line.decode("utf-8", errors="replace").rstrip())
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        end_process_group(proc)
    return rc, list(tail)


def group_members(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` that are not zombies (``/proc``; where it is
    missing, whether ``killpg(pgid, 0)`` finds any)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    out = []
    for d in proc_dir.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


STOP_GRACE_S = 60.0
"""Seconds the trainer's process group gets to end after SIGTERM before SIGKILL."""


def end_process_group(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE_S) -> None:
    """Leave no process of the trainer's session behind: SIGTERM its process group (the
    trainer, its Ray head and workers), wait up to ``grace`` seconds, then SIGKILL. The
    executor returns only after this, so a requeued or relaunched job never runs a second
    trainer beside a dying one on the same run directory."""
    import time

    def alive() -> bool:
        return bool(group_members(proc.pid))

    if proc.poll() is None or alive():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        if not alive():
            break
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10     # SIGKILL is delivered asynchronously
        while alive() and time.monotonic() < deadline:
            proc.poll()
            time.sleep(0.1)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def worker(run: RunConfig, rd: RunDir, placement: Placement) -> dict[str, Any]:
    """Tasks 1..n-1 of a one-task-per-node job: be a Ray worker node until the run ends.

    When ``RAY_ADDRESS`` is set (the job script started the cluster) there is nothing to do.
    Task 0 owns the run's state; this never touches it.
    """
    s = run.backend.verl
    if s.nnodes < 2 or os.environ.get("RAY_ADDRESS"):
        return {"rank": placement.rank}
    try:
        join_cluster(ClusterSpec(hosts=tuple(placement.hosts[:s.nnodes]),
                                 per_node=s.n_gpus_per_node, port=s.ray_port,
                                 env=_ray_env(run)))
    except Exception as e:  # noqa: BLE001 - reported; task 0 records the run's state
        print(f"ccpo-lab: Ray worker task ended: {type(e).__name__}: {e}", file=sys.stderr)
        return {"rank": placement.rank, "error": f"{type(e).__name__}: {e}"}
    return {"rank": placement.rank}


def _ray_env(run: RunConfig) -> tuple[tuple[str, str], ...]:
    """What Ray's processes (and so its workers) need: the checkout on ``PYTHONPATH``, the
    thread limits of ``backend.verl.ray_env`` and ``backend.verl.env``."""
    s = run.backend.verl
    env = {**s.ray_env_set(), **{str(k): str(v) for k, v in s.env.items()}}
    return (("PYTHONPATH", str(s.verl_agent_path)),
            *((k, v) for k, v in env.items() if k != "PYTHONPATH"))


def _start_cluster(run: RunConfig, placement: Placement) -> Any:
    """Task 0: the Ray head here; workers by ``srun`` unless every node has its own task."""
    s = run.backend.verl
    hosts = list(placement.hosts)
    if len(hosts) < s.nnodes:
        raise UserError(f"the allocation has {len(hosts)} node(s), the run needs {s.nnodes}",
                        key="backend.verl.nnodes", value=s.nnodes)
    per_task = placement.ntasks >= s.nnodes
    if not per_task:
        hosts = this_host_first(hosts)
    elif this_host_first(hosts)[0] != hosts[0]:
        raise UserError("task 0 of the job must run on the allocation's first node "
                        f"({hosts[0]}), where the other tasks look for the Ray head")
    spec = ClusterSpec(hosts=tuple(hosts[:s.nnodes]), per_node=s.n_gpus_per_node,
                       port=s.ray_port, env=_ray_env(run))
    return start_cluster(spec, srun_workers=not per_task)


def summary(run: RunConfig, rd: RunDir) -> dict[str, Any]:
    """Steps done and the last held-out value, from ``metrics.jsonl``."""
    from ccpo_lab.runs.metrics import read_metrics, series

    rows = read_metrics(rd.metrics)
    steps, vals = series(rows, "val/success_rate")
    out: dict[str, Any] = {"steps": max((int(r["step"]) for r in rows), default=0),
                           "total_steps": run.protocol.total_steps}
    if len(vals):
        out["val/success_rate"] = float(vals[-1])
        out["val_step"] = int(steps[-1])
    return out


def train(run: RunConfig, rd: RunDir, placement: Placement | None = None) -> dict[str, Any]:
    """Train ``run`` in ``rd`` to completion with verl-agent (see the module docstring);
    ``placement``: where the launcher put task 0 (default: this machine)."""
    where = placement if placement is not None else this_host()
    s = run.backend.verl
    multi = s.nnodes > 1 and not os.environ.get("RAY_ADDRESS")
    cmd, _ = _prepare(run, rd, where)
    cluster = _start_cluster(run, where) if multi else None
    if cluster is not None:
        cmd = TrainerCommand(argv=cmd.argv, overrides=cmd.overrides,
                             env={**cmd.env, "RAY_ADDRESS": cluster.address}, cwd=cmd.cwd,
                             determinism=cmd.determinism)
    try:
        rc, tail = _run_trainer(cmd, rd.logs / LOG_NAME)
    finally:
        if cluster is not None:
            cluster.stop()
    if rc != 0:
        last = "\n".join(tail[-15:])
        raise RuntimeError(f"verl-agent trainer exited with code {rc} (log: "
                           f"{rd.logs / LOG_NAME}); last lines:\n{last}")
    out = summary(run, rd)
    if out["steps"] < run.protocol.total_steps:
        raise RuntimeError(f"the trainer stopped at step {out['steps']} of "
                           f"{run.protocol.total_steps} without an error")
    export_hf_models(run, rd)
    return out


def export_hf_models(run: RunConfig, rd: RunDir) -> dict[str, Any]:
    """Merge the final and the best checkpoint into loadable Hugging Face weights.

    Runs verl-agent's ``scripts/model_merger.py`` with ``backend.verl.python`` (CPU is
    enough); a target that already holds a ``config.json`` is kept. Records
    ``run.json["hf_model"]``; a failed merge is recorded there (and printed), not raised:
    training itself completed.
    """
    s = run.backend.verl
    final = latest_checkpoint(rd.checkpoints)
    cmds = merge_commands(s.python, Path(s.verl_agent_path), rd.checkpoints, rd.path, final)
    best = read_best(rd.checkpoints)
    record: dict[str, Any] = {}
    for name, argv in cmds.items():
        target = rd.path / HF_DIR / name
        entry: dict[str, Any] = {"path": str(target), "source": argv[argv.index("--local_dir")
                                                                     + 1]}
        entry["step"] = final if name == "final" else (best or {}).get("step")
        if name == "best":
            entry["value"] = (best or {}).get("value")
        if not (target / "config.json").is_file():
            env = {**os.environ, **{k: str(v) for k, v in s.env.items()},
                   "PYTHONPATH": str(s.verl_agent_path)}
            r = subprocess.run(argv, cwd=str(s.verl_agent_path), env=env, text=True,
                               capture_output=True, check=False)
            if r.returncode != 0 or not (target / "config.json").is_file():
                tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
                entry["error"] = f"model_merger exited with {r.returncode}: {' | '.join(tail)}"
                print(f"ccpo-lab: hf_model/{name} not written: {entry['error']}",
                      file=sys.stderr)
        record[name] = entry
    if best is not None and int(best.get("step", 0)) == 0:
        record["best"] = {"step": 0, "value": best.get("value"), "path": s.model_path,
                          "note": "the best evaluation was the base model's"}
    rd.update_run(hf_model=record)
    return record
