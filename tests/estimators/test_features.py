"""Feature helpers: whitening (exact and low-rank paths), the context block, medians."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ccpo_lab.estimators import StepBatch
from ccpo_lab.estimators import features as feat

from .conftest import rows
from .naive import whiten as svd_whiten


def anisotropic(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Rows with a large offset and three dominant directions, like LM hidden states."""
    top = rng.normal(size=(3, d))
    x = rng.normal(size=(n, d)) + 4.0 * rng.normal(size=(1, d))
    return x + rng.normal(size=(n, 3)) * np.array([30.0, 20.0, 12.0]) @ top


def test_exact_path_matches_svd(rng: np.random.Generator) -> None:
    x = anisotropic(rng, 40, 12)
    got = feat.whiten(torch.tensor(x), 3).numpy()
    np.testing.assert_allclose(got, svd_whiten(x, 3), atol=1e-10)


def test_low_rank_path_matches_svd(rng: np.random.Generator) -> None:
    x = anisotropic(rng, 600, 300)  # min(N, d) > EXACT_LIMIT: randomized subspace iteration
    assert min(x.shape) > feat.EXACT_LIMIT
    got = feat.whiten(torch.tensor(x), 3)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), svd_whiten(x, 3), atol=1e-8)


def test_float32_path(rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feat, "SMALL_ELEMENTS", 0)  # force the large-batch arithmetic
    x = anisotropic(rng, 400, 300).astype(np.float32)
    got = feat.whiten(torch.tensor(x), 3)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), svd_whiten(x, 3), atol=2e-4)


def test_whitening_edge_cases() -> None:
    one = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    assert torch.equal(feat.whiten(one, 3), one)  # a single row is left as it is
    same = torch.ones(5, 4, dtype=torch.float64)
    assert torch.equal(feat.whiten(same, 3), torch.zeros(5, 4, dtype=torch.float64))
    three = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], dtype=torch.float64)
    np.testing.assert_allclose(feat.whiten(three, 3).numpy(), svd_whiten(three.numpy(), 3))


def test_top_directions_exact_drops_null_directions() -> None:
    x = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    v = feat.top_directions(x, 3)
    assert v.shape == (3, 1) and abs(abs(float(v[0, 0])) - 1.0) < 1e-12


def test_context_block_by_hand() -> None:
    # one trajectory: a, b, a, c -> t = 0..3, n_unique = 1, 2, 2, 3, revisit only at t=2
    cols = rows(("T", "X", ["a", "b", "a", "c"], [0.0, 0.0, 0.0, 0.0]))
    perm = [2, 0, 3, 1]
    batch = StepBatch(**{k: [v[i] for i in perm] for k, v in cols.items()})
    block = feat.context_block(batch).numpy()[np.argsort(perm)]

    def thermo(v: float, hi: float) -> list[float]:
        k = int(min(max(v / hi, 0.0), 1.0) * 12)
        return [1.0] * k + [0.0] * (12 - k)

    for t, (nu, rev) in enumerate([(1, 0), (2, 0), (2, 1), (3, 0)]):
        raw = np.array(thermo(t, 30) + thermo(nu, 25) + thermo(nu / (t + 1), 1.0) + [rev])
        np.testing.assert_allclose(block[t], raw / np.linalg.norm(raw))
    assert block.shape == (4, feat.CTX_DIM)


def test_identical_inputs_give_zero_distance() -> None:
    cols = rows(*[("T", f"J{k}", ["s"], [0.0]) for k in range(4)])
    phi = torch.tensor([[1.0, 2.0, 3.0]] * 3 + [[0.0, 1.0, 0.0]])
    batch = StepBatch(**cols, phi=phi)
    f = feat.build_features(batch, 0, "hidden+ctx", 1.0, torch.arange(4))
    d2 = f.exact_sq_dist(torch.tensor([0, 0, 1]), torch.tensor([1, 2, 3]))
    assert d2[0] == 0 and d2[1] == 0 and d2[2] > 0.1


@pytest.mark.parametrize("sizes", [[1], [2], [3, 4], [5, 1, 6], [10, 7]])
def test_masked_median_is_numpys(sizes: list[int], rng: np.random.Generator) -> None:
    from ccpo_lab.estimators.ccpo_credit import _masked_median

    vals = [rng.random(s) * 2 for s in sizes]
    width = max(sizes)
    padded = torch.zeros(len(sizes), width, dtype=torch.float64)
    valid = torch.zeros(len(sizes), width, dtype=torch.bool)
    for i, v in enumerate(vals):
        padded[i, :len(v)] = torch.tensor(v)
        valid[i, :len(v)] = True
    got = _masked_median(padded, valid, torch.tensor(sizes))
    np.testing.assert_allclose(got.numpy(), [np.median(v) for v in vals], rtol=0, atol=1e-15)


@pytest.mark.parametrize("arm", [{"gate": "global", "target": "successor-node"},
                                 {"gate": "hard", "rho": 0.8, "backoff_task": True}])
def test_chunking_and_batching_do_not_change_results(arm: dict[str, object],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny chunks, tiny bucket batches and the randomized whitening path: every boundary,
    # padded batch, lone-bucket view, selection median and the fused first pass in play
    from ccpo_lab.estimators import ccpo_credit, get_estimator

    from .conftest import agent_columns
    from .naive import naive_advantages

    cols = agent_columns(np.random.default_rng(4), n_tasks=4, n_traj=5, max_len=12, d=40)
    est = get_estimator("ccpo", **arm, whiten_k=3, phi="hidden+ctx")

    def run() -> np.ndarray:
        return est(StepBatch(task_uid=cols["task_uid"], traj_uid=cols["traj_uid"],
                             step=cols["step"], anchor_obs=cols["anchor_obs"],
                             reward=torch.tensor(cols["reward"]), valid=cols["valid"],
                             phi=torch.tensor(cols["phi"]))).advantages.numpy()

    default = run()
    monkeypatch.setattr(ccpo_credit, "SLICE_ROWS", 3)
    monkeypatch.setattr(feat, "PASS_CHUNK", 5)
    small = run()
    np.testing.assert_allclose(small, default, rtol=0, atol=1e-10)
    monkeypatch.setattr(feat, "EXACT_LIMIT", 8)  # randomized directions, first pass fused
    randomized = run()
    want = naive_advantages("ccpo", est.params, cols["task_uid"], cols["traj_uid"],
                            cols["step"], cols["anchor_obs"], cols["reward"], cols["valid"],
                            cols["phi"])
    # (the iteration stops when the top singular values settle; directions then agree
    # with a full SVD to ~1e-7 here)
    np.testing.assert_allclose(randomized, want, rtol=1e-6, atol=1e-6)
