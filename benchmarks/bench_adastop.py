"""ccpo-lab's adaptive design against AdaStop 0.1.3 on the same simulated studies (issue 31).

Run: ``.venv/bin/python benchmarks/bench_adastop.py [--studies N] [--quick] [--jobs J]``.

Each row is a kind of study: 5 arms (a reference and 4 others, 4 comparisons with the
reference), at most 12 seeds per arm, looks at 3/6/9/12 seeds, alpha 0.05; per-seed scores
normal, log-normal (sigma 0.8) or bimodal (25% failed seeds), standardised to sd 1; the
arms independent across seeds (rho 0) or sharing a seed effect (rho 0.5). Two studies per
row are simulated: the null (all arms equal) and an alternative (one arm +1 sd, one +2 sd,
two equal to the reference). Both designs read exactly the same scores.

* ccpo-lab: :func:`ccpo_lab.adaptive.simulate.run_design` with the default
  :class:`~ccpo_lab.config.design.AdaptiveDesign`; its declared test is ``unpaired`` on
  the independent rows (arms that share no seed effect; its statistic is then
  ``mean-or-rank``) and ``paired`` on the rho 0.5 rows (``mean``). On the independent
  rows ``unpaired`` with ``statistic: mean`` (the rule before the ranks) and ``paired``
  (what declaring pairs costs there) are printed too, and on every row the declared test
  with ``variance: pooled`` (the default before the own variances).
* Unequal variances (``--unequal``, on by default): null studies where arm ``a``'s sd is
  2 or 4 times the others', or the reference's 1/2 or 1/4 of theirs, normal scores, rho 0
  and 0.5 (``--unequal-rhos``): the family-wise error of both designs, each variance,
  when the arms do not vary alike. Their means are equal, so these are null studies of
  ccpo-lab's hypotheses too: an AdaStop level that is "level-corrected" for a test of
  means must hold its error on them as well (docs/adaptive-seeds.md).
* AdaStop 0.1.3 (``MultipleAgentsComparator(n=3, K=4, B, comparisons=[(0, i)])``) at
  alpha 0.025 and 0.05 (``--adastop-alphas``; the first is the level-corrected one the
  power differences are paired with: its 0.05 lets too much through), installed on
  first use in its own virtual environment under ``~/.cache/ccpo-lab-bench/adastop-0.1.3``
  (never a project dependency) and run there in ``--jobs`` worker processes.

Printed: per row and design, FWER (null; and false claims on the alternative's equal
arms), power at +1 and +2 sd, the power difference with AdaStop at the first level with
its paired Monte-Carlo error, mean seeds (of 60) at the null and the alternative, the
share of studies that stopped early, and the look at which the +2 sd arm was decided;
last, each design's size on the independent rows (:func:`sizes`).
``--quick``: 60 studies a row, AdaStop B 500 (a smoke run, minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
VENV = Path.home() / ".cache" / "ccpo-lab-bench" / "adastop-0.1.3"
ARMS = ["ref", "a", "b", "c", "d"]
EFFECTS = (0.0, 1.0, 2.0, 0.0, 0.0)  # the alternative, in sd of one seed's score
DISTS = ("normal", "lognormal", "bimodal")
RHOS = (0.0, 0.5)
LOOK, LOOKS, MAX_SEEDS = 3, 4, 12


def noise(dist: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Standardised noise (mean 0, sd 1) of one of :data:`DISTS`."""
    if dist == "normal":
        return rng.standard_normal(shape)
    if dist == "lognormal":
        s2 = 0.8**2
        x = rng.lognormal(0.0, 0.8, shape)
        return (x - np.exp(s2 / 2)) / np.sqrt((np.exp(s2) - 1) * np.exp(s2))
    failed = rng.random(shape) < 0.25  # a failed seed scores near 0, the others near 1
    x = np.where(failed, rng.normal(0.0, 0.05, shape), rng.normal(1.0, 0.25, shape))
    mean = 0.75
    var = 0.25 * 0.05**2 + 0.75 * 0.25**2 + 0.25 * 0.75 * 1.0
    return (x - mean) / np.sqrt(var)


def studies(dist: str, rho: float, effects: tuple[float, ...], n: int,
            rng: np.random.Generator) -> np.ndarray:
    """float (n, 5, 12): ``effect + sqrt(rho) u_seed + sqrt(1 - rho) e``."""
    u = rng.standard_normal((n, 1, MAX_SEEDS)) * np.sqrt(rho)
    e = noise(dist, (n, len(ARMS), MAX_SEEDS), rng) * np.sqrt(1.0 - rho)
    return np.asarray(effects)[None, :, None] + u + e


