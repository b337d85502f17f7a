"""A Ray cluster across a multi-node Slurm allocation, for runs with ``nnodes > 1``.

The head starts on this node (the allocation's first), one worker per other node through
``srun --nodes=1 --ntasks=1 --overlap -w NODE ray start --address HEAD --block``, and
:func:`wait_for_resources` polls ``ray.cluster_resources()`` until every GPU registered.
The trainer then joins through ``RAY_ADDRESS`` (verl-agent's ``ray.init`` reads it).

Two ways in, one implementation:

- the verl backend's ``train`` calls :func:`start_cluster` / :meth:`Cluster.stop` itself
  when ``nnodes > 1`` and ``RAY_ADDRESS`` is unset (the job runs ``execute_run`` once, on
  the first node);
- a job script may do it before the run instead, with the lines of :func:`sbatch_section`
  (``python -m ccpo_lab.backends.verl.ray_cluster up|down``); ``train`` then finds
  ``RAY_ADDRESS`` set and joins.

A single-node run needs none of this: the trainer starts its own Ray.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ccpo_lab.errors import UserError
from ccpo_lab.launch.registry import placement_here

RESOURCES = ("GPU", "CPU")


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: hosts (head first), resources per node, port."""

    hosts: tuple[str, ...]
    """Allocation hosts; the first is the head (this node)."""
    per_node: int
    """Resource units each node contributes (GPUs; CPUs for a CPU-only check)."""
    resource: str = "GPU"
    """``GPU`` (production) or ``CPU`` (a check on a machine without GPUs)."""
    port: int = 6379
    """GCS port of the head."""
    head_ip: str | None = None
    """Address the head binds and workers dial (default: this node's IP as Ray sees it)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the Ray processes (their workers inherit it: ``PYTHONPATH``)."""

    def environ(self) -> dict[str, str]:
        """``os.environ`` plus :attr:`env` (``PYTHONPATH`` prepended, not replaced)."""
        out = dict(os.environ)
        for k, v in self.env:
            out[k] = os.pathsep.join([v, out[k]]) if k == "PYTHONPATH" and out.get(k) else v
        return out

    @property
    def expected(self) -> int:
        """Units of :attr:`resource` the cluster must show."""
        return self.per_node * len(self.hosts)


@dataclass
class Cluster:
    """A started cluster (stop it with :meth:`stop`).

    Every Ray process runs under a ``ray start --block`` this module started (the head here,
    the workers through ``srun``); stopping ends those processes' groups, by pid, never
    other Ray instances of the machine (``ray stop`` would).
    """

    spec: ClusterSpec
    """What was started."""
    address: str
    """``ip:port`` of the head."""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """``ray start --head --block`` first, then the ``srun ... ray start --block`` steps."""

    @property
    def pids(self) -> list[int]:
        """Process ids (each one leads its own process group)."""
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        """Stop the workers' steps, then the head (best effort, never raises)."""
        stop_pids(list(reversed(self.pids)))
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=1)


