"""Benchmark of the advantage estimators on a realistic ALFWorld-sized batch.

One run, figures and ratios printed (no pass/fail):

    .venv/bin/python benchmarks/bench_estimators.py [--rows-scale 1.0] [--repeats 3]
        [--device cpu|cuda] [--threads 2,1] [--omp-wait-policy passive|active]
        [--phi alfworld|tied] [--arms A,B,...]

Batch: 16 tasks x 8 trajectories; a success ends after 10-50 turns with reward 10, a
failure runs the full 50 turns; 10% of actions are invalid (-0.1, and the next anchor
observation is "Nothing happens."); anchor observations follow a random walk over each
task's ~25 locations (with revisits), the first one shared by the task's trajectories,
as in ALFWorld. ``phi``: 3584-d float32 hidden states with a large common offset, three
dominant "register" directions, a per-observation component, a turn drift and noise.

Each estimator runs in a fresh spawned process per torch thread count (so one's freed
memory cannot hide another's peak): a warm-up call whose peak resident memory above the
pre-call level is reported (sampled every 0.5 ms; on CUDA the peak device memory allocated
above the pre-call level), then ``--repeats`` timed calls (median wall and process CPU
time reported). In the same process, a fixed reference computation (a float32
1024 x 3584 x 1024 matrix product, ~7.5 GFLOP) is timed the same way: the ``x ref``
column (estimator wall / reference wall) is the figure to compare across machines and
loads. The load average (``/proc/loadavg``) is printed before and after.

On a machine with more runnable threads than cores, OpenMP's default spin-waiting makes
every parallel operation wait for a descheduled partner thread: at 2 threads on a shared
2-core machine this multiplied the CCPO arms' CPU time by 4-7 (measured 2026-11-30).
``--omp-wait-policy passive`` sets ``OMP_WAIT_POLICY`` in the measuring processes (waiting
threads sleep) to show the figures without that artefact.
verl's ``compute_grpo_outcome_advantage`` runs on the same rows (token-level rewards with
each row's score, episode reward minus its own penalty, on its last response token).

``x eigh`` (issue 30): the estimator's wall time over that of a plain
``torch.linalg.eigh`` of the same ``phi``'s float64 covariance (``d x d``, the exact
decomposition the reference's SVD amounts to), timed in the same process. ``--phi tied``
replaces ``phi`` by isotropic Gaussian features (top singular values nearly tied, s3/s4
about 1.002), where the whitening cannot certify the randomized subspace and computes the
exact one. The ``-as-run`` arms compute on the batch as given (no padding copies here).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import threading
import time
from typing import Any

import numpy as np

ARMS = ("grpo", "gigpo", "ccpo-global-successor", "ccpo-return-hard",
        "ccpo-return-hard-fbjw", "grpo-as-run", "gigpo-as-run", "ccpo-global-successor-as-run",
        "ccpo-return-hard-as-run", "ccpo-return-hard-fbjw-as-run")
"""The shipped arms, resolved from ``arms/*.yaml`` in each measuring process."""
RESPONSE_LEN = 512
HIDDEN = 3584


def make_batch(seed: int = 0, scale: float = 1.0, phi_kind: str = "alfworld"
               ) -> dict[str, Any]:
    """A realistic batch as plain arrays (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n_tasks, n_traj = 16, 8
    task, traj, step, obs, reward, valid = [], [], [], [], [], []
    for t in range(n_tasks):
        n_loc = int(rng.integers(15, 31))
        popularity = 1.0 / np.arange(1, n_loc + 1) ** 1.1
        popularity /= popularity.sum()
        start = f"task {t}: You are in the middle of a room. Looking quickly around you, " \
                f"you see {n_loc} receptacles. Your task is to: put object {t} somewhere."
        for j in range(n_traj):
            success = rng.random() < 0.5
            length = int(rng.integers(10, 51)) if success else 50
            length = max(2, int(round(length * scale)))
            here, seen, state = start, [start], 0
            for s in range(length):
                ok = rng.random() > 0.1
                task.append(f"task-{t}")
                traj.append(f"task-{t}/traj-{j}")
                step.append(s)
                obs.append(here)
                valid.append(ok)
                r = 10.0 if success and s == length - 1 else 0.0
                reward.append(r - (0.0 if ok else 0.1))
                if not ok:
                    here = "Nothing happens."
                elif rng.random() < 0.2 and len(seen) > 1:
                    here = seen[int(rng.integers(len(seen)))]
                else:
                    state += int(rng.random() < 0.12)
                    loc = int(rng.choice(n_loc, p=popularity))
                    here = f"task {t}: You arrive at receptacle {loc}. You see " \
                           f"{'nothing' if (loc + state) % 4 else 'an object'} (state {state})."
                    seen.append(here)
    n = len(task)
    uniq = {o: i for i, o in enumerate(dict.fromkeys(obs))}
    table = rng.standard_normal((len(uniq), HIDDEN), dtype=np.float32) * 3.0
    register = rng.standard_normal((3, HIDDEN), dtype=np.float32)
    offset = rng.standard_normal(HIDDEN, dtype=np.float32) * 5.0
    drift = rng.standard_normal(HIDDEN, dtype=np.float32) * 0.05
    phi = rng.standard_normal((n, HIDDEN), dtype=np.float32)
    phi += table[[uniq[o] for o in obs]]
    phi += offset
    phi += rng.standard_normal((n, 3), dtype=np.float32) * np.float32(20.0) @ register
    phi += np.asarray(step, dtype=np.float32)[:, None] * drift
    if phi_kind == "tied":  # isotropic: nearly tied top singular values
        phi = rng.standard_normal((n, HIDDEN), dtype=np.float32) + offset
    return {"task_uid": task, "traj_uid": traj, "step": step, "anchor_obs": obs,
            "reward": np.asarray(reward, dtype=np.float32), "valid": np.asarray(valid),
            "phi": phi}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


class PeakSampler:
    """Peak resident memory while active, sampled from /proc every 0.5 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self.start = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(0.0005)

    def __enter__(self) -> PeakSampler:
        self.start = self.peak = _rss_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


def _reference_gemm(repeats: int, device: str) -> float:
    """Median wall seconds of a fixed float32 1024 x 3584 x 1024 product."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1024, HIDDEN, generator=gen).to(device)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        a @ a.T
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def _reference_eigh(phi: Any, repeats: int) -> float:
    """Median wall seconds of ``torch.linalg.eigh`` of ``phi``'s float64 covariance."""
    import torch

    x = phi.cpu().to(torch.float64)
    x -= x.mean(0)
    cov = x.T @ x
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        torch.linalg.eigh(cov)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _child(label: str, seed: int, scale: float, repeats: int, device: str, threads: int,
           queue: Any, phi_kind: str = "alfworld") -> None:
    import torch

    from ccpo_lab.estimators import StepBatch, get_estimator

    torch.set_num_threads(threads)
    raw = make_batch(seed, scale, phi_kind)
    phi = torch.from_numpy(raw["phi"]).to(device)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    result: dict[str, Any] = {"label": label, "rows": len(raw["task_uid"]),
                              "phi_bytes": phi.numel() * phi.element_size()}
    if label == "verl-grpo":
        try:
            from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
        except ImportError:
            queue.put({**result, "missing": True})
            return

        n = len(raw["task_uid"])
        score = np.zeros(n, dtype=np.float32)
        sums: dict[str, float] = {}
        for tj, r in zip(raw["traj_uid"], raw["reward"], strict=True):
            sums[tj] = sums.get(tj, 0.0) + float(r)
        score[:] = [sums[tj] - 0.1 * (not ok)
                    for tj, ok in zip(raw["traj_uid"], raw["valid"], strict=True)]
        tlr = torch.zeros(n, RESPONSE_LEN, device=device)
        tlr[:, -1] = torch.from_numpy(score).to(device)
        mask = torch.ones(n, RESPONSE_LEN, device=device)
        index = np.asarray(raw["task_uid"], dtype=object)

        def call() -> Any:
            return compute_grpo_outcome_advantage(tlr, mask, index)
    else:
        from pathlib import Path

        from ccpo_lab.config.arms import load_arm

        arm = load_arm(label, Path(__file__).resolve().parents[1] / "arms").estimator
        name, params = arm.name, arm.params
        reward = torch.from_numpy(raw["reward"]).to(device)

        def make() -> Any:
            return StepBatch(task_uid=raw["task_uid"], traj_uid=raw["traj_uid"],
                             step=raw["step"], anchor_obs=raw["anchor_obs"], reward=reward,
                             valid=raw["valid"], phi=phi if name == "ccpo" else None)
        t0 = time.perf_counter()
        make()
        result["batch_first_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        batch = make()
        result["batch_s"] = time.perf_counter() - t0
        est = get_estimator(name, **params)

        def call() -> Any:
            return est(batch)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with PeakSampler() as sampler:
        t0 = time.perf_counter()
        out = call()
        sync()
        first = time.perf_counter() - t0
    result["first_s"] = first
    result["peak_extra_bytes"] = (torch.cuda.max_memory_allocated() - base if cuda
                                  else sampler.peak - sampler.start)
    times, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    result["median_s"] = statistics.median(times)
    result["cpu_s"] = statistics.median(cpu)
    result["ref_s"] = _reference_gemm(repeats, device)
    if label.startswith("ccpo"):
        result["eigh_s"] = _reference_eigh(phi, 1)
    result["threads"] = torch.get_num_threads()
    if label != "verl-grpo":
        result["diagnostics"] = out.diagnostics
    queue.put(result)


def run(label: str, seed: int, scale: float, repeats: int, device: str,
        threads: int, phi_kind: str = "alfworld") -> dict[str, Any]:
    """Run one measurement in a fresh spawned process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child,
                       args=(label, seed, scale, repeats, device, threads, queue, phi_kind))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def report(results: dict[str, dict[str, Any]], device: str) -> None:
    """Print one thread count's table."""
    labels = [lab for lab in results if not results[lab].get("missing")]
    rows = results[labels[0]]["rows"]
    hard = next(results[lab] for lab in labels if lab.startswith("ccpo"))
    phi_mb = hard["phi_bytes"] / 2**20
    verl = results.get("verl-grpo", {}).get("median_s", float("nan"))
    print(f"batch: {rows} rows, 16 tasks x 8 trajectories, phi {HIDDEN}-d float32 "
          f"({phi_mb:.1f} MiB) on {device}, torch threads {hard['threads']}; StepBatch "
          f"construction {hard['batch_s'] * 1e3:.1f} ms with phi (first one in the "
          f"process {hard['batch_first_s'] * 1e3:.1f} ms); reference product "
          f"{hard['ref_s'] * 1e3:.1f} ms")
    print(f"{'estimator':24s} {'median ms':>10s} {'cpu ms':>8s} {'first ms':>9s} "
          f"{'x ref':>6s} {'x verl GRPO':>11s} {'peak extra MiB':>15s} {'x phi':>6s} "
          f"{'x eigh':>7s}")
    for lab in labels:
        r = results[lab]
        extra = r["peak_extra_bytes"] / 2**20
        eigh = f"{r['median_s'] / r['eigh_s']:7.3f}" if "eigh_s" in r else f"{'-':>7s}"
        print(f"{lab:28s} {r['median_s'] * 1e3:10.1f} {r['cpu_s'] * 1e3:8.1f} "
              f"{r['first_s'] * 1e3:9.1f} {r['median_s'] / r['ref_s']:6.2f} "
              f"{r['median_s'] / verl:11.2f} {extra:15.1f} {extra / phi_mb:6.2f} {eigh}")
    eighs = [results[lab]["eigh_s"] for lab in labels if "eigh_s" in results[lab]]
    if eighs:
        print(f"plain torch.linalg.eigh of phi's {HIDDEN} x {HIDDEN} float64 covariance: "
              f"{statistics.median(eighs) * 1e3:.0f} ms (median over the CCPO processes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows-scale", type=float, default=1.0,
                    help="scale every trajectory length (1.0: ~5,000 rows)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="torch device of the tensors")
    ap.add_argument("--omp-wait-policy", choices=("passive", "active"), default=None,
                    help="OMP_WAIT_POLICY of the measuring processes (default: unset)")
    ap.add_argument("--threads", default="2,1",
                    help="torch thread counts, comma-separated (Ray workers often run "
                         "with OMP_NUM_THREADS=1)")
    ap.add_argument("--phi", choices=("alfworld", "tied"), default="alfworld",
                    help="features: ALFWorld-like (default) or isotropic, nearly tied")
    ap.add_argument("--arms", default=",".join(ARMS), help="arms to measure, comma-separated")
    args = ap.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    labels = ["verl-grpo", *arms]
    if args.omp_wait_policy:
        import os

        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    print(f"load average before: {_load()}; OMP_WAIT_POLICY "
          f"{args.omp_wait_policy or '(unset)'}")
    last: dict[str, dict[str, Any]] = {}
    for threads in (int(t) for t in args.threads.split(",")):
        last = {lab: run(lab, args.seed, args.rows_scale, args.repeats, args.device, threads,
                         args.phi) for lab in labels}
        if last["verl-grpo"].get("missing"):
            print("verl is not installed: no verl GRPO reference")
        report(last, args.device)
        print()
    print(f"load average after: {_load()}")
    print("goals: each CCPO arm <= 500 ms (2 threads); gigpo <= 0.5 x verl GRPO; "
          "peak extra <= 2 x phi")
    for lab in arms:
        if lab.startswith("ccpo"):
            d = last[lab]["diagnostics"]
            print(f"{lab}: live {d['live_frac']:.3f}, backoff {d['backoff_frac']:.3f}, "
                  f"buckets {d['n_buckets']:.0f} (mean size {d['bucket_size_mean']:.2f}, "
                  f"singletons {d['singleton_frac']:.2f}), lambda {d['lambda_mean']:.2f}, "
                  f"n_eff {d['n_eff_mean']:.2f}, |A_ep|/|A_step| {d['adv_ep_over_step']:.2f}")


if __name__ == "__main__":
    main()
