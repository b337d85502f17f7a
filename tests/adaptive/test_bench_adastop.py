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


def test_the_size_is_the_largest_null_error_over_equal_and_unequal_rows() -> None:
    b = _bench()

    def r(fw: float) -> dict[str, float]:
        return {"fwer": fw, "fwer_se": 0.01}

    figures = {
        "normal, rho 0": {"AdaStop 0.01": r(0.03), "ccpo-lab (unpaired)": r(0.04),
                          "ccpo-lab (paired)": r(0.30)},
        "bimodal, rho 0": {"AdaStop 0.01": r(0.02), "ccpo-lab (unpaired)": r(0.045)},
        "normal, rho 0.5": {"AdaStop 0.01": r(0.50), "ccpo-lab (paired)": r(0.04)},
        "unequal": {
            "normal, rho 0, sd of a x4": {"AdaStop 0.01": r(0.07),
                                          "ccpo-lab (unpaired, own)": r(0.03),
                                          "ccpo-lab (unpaired, pooled)": r(0.11)},
            "normal, rho 0.5, sd of a x4": {"AdaStop 0.01": r(0.90)},
        },
    }
    size = b.sizes(figures)
    assert size["AdaStop 0.01"] == (0.07, 0.01, "normal, rho 0, sd of a x4")
    assert size["ccpo-lab (unpaired, own)"] == (0.045, 0.01, "bimodal, rho 0")
    assert size["ccpo-lab (unpaired, pooled)"][0] == 0.11
    assert "ccpo-lab (paired)" not in size  # not the independent rows' declared test