def stop_pids(pids: list[int], timeout: float = 30.0) -> None:
    """SIGTERM each pid (a ``ray start --block`` stops its own processes), wait for it,
    then SIGKILL whatever is left in its process group."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie nobody reaps (no init in a container) has finished
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def pid_file(port: int) -> Path:
    """Where ``up`` records the pids that ``down`` stops (per job and port)."""
    job = (placement_here().job_id or f"u{os.getuid()}").replace("/", "_")
    base = os.environ.get("TMPDIR") or "/tmp"
    return Path(base) / f"ccpo-lab-ray-{job}-{port}.pids"


def ray_cli() -> list[str]:
    """The ``ray`` command of this environment."""
    exe = os.path.join(os.path.dirname(sys.executable), "ray")
    if os.access(exe, os.X_OK):
        return [exe]
    found = shutil.which("ray")
    return [found] if found else [sys.executable, "-m", "ray.scripts.scripts"]


def allocation_hosts() -> list[str]:
    """Hosts of the job this process runs in, as its launcher gives them (a Slurm
    allocation's nodes; this machine outside any job)."""
    return list(placement_here().hosts)


def this_host_first(hosts: list[str]) -> list[str]:
    """``hosts`` with this node first (the head runs where the job runs)."""
    import socket

    me = {socket.gethostname(), socket.gethostname().split(".")[0]}
    mine = [h for h in hosts if h in me or h.split(".")[0] in me]
    return mine[:1] + [h for h in hosts if h not in mine[:1]]


def _count_flag(spec: ClusterSpec) -> str:
    return f"--num-gpus={spec.per_node}" if spec.resource == "GPU" else \
        f"--num-cpus={spec.per_node}"


def head_command(spec: ClusterSpec, head_ip: str, ray: list[str] | None = None) -> list[str]:
    """``ray start --head`` on this node (``ray``: the command, default :func:`ray_cli`)."""
    return [*(ray or ray_cli()), "start", "--head", f"--node-ip-address={head_ip}",
            f"--port={spec.port}", _count_flag(spec), "--include-dashboard=false",
            "--disable-usage-stats", "--block"]


def worker_command(spec: ClusterSpec, host: str, address: str,
                   ray: list[str] | None = None) -> list[str]:
    """``srun`` one blocking ``ray start`` on ``host``."""
    gres = [f"--gpus-per-node={spec.per_node}"] if spec.resource == "GPU" else []
    return ["srun", "--nodes=1", "--ntasks=1", "--overlap", *gres, "-w", host,
            *(ray or ray_cli()), "start", f"--address={address}", _count_flag(spec), "--block",
            "--disable-usage-stats"]


def wait_for_resources(address: str, resource: str, expected: int, timeout: float,
                       head: subprocess.Popen[bytes] | None = None) -> float:
    """Poll ``ray.cluster_resources()[resource]`` until ``>= expected``; return the count.

    Raises :class:`TimeoutError` with the last count when ``timeout`` seconds pass, and
    ``RuntimeError`` when the ``head`` process exits first.
    """
    import socket

    import ray

    deadline = time.monotonic() + timeout
    host, _, port = address.rpartition(":")
    while True:  # the head's GCS port opens a few seconds after the start
        if head is not None and head.poll() is not None:
            raise RuntimeError(f"the Ray head exited with code {head.returncode}")
        try:
            with socket.create_connection((host, int(port)), timeout=2.0):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no Ray head answered at {address}") from None
            time.sleep(1.0)
    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        have = 0.0
        while True:
            have = float(ray.cluster_resources().get(resource, 0.0))
            if have >= expected:
                return have
            if time.monotonic() > deadline:
                raise TimeoutError(f"Ray cluster at {address} shows {have:g} {resource}, "
                                   f"expected {expected} after {timeout:g} s")
            time.sleep(2.0)
    finally:
        ray.shutdown()


def start_cluster(spec: ClusterSpec, *, timeout: float = 600.0,
                  srun_workers: bool = True) -> Cluster:
    """Start the head here and the workers through ``srun``; wait for every resource.

    ``srun_workers=False``: the other nodes join by themselves (:func:`join_cluster`, one
    job task per node); only the head starts here.
    """
    if spec.resource not in RESOURCES:
        raise ValueError(f"resource must be one of {RESOURCES}, got {spec.resource!r}")
    import ray.util

    head_ip = spec.head_ip or ray.util.get_node_ip_address()
    address = f"{head_ip}:{spec.port}"
    cluster = Cluster(spec, address)
    cluster.procs.append(subprocess.Popen(head_command(spec, head_ip), stdout=sys.stderr,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          env=spec.environ()))
    try:
        for host in spec.hosts[1:] if srun_workers else ():
            cluster.procs.append(subprocess.Popen(worker_command(spec, host, address),
                                                  stdout=sys.stderr, stdin=subprocess.DEVNULL,
                                                  start_new_session=True, env=spec.environ()))
        wait_for_resources(address, spec.resource, spec.expected, timeout,
                           head=cluster.procs[0])
    except BaseException:
        cluster.stop()
        raise
    return cluster


def join_cluster(spec: ClusterSpec, *, timeout: float = 600.0) -> None:
    """Run a blocking Ray worker on this node, joining the head at ``spec.hosts[0]``.

    Retries until the head answers (or ``timeout`` passes), then returns when the cluster
    goes away (the head stopped at the end of the run).
    """
    address = f"{spec.head_ip or spec.hosts[0]}:{spec.port}"
    cmd = [*ray_cli(), "start", f"--address={address}", _count_flag(spec), "--block",
           "--disable-usage-stats"]
    deadline = time.monotonic() + timeout
    while True:
        t0 = time.monotonic()
        rc = subprocess.run(cmd, check=False, stdout=sys.stderr, env=spec.environ()).returncode
        if rc == 0 or time.monotonic() - t0 > 60:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no Ray head answered at {address} within {timeout:g} s")
        time.sleep(5.0)


def sbatch_section(nodes: int, gpus_per_node: int, *, port: int = 6379,
                   python: str = "python3") -> list[str]:
    """Job-script lines that start the cluster before the run and stop it after."""
    mod = f"{python} -m ccpo_lab.backends.verl.ray_cluster"
    up = f"{mod} up --nodes {nodes} --per-node {gpus_per_node} --port {port}"
    return [
        f"# ccpo-lab: Ray cluster across the allocation ({nodes} nodes x {gpus_per_node} GPUs):",
        "# head on this node, workers through srun, then wait until every GPU registered",
        f'eval "$({up})" || exit 1',
        f"trap '{mod} down' EXIT",
    ]


def _spec_from_args(a: argparse.Namespace) -> ClusterSpec:
    hosts = tuple(a.hosts.split(",")) if a.hosts else tuple(this_host_first(allocation_hosts()))
    if a.nodes is not None and len(hosts) < a.nodes:
        raise UserError(f"the allocation has {len(hosts)} node(s), the run needs {a.nodes}")
    if a.nodes is not None:
        hosts = hosts[:a.nodes]
    return ClusterSpec(hosts=hosts, per_node=a.per_node, resource=a.resource, port=a.port,
                       head_ip=a.head_ip)


def main(argv: list[str] | None = None) -> int:
    """``python -m ccpo_lab.backends.verl.ray_cluster up|down`` (``up`` prints an export)."""
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.backends.verl.ray_cluster")
    ap.add_argument("action", choices=["up", "down"])
    ap.add_argument("--nodes", type=int, default=None, help="nodes to use (default: all)")
    ap.add_argument("--per-node", type=int, default=1, help="GPUs (or CPUs) per node")
    ap.add_argument("--resource", choices=RESOURCES, default="GPU")
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--hosts", default=None,
                    help="comma-separated hosts (default: the job's allocation)")
    ap.add_argument("--head-ip", default=None)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    a = ap.parse_args(argv)
    if a.action == "down":
        pf = pid_file(a.port)
        if pf.is_file():
            stop_pids([int(x) for x in pf.read_text().split()])
            pf.unlink()
        return 0
    spec = _spec_from_args(a)
    head_ip = spec.head_ip or "HEAD_IP"
    address = f"{head_ip}:{spec.port}"
    if a.dry_run:
        print(shlex.join(head_command(spec, head_ip, ["ray"])))
        for host in spec.hosts[1:]:
            print(shlex.join(worker_command(spec, host, address, ["ray"])) + " &")
        print(f"# wait until ray.cluster_resources()[{spec.resource!r}] >= {spec.expected}")
        print(f"export RAY_ADDRESS={address}")
        return 0
    # Everything Ray prints goes to stderr: stdout is the one line the job script evals.
    stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        cluster = start_cluster(spec, timeout=a.timeout)
    finally:
        sys.stdout = stdout
    pid_file(spec.port).write_text(" ".join(str(p) for p in reversed(cluster.pids)))
    print(f"export RAY_ADDRESS={shlex.quote(cluster.address)}", flush=True)
    # the Popen objects go away with this process; the processes stay (own sessions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
