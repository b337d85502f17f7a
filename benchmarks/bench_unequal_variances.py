"""The family-wise error of ccpo-lab's adaptive design when one arm varies more (issue 31).

Run: ``.venv/bin/python benchmarks/bench_unequal_variances.py [--studies N] [--seed S]``.

Null studies of the AdaStop benchmark's kind (:mod:`bench_adastop`: 5 arms, looks at
3/6/9/12 seeds, alpha 0.05, normal scores, rho 0 or 0.5) where arm ``a``'s sd is 2 or 4
times the others', or the reference's is 1/2 or 1/4 of theirs: the rate of studies with
any claim, for each declared test and each ``variance`` (``own``, the default, and
``pooled``), ± its Monte-Carlo se. AdaStop's rates on such studies are in
``bench_adastop.py --unequal`` (fewer studies: it is slow).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_adastop import ARMS, RHOS, machine, run_ccpo, studies  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", type=int, default=8000, help="null studies per row")
    ap.add_argument("--seed", type=int, default=777, help="seed of the studies' Generator")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    print(f"{args.studies} null studies a row, seed {args.seed}; {machine()}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for rho in RHOS:
        for arm, ratio in ((1, 2.0), (1, 4.0), (0, 0.5), (0, 0.25)):
            x = studies("normal", rho, (0.0,) * len(ARMS), args.studies, rng)
            x[:, arm] *= ratio
            cells = []
            for test in ("unpaired", "paired"):
                for variance in ("own", "pooled"):
                    fw = (run_ccpo(x, test, variance=variance)["claims"] != 0).any(axis=1)
                    cells.append(f"{test} {variance} {fw.mean():.4f}±"
                                 f"{fw.std() / np.sqrt(fw.size):.4f}")
            print(f"rho {rho:g}, sd of {ARMS[arm]} x{ratio:g}: " + "; ".join(cells),
                  flush=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