# --- AdaStop, in its own environment ---------------------------------------------------

def ensure_adastop() -> Path:
    """The Python of the AdaStop venv, created and filled on first use."""
    py = VENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import adastop"],
                                      capture_output=True).returncode == 0:
        return py
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "adastop==0.1.3",
                    "-c", str(REPO / "constraints.txt"), "-c", str(REPO / "requirements.lock")],
                   check=True)
    return py


def adastop_worker(path_in: str, path_out: str, alpha: float, b: int) -> None:
    """Run AdaStop on every study of ``path_in`` (.npy, (S, 5, 12)); write claims (S, 4)
    (+1 arm better than the reference, -1 worse, 0 none), seeds (S, 5), look of each
    comparison's decision (S, 4) to ``path_out`` (.npz). Runs in AdaStop's venv."""
    from adastop import MultipleAgentsComparator

    x = np.load(path_in)
    s_count, a_count, _ = x.shape
    claims = np.zeros((s_count, a_count - 1), dtype=np.int64)
    seeds = np.zeros((s_count, a_count), dtype=np.int64)
    closed = np.full((s_count, a_count - 1), LOOKS, dtype=np.int64)
    comps = np.array([(0, i) for i in range(1, a_count)])
    for s in range(s_count):
        cmp = MultipleAgentsComparator(n=LOOK, K=LOOKS, B=b, comparisons=comps, alpha=alpha,
                                       seed=s)
        for k in range(LOOKS):
            live = comps if k == 0 else cmp.current_comparisons
            for arm in set(np.asarray(live).ravel().tolist()):
                seeds[s, arm] = LOOK * (k + 1)
            cmp.partial_compare({str(a): x[s, a, :LOOK * (k + 1)] for a in range(a_count)},
                                verbose=False)
            for i in range(a_count - 1):
                d = cmp.decisions[str(comps[i])]
                if d in ("larger", "smaller") and claims[s, i] == 0:
                    # (0, i): "larger" means the reference is larger
                    claims[s, i] = -1 if d == "larger" else 1
                    closed[s, i] = k + 1
            if cmp.is_finished:
                break
    np.savez(path_out, claims=claims, seeds=seeds, closed=closed)


def run_adastop(py: Path, x: np.ndarray, alpha: float, b: int, jobs: int,
                tmp: Path) -> dict[str, np.ndarray]:
    """AdaStop on ``x`` in ``jobs`` worker processes of its venv; outputs concatenated."""
    parts = np.array_split(np.arange(x.shape[0]), jobs)
    procs = []
    for j, idx in enumerate(parts):
        np.save(tmp / f"in{j}.npy", x[idx])
        procs.append(subprocess.Popen(
            [str(py), __file__, "--adastop-worker", str(tmp / f"in{j}.npy"),
             str(tmp / f"out{j}.npz"), str(alpha), str(b)]))
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"the AdaStop worker failed (rc {p.returncode})")
    outs = [np.load(tmp / f"out{j}.npz") for j in range(len(parts))]
    return {k: np.concatenate([o[k] for o in outs]) for k in ("claims", "seeds", "closed")}


# --- ccpo-lab ------------------------------------------------------------------------

def run_ccpo(x: np.ndarray, test: str, **overrides: object) -> dict[str, np.ndarray]:
    from ccpo_lab.adaptive.simulate import default_design, run_design

    out = run_design(default_design(ARMS, test=test, **overrides), x, ARMS)
    return {"claims": out.claims, "seeds": out.seeds, "closed": out.closed_at}


# --- summary ---------------------------------------------------------------------------

