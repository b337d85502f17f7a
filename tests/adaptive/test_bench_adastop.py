"""benchmarks/bench_adastop.py's own parts (its AdaStop half needs a download: not run)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_adastop",
                                                  REPO / "benchmarks" / "bench_adastop.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_adastop"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dist", ["normal", "lognormal", "bimodal"])
def test_the_studies_have_sd_one_and_the_stated_correlation(dist: str) -> None:
    b = _bench()
    x = b.studies(dist, 0.5, (0.0,) * 5, 4000, np.random.default_rng(0))
    assert x.shape == (4000, 5, 12)
    assert abs(float(x.mean())) < 0.02 and abs(float(x.std()) - 1.0) < 0.02
    r = np.corrcoef(x[:, 0, :].ravel(), x[:, 1, :].ravel())[0, 1]
    assert abs(r - 0.5) < 0.03


def test_the_summary_pairs_power_with_the_reference_design() -> None:
    b = _bench()
    rng = np.random.default_rng(1)
    x0 = b.studies("normal", 0.0, (0.0,) * 5, 200, rng)
    x1 = b.studies("normal", 0.0, b.EFFECTS, 200, rng)
    res = (b.run_ccpo(x0, "unpaired"), b.run_ccpo(x1, "unpaired"))
    r = b.summarise(*res, res[1])
    assert r["p1_d"] == 0.0 and r["p2"] > 0.8 and 0.0 <= r["fwer"] <= 0.15
    assert 20 <= r["s0"] <= 60 and "±" in b.row_text("x", r)