def summarise(null: dict[str, np.ndarray], alt: dict[str, np.ndarray],
              ref: dict[str, np.ndarray]) -> dict[str, float]:
    """Rates with Monte-Carlo se; power differences paired with ``ref`` (same studies)."""
    truth = np.sign(np.asarray(EFFECTS[1:]))
    n0, n1 = null["claims"].shape[0], alt["claims"].shape[0]
    fw0 = (null["claims"] != 0).any(axis=1)
    wrong = ((alt["claims"] != 0) & (alt["claims"] != truth)).any(axis=1)
    out: dict[str, float] = {
        "fwer": fw0.mean(), "fwer_se": fw0.std() / np.sqrt(n0),
        "fwer_alt": wrong.mean(), "fwer_alt_se": wrong.std() / np.sqrt(n1),
    }
    for i, name in ((0, "p1"), (1, "p2")):
        hit = alt["claims"][:, i] == 1
        out[name] = hit.mean()
        out[name + "_se"] = hit.std() / np.sqrt(n1)
        diff = hit.astype(float) - (ref["claims"][:, i] == 1)
        out[name + "_d"] = diff.mean()
        out[name + "_dse"] = diff.std(ddof=1) / np.sqrt(n1)
    for key, res in (("s0", null), ("s1", alt)):
        tot = res["seeds"].sum(axis=1)
        out[key] = tot.mean()
        out[key + "_se"] = tot.std() / np.sqrt(tot.size)
        out[key + "_early"] = (tot < len(ARMS) * MAX_SEEDS).mean()
    out["look2"] = float(alt["closed"][:, 1].mean())
    return out


def row_text(name: str, r: dict[str, float]) -> str:
    return (f"  {name:24s} {r['fwer']:.3f}±{r['fwer_se']:.3f} {r['fwer_alt']:.3f}±"
            f"{r['fwer_alt_se']:.3f}  {r['p1']:.3f}±{r['p1_se']:.3f} ({r['p1_d']:+.3f}±"
            f"{r['p1_dse']:.3f})  {r['p2']:.3f} ({r['p2_d']:+.3f}±{r['p2_dse']:.3f})  "
            f"{r['s0']:4.1f}±{r['s0_se']:.1f} {r['s1']:4.1f}±{r['s1_se']:.1f}  "
            f"{r['s0_early']:.2f}/{r['s1_early']:.2f}  {r['look2']:.2f}")


def unequal(py: Path, args: argparse.Namespace, rng: np.random.Generator, tmp: Path,
            t0: float) -> dict[str, dict[str, float]]:
    """FWER of null studies where arm ``a`` has ``ratio`` times the others' sd, or the
    reference 1/2 or 1/4 of theirs."""
    out: dict[str, dict[str, float]] = {}
    for rho in args.unequal_rhos:
        for arm, ratio in ((1, 2.0), (1, 4.0), (0, 0.5), (0, 0.25)):
            x = studies("normal", rho, (0.0,) * len(ARMS), args.studies, rng)
            x[:, arm] *= ratio
            claims = {f"AdaStop {a:g}": run_adastop(py, x, a, args.b, args.jobs, tmp)["claims"]
                      for a in args.alphas}
            for test in ("unpaired", "paired"):
                for v in ("own", "pooled"):
                    claims[f"ccpo-lab ({test}, {v})"] = run_ccpo(x, test, variance=v)["claims"]
            key = f"normal, rho {rho:g}, sd of {ARMS[arm]} x{ratio:g}"
            print(f"\n{key} (null)  [{time.perf_counter() - t0:.0f} s]")
            out[key] = {}
            for name, c in claims.items():
                fw = (c != 0).any(axis=1)
                out[key][name] = {"fwer": fw.mean(), "fwer_se": fw.std() / np.sqrt(fw.size)}
                print(f"  {name:28s} FWER {fw.mean():.3f}±{fw.std() / np.sqrt(fw.size):.3f}")
            sys.stdout.flush()
    return out


def sizes(figures: dict[str, Any]) -> dict[str, tuple[float, float, str]]:
    """Each design's size on the independent rows: its largest FWER over their null studies,
    the equal-spread rows (``dist, rho 0``) and the unequal ones (``normal, rho 0, sd of
    ...``): ``name -> (FWER, its se, the row)``. Every one of those studies has equal
    means, so a test of means is held to alpha on all of them; an AdaStop level is
    level-corrected where its size is at most alpha. ccpo-lab's unpaired default is named
    ``ccpo-lab (unpaired, own)`` in both kinds of row."""
    rows = [(k, v) for k, v in figures.items() if k.endswith(", rho 0")]
    rows += [(k, v) for k, v in figures.get("unequal", {}).items() if ", rho 0," in k]
    out: dict[str, tuple[float, float, str]] = {}
    for row, designs in rows:
        for name, r in designs.items():
            key = "ccpo-lab (unpaired, own)" if name == "ccpo-lab (unpaired)" else name
            if not (key.startswith("AdaStop") or key.startswith("ccpo-lab (unpaired")):
                continue
            if key not in out or float(r["fwer"]) > out[key][0]:
                out[key] = (float(r["fwer"]), float(r["fwer_se"]), row)
    return out


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", type=int, default=300, help="simulated studies per row")
    ap.add_argument("--b", type=int, default=1000, help="AdaStop's random permutations")
    ap.add_argument("--jobs", type=int, default=2, help="AdaStop worker processes")
    ap.add_argument("--seed", type=int, default=31, help="seed of the studies' Generator")
    ap.add_argument("--quick", action="store_true", help="60 studies a row, B 500")
    ap.add_argument("--rows", default="all", help="'all' or comma-separated dist:rho, "
                    "e.g. normal:0,bimodal:0.5")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--unequal", action=argparse.BooleanOptionalAction, default=True,
                    help="also the null studies with one arm 2 or 4 times as variable, or "
                    "the reference 1/2 or 1/4")
    ap.add_argument("--unequal-rhos", default="0,0.5",
                    help="the seed correlations of those studies, comma-separated")
    ap.add_argument("--adastop-alphas", default="0.025,0.05",
                    help="AdaStop's levels, comma-separated; the first is the one the "
                    "power differences are paired with (level-corrected)")
    ap.add_argument("--adastop-worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.adastop_worker:
        a, b, alpha, bb = args.adastop_worker
        adastop_worker(a, b, float(alpha), int(bb))
        return
    if args.quick:
        args.studies, args.b = 60, 500
    args.alphas = tuple(float(a) for a in args.adastop_alphas.split(","))
    args.unequal_rhos = tuple(float(r) for r in args.unequal_rhos.split(","))
    rows = [(d, r) for d in DISTS for r in RHOS]
    if args.rows != "all":
        rows = [(d, float(r)) for d, r in (x.split(":") for x in args.rows.split(","))]
    py = ensure_adastop()
    t0 = time.perf_counter()
    print(f"{args.studies} studies a row (null and alternative), seed {args.seed}, AdaStop "
          f"B {args.b}; {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("columns: FWER null, false claims on the alternative's equal arms; power +1 sd "
          f"(minus AdaStop@{args.alphas[0]:g}'s, paired se); power +2 sd (idem); seeds of 60 null, "
          "alternative; share stopped early null/alternative; look deciding the +2 arm")
    figures: dict[str, Any] = {}
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for dist, rho in rows:
            x0 = studies(dist, rho, (0.0,) * len(ARMS), args.studies, rng)
            x1 = studies(dist, rho, EFFECTS, args.studies, rng)
            res = {}
            for alpha in args.alphas:
                res[f"AdaStop {alpha:g}"] = (run_adastop(py, x0, alpha, args.b, args.jobs, tmp),
                                           run_adastop(py, x1, alpha, args.b, args.jobs, tmp))
            declared = "unpaired" if rho == 0 else "paired"
            res[f"ccpo-lab ({declared})"] = (run_ccpo(x0, declared), run_ccpo(x1, declared))
            res[f"ccpo-lab ({declared}, pooled)"] = (
                run_ccpo(x0, declared, variance="pooled"),
                run_ccpo(x1, declared, variance="pooled"))
            if rho == 0:
                res["ccpo-lab (unpaired, mean)"] = (
                    run_ccpo(x0, "unpaired", statistic="mean"),
                    run_ccpo(x1, "unpaired", statistic="mean"))
                res["ccpo-lab (paired)"] = (run_ccpo(x0, "paired"), run_ccpo(x1, "paired"))
            ref = res[f"AdaStop {args.alphas[0]:g}"][1]
            key = f"{dist}, rho {rho:g}"
            figures[key] = {name: summarise(n, a, ref) for name, (n, a) in res.items()}
            print(f"\n{key}  [{time.perf_counter() - t0:.0f} s]")
            for name, r in figures[key].items():
                print(row_text(name, r))
            sys.stdout.flush()
        if args.unequal:
            figures["unequal"] = unequal(py, args, rng, tmp, t0)
    figures["size"] = sizes(figures)
    print("\nsize: the largest FWER over every null row above (the unpaired rows' declared "
          "test, rho 0)")
    for name, (fw, se, row) in figures["size"].items():
        print(f"  {name:28s} {fw:.3f}±{se:.3f}  ({row})")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=float))


if __name__ == "__main__":
    main()
