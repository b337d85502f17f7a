"""The decision rule on simulated studies, vectorised over studies: error rate, power, seeds.

A simulated study draws ``max_seeds`` seeds of every arm at once; the adaptive design sees
their prefixes look by look (3, 6, 9, 12 ...), exactly as a real sweep would see seeds in
order, and the fixed design sees all ``max_seeds`` (the design's family at one look).
Both read the same draws, so their difference has a small Monte-Carlo error.

The per-look rule is the one :func:`ccpo_lab.adaptive.decide.decide_look` applies (the
same :func:`~ccpo_lab.stats.sequential.step_down`, :func:`~ccpo_lab.stats.sequential.futile`
and nominal levels); ``tests/adaptive`` checks, study by study, that both agree.

Model: ``score[s, arm, seed] = mean[arm] + u[s, seed] + e[s, arm, seed]`` with a seed
effect ``u ~ N(0, rho sd^2)`` shared by the arms of a seed (why pairing pays) and
``e ~ N(0, (1 - rho) sd^2)``. Under the null (equal means) the paired t statistics are
pivotal, so the null error rate does not depend on ``sd`` or ``rho``.

``python -m ccpo_lab.adaptive.simulate [--studies N] [--seed S]`` prints the figures of the
README.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import special

from ccpo_lab.adaptive.levels import is_joint, levels_table, statistic
from ccpo_lab.config.design import AdaptiveDesign, every_arm_versus
from ccpo_lab.stats.compare import _ZERO_SPREAD_ULPS, holm  # the report's zero-spread rule
from ccpo_lab.stats.joint import JointStatistic, joint_df, max_test_p, pooled, rank_t
from ccpo_lab.stats.sequential import futile, step_down

__all__ = [
    "VARIANTS",
    "DesignOutcome",
    "Figures",
    "arm_indices",
    "default_design",
    "figures",
    "fixed_design",
    "run_design",
    "simulate_scores",
]


def simulate_scores(
    means: Sequence[float],
    n_studies: int,
    n_seeds: int,
    rng: np.random.Generator,
    sd: float = 1.0,
    rho: float = 0.5,
) -> NDArray[np.float64]:
    """Per-seed scores of simulated studies.

    Args:
        means: float (A,), each arm's true mean.
        n_studies: S.
        n_seeds: seeds drawn per arm (the design's ``max_seeds``).
        rng: the source of randomness.
        sd: sd of one seed's score.
        rho: correlation of two arms' scores on the same seed, in [0, 1).

    Returns:
        float (S, A, n_seeds).
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho must be in [0, 1), got {rho!r}")
    mu = np.asarray(means, dtype=np.float64)
    a = mu.size
    u = rng.standard_normal((n_studies, 1, n_seeds)) * (sd * np.sqrt(rho))
    e = rng.standard_normal((n_studies, a, n_seeds)) * (sd * np.sqrt(1.0 - rho))
    return mu[None, :, None] + u + e


def arm_indices(design: AdaptiveDesign, arms: Sequence[str]) -> NDArray[np.int64]:
    """int (m, 2): the positions in ``arms`` of each comparison's (arm, baseline)."""
    pos = {a: i for i, a in enumerate(arms)}
    missing = [a for a in design.arms if a not in pos]
    if missing:
        raise ValueError(f"arms {missing} of the design are not among {list(arms)}")
    return np.array([[pos[x], pos[y]] for x, y in design.comparisons], dtype=np.int64)


def _pooled_tests(
    scores: NDArray[np.float64], idx: NDArray[np.int64], n: int, paired: bool,
    counts: NDArray[np.int64], stat: JointStatistic = "mean",
) -> tuple[NDArray[np.float64], ...]:
    """As :func:`_tests` with the joint family's pooled variance
    (:mod:`ccpo_lab.stats.joint`): the mean differences on the first ``n`` seeds, the
    variance pooled over every comparison (paired) or arm (unpaired) of the design, each
    on the ``counts`` (S, A) seeds it has (an arm whose comparison closed keeps its
    seeds). ``df`` is the pool's; ``var_a, var_b`` the pooled variance of the test
    (paired: of a difference, and 0; unpaired: of a score, twice). ``mean-or-rank``: p is
    :func:`~ccpo_lab.stats.joint.max_test_p` of that t's and the ranks' (each comparison's
    first ``n`` seeds)."""
    s_count = scores.shape[0]
    rows = np.arange(s_count)[:, None]
    x = scores[:, idx[:, 0], :n]
    y = scores[:, idx[:, 1], :n]
    scale = np.maximum(np.abs(x).max(axis=2), np.abs(y).max(axis=2))
    if paired:
        d = scores[:, idx[:, 0], :] - scores[:, idx[:, 1], :]  # (S, m, N)
        c = counts[:, idx[:, 0]]  # (S, m): pairs of each comparison
        ss = _ss_at(d, c, rows)
        v, df = pooled(ss, np.maximum(c - 1.0, 0.0))
        v = v[:, None]
        diff = (x - y).mean(axis=2)
        se = np.sqrt(v / n) * np.ones_like(diff)
        va, vb, spread = v * np.ones_like(diff), np.zeros_like(diff), np.sqrt(v)
    else:
        used = np.unique(idx)
        c = counts[:, used]
        ss = _ss_at(scores[:, used, :], c, rows)
        v, df = pooled(ss, np.maximum(c - 1.0, 0.0))
        v = v[:, None]
        diff = x.mean(axis=2) - y.mean(axis=2)
        se = np.sqrt(2.0 * v / n) * np.ones_like(diff)
        va = vb = v * np.ones_like(diff)
        spread = np.sqrt(2.0 * v)
    df = df[:, None] * np.ones_like(diff)
    some = spread > _ZERO_SPREAD_ULPS * np.finfo(np.float64).eps * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
        p = np.where(some, 2.0 * special.stdtr(df, -np.abs(t)), np.nan)
    if stat == "mean-or-rank":
        p = max_test_p(p, diff, *rank_t(x, y, paired))
    return p, diff, se, df, va, vb


def _joint_tests(design: AdaptiveDesign, scores: NDArray[np.float64],
                 idx: NDArray[np.int64], n: int, paired: bool, counts: NDArray[np.int64]
                 ) -> tuple[NDArray[np.float64], ...]:
    """The joint family's tests at ``n`` seeds: the pooled t (:func:`_pooled_tests`), or
    (``variance: own``) each comparison's own test (:func:`_tests`), with the ranks'
    maximum test for ``mean-or-rank``."""
    stat = statistic(design)
    if design.variance == "pooled":
        return _pooled_tests(scores, idx, n, paired, counts, stat)
    p, diff, se, df, va, vb = _tests(scores, idx, n, paired)
    if stat == "mean-or-rank":
        p = max_test_p(p, diff, *rank_t(scores[:, idx[:, 0], :n], scores[:, idx[:, 1], :n],
                                        paired, variance="own"))
    return p, diff, se, df, va, vb


def _ss_at(z: NDArray[np.float64], c: NDArray[np.int64], rows: NDArray[np.int64]
           ) -> NDArray[np.float64]:
    """float (S, G): sum of squared deviations of ``z[s, g, :c[s, g]]`` from its mean."""
    s1 = np.cumsum(z, axis=2)
    s2 = np.cumsum(z * z, axis=2)
    cols = np.arange(z.shape[1])[None, :]
    at = np.maximum(c - 1, 0)
    a, b = s1[rows, cols, at], s2[rows, cols, at]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c >= 2, np.maximum(b - a * a / np.maximum(c, 1), 0.0), 0.0)


def _tests(
    scores: NDArray[np.float64], idx: NDArray[np.int64], n: int, paired: bool
) -> tuple[NDArray[np.float64], ...]:
    """p, diff, se, df, var_a, var_b, each (S, m), on the first ``n`` seeds, as
    :func:`ccpo_lab.stats.compare_arms` computes them (its zero-spread rule included: a
    spread within rounding of the data's magnitude is no spread, p nan)."""
    x = scores[:, idx[:, 0], :n]
    y = scores[:, idx[:, 1], :n]
    scale = np.maximum(np.abs(x).max(axis=2), np.abs(y).max(axis=2))
    if paired:
        d = x - y
        diff = d.mean(axis=2)
        va = d.var(axis=2, ddof=1)
        vb = np.zeros_like(va)
        se = np.sqrt(va / n)
        df = np.full_like(va, n - 1.0)
        spread = np.sqrt(va)
    else:
        diff = x.mean(axis=2) - y.mean(axis=2)
        va = x.var(axis=2, ddof=1)
        vb = y.var(axis=2, ddof=1)
        a, b = va / n, vb / n
        se = np.sqrt(a + b)
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (a + b) ** 2 / (a * a / (n - 1) + b * b / (n - 1))
        spread = np.sqrt(va + vb)
    some = spread > _ZERO_SPREAD_ULPS * np.finfo(np.float64).eps * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
        p = np.where(some, 2.0 * special.stdtr(df, -np.abs(t)), np.nan)
    return p, diff, se, df, va, vb


@dataclass(frozen=True)
class DesignOutcome:
    """What the adaptive design did in each simulated study.

    Attributes:
        claims: int (S, m): +1 'better', -1 'worse', 0 no claim.
        closed_at: int (S, m): the look (1-based) that closed each comparison.
        futile: bool (S, m): closed early for futility.
        seeds: int (S, A): seeds each arm received (0 for arms in no comparison).
    """

    claims: NDArray[np.int64]
    closed_at: NDArray[np.int64]
    futile: NDArray[np.bool_]
    seeds: NDArray[np.int64]


def run_design(
    design: AdaptiveDesign,
    scores: NDArray[np.float64],
    arms: Sequence[str],
    paired: bool | None = None,
    method: Literal["calibrated", "normal"] = "calibrated",
) -> DesignOutcome:
    """Run the adaptive design on simulated studies (all looks on plan, no missing runs).

    Args:
        design: the design (its comparisons name entries of ``arms``).
        scores: float (S, A, >= max_seeds), per-seed scores in seed order
            (:func:`simulate_scores`).
        arms: (A,) arm names of ``scores``' second axis.
        paired: paired t-tests on common seeds (the arms share seeds), else unpaired
            (Welch's t); default: the design's declared ``test``.
        method: the nominal levels: ``calibrated`` (what decisions use) or ``normal``
            (Holm's significance-level approach, to measure what calibration buys).

    Returns:
        :class:`DesignOutcome`.
    """
    idx = arm_indices(design, arms)
    s_count, a_count, n_avail = scores.shape
    if n_avail < design.max_seeds:
        raise ValueError(f"scores hold {n_avail} seeds, the design needs {design.max_seeds}")
    m = idx.shape[0]
    plan = design.planned_seeds()
    paired = design.test == "paired" if paired is None else paired
    table = levels_table(design, plan, paired, method)  # (K, m)
    joint = is_joint(design) and method == "calibrated"
    power_df = _power_df(design, paired, m) if joint else None
    k_last = len(plan) - 1
    open_ = np.ones((s_count, m), dtype=bool)
    rejected, is_futile = np.zeros((s_count, m), dtype=bool), np.zeros((s_count, m), bool)
    claims, closed_at = np.zeros((s_count, m), np.int64), np.zeros((s_count, m), np.int64)
    seeds = np.zeros((s_count, a_count), dtype=np.int64)
    for k, n in enumerate(plan):
        _hold(seeds, idx, open_, n)
        p, diff, se, df, va, vb = (_joint_tests(design, scores, idx, n, paired, seeds)
                                   if joint else _tests(scores, idx, n, paired))
        testable = open_ & np.isfinite(p)
        nom = np.broadcast_to(table[k][None, None, :], (1, m, m))
        now, family = step_down(p, testable, rejected, nom)
        rejected |= now
        claims = np.where(now, np.sign(diff).astype(np.int64), claims)
        closing = now.copy()
        if k == k_last:
            closing |= open_
        elif design.futility:
            final_level = table[k_last][np.maximum(family, 1) - 1]
            stop = testable & ~now & futile(diff, se, df, va, vb, design.max_seeds, final_level,
                                            design.power, design.futility_confidence, power_df)
            is_futile |= stop
            closing |= stop
        closed_at = np.where(closing & open_, k + 1, closed_at)
        open_ &= ~closing
        if not open_.any():
            break
    return DesignOutcome(claims, closed_at, is_futile, seeds)


def _power_df(design: AdaptiveDesign, paired: bool, m: int) -> NDArray[np.float64] | None:
    """The joint family's df at the last look for power (pooled), None for own tests."""
    return joint_df(design.max_seeds, _kind(paired), m) if design.variance == "pooled" \
        else None


def _kind(paired: bool) -> Literal["paired", "unpaired"]:
    return "paired" if paired else "unpaired"


def _hold(seeds: NDArray[np.int64], idx: NDArray[np.int64], open_: NDArray[np.bool_],
          n: int) -> None:
    """In place: the arms of comparisons open at this look hold ``n`` seeds."""
    for j in range(idx.shape[0]):
        for a in idx[j]:
            seeds[:, a] = np.where(open_[:, j], n, seeds[:, a])


def fixed_design(
    design: AdaptiveDesign,
    scores: NDArray[np.float64],
    arms: Sequence[str],
    paired: bool | None = None,
    n_seeds: int | None = None,
) -> NDArray[np.int64]:
    """The fixed design's claims: every comparison at ``n_seeds`` seeds, one look.

    The design's family at a single look: the joint max-|t| step-down (a family whose
    comparisons share one baseline, ``family: joint``), else Holm-adjusted p < alpha.

    Args:
        design, scores, arms, paired: as :func:`run_design`.
        n_seeds: seeds per arm (the first ``n_seeds`` of ``scores``); default
            ``design.max_seeds``.

    Returns:
        int (S, m): +1 'better', -1 'worse', 0 no claim.
    """
    idx = arm_indices(design, arms)
    n = design.max_seeds if n_seeds is None else int(n_seeds)
    paired = design.test == "paired" if paired is None else paired
    if is_joint(design):
        counts = np.full((scores.shape[0], scores.shape[1]), n, dtype=np.int64)
        p, diff = _joint_tests(design, scores, idx, n, paired, counts)[:2]
        table = levels_table(design, (n,), paired, max_seeds=n)
        m = idx.shape[0]
        none = np.zeros(p.shape, dtype=bool)
        now, _ = step_down(p, np.isfinite(p), none,
                           np.broadcast_to(table[0][None, None, :], (1, m, m)))
        return np.where(now, np.sign(diff).astype(np.int64), 0)
    p, diff = _tests(scores, idx, n, paired)[:2]
    p_holm = np.apply_along_axis(holm, 1, p)
    with np.errstate(invalid="ignore"):
        hit = p_holm < design.alpha
    return np.where(hit, np.sign(diff).astype(np.int64), 0)


@dataclass(frozen=True)
class Figures:
    """One scenario: the adaptive design and the fixed designs on the same simulated studies.

    Attributes:
        n_studies: S.
        fixed_seeds: seeds per arm of the fixed design compared (default max_seeds).
        false_claim_rate: (adaptive, fixed) rate of studies with any claim on a null
            comparison or in the wrong direction (the family-wise error).
        power: float (m, 2): per comparison, the rate of correct-direction claims
            (adaptive, fixed); nan for null comparisons.
        power_diff_se: float (m,): Monte-Carlo se of ``power[:, 0] - power[:, 1]`` (both
            designs read the same studies: the se of the paired difference).
        mean_seeds: (adaptive, fixed) seeds per study summed over arms.
        equal_cost_seeds: seeds per arm of a fixed design that costs at least as much as
            the adaptive design on average (``ceil`` of its mean seeds per arm, >= 2).
        equal_cost_power: float (m,), that fixed design's power (nan for null ones).
        futile_rate: float (m,), the rate of futility stops per comparison.
    """

    n_studies: int
    fixed_seeds: int
    false_claim_rate: tuple[float, float]
    power: NDArray[np.float64]
    power_diff_se: NDArray[np.float64]
    mean_seeds: tuple[float, float]
    equal_cost_seeds: int
    equal_cost_power: NDArray[np.float64]
    futile_rate: NDArray[np.float64]


def figures(
    design: AdaptiveDesign,
    means: Sequence[float],
    arms: Sequence[str],
    n_studies: int,
    rng: np.random.Generator,
    sd: float = 1.0,
    rho: float = 0.5,
    paired: bool | None = None,
    fixed_seeds: int | None = None,
) -> Figures:
    """Simulate ``n_studies`` studies and summarise the designs (see :class:`Figures`).

    Args:
        design: the adaptive design (its comparisons name entries of ``arms``).
        means: float (A,), the arms' true means (in units of ``sd``).
        arms: (A,) names.
        n_studies: S.
        rng: the source of randomness.
        sd, rho: as :func:`simulate_scores`.
        paired: as :func:`run_design`.
        fixed_seeds: seeds per arm of the fixed design to compare with (default
            ``design.max_seeds``; e.g. 12 against an adaptive maximum of 13).
    """
    n_fixed = design.max_seeds if fixed_seeds is None else int(fixed_seeds)
    scores = simulate_scores(means, n_studies, max(design.max_seeds, n_fixed), rng, sd, rho)
    out = run_design(design, scores, arms, paired)
    fixed = fixed_design(design, scores, arms, paired, n_fixed)
    idx = arm_indices(design, arms)
    mu = np.asarray(means, dtype=np.float64)
    truth = np.sign(mu[idx[:, 0]] - mu[idx[:, 1]]).astype(np.int64)  # (m,)

    def false_claims(c: NDArray[np.int64]) -> float:
        return float(((c != 0) & (c != truth[None, :])).any(axis=1).mean())

    def hits(c: NDArray[np.int64]) -> NDArray[np.bool_]:
        return (c == truth[None, :]) & (truth[None, :] != 0)

    def power(c: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.where(truth != 0, hits(c).mean(axis=0), np.nan)

    paired_diff = hits(out.claims).astype(np.float64) - hits(fixed)
    diff_se = paired_diff.std(axis=0, ddof=1) / np.sqrt(n_studies)
    used = np.unique(idx)
    ad_seeds = float(out.seeds.sum(axis=1).mean())
    n_eq = max(int(np.ceil(ad_seeds / used.size - 1e-9)), 2)
    return Figures(
        n_studies=n_studies,
        fixed_seeds=n_fixed,
        false_claim_rate=(false_claims(out.claims), false_claims(fixed)),
        power=np.stack([power(out.claims), power(fixed)], axis=1),
        power_diff_se=np.where(truth != 0, diff_se, np.nan),
        mean_seeds=(ad_seeds, float(used.size * n_fixed)),
        equal_cost_seeds=n_eq,
        equal_cost_power=power(fixed_design(design, scores, arms, paired, n_eq)),
        futile_rate=out.futile.mean(axis=0),
    )


VARIANTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("default (O'Brien-Fleming, futility 0.95)", {}),
    ("no futility", {"futility": False}),
    ("futility 0.9", {"futility_confidence": 0.9}),
    ("futility 0.8", {"futility_confidence": 0.8}),
    ("futility 0.5 (observed difference)", {"futility_confidence": 0.5}),
    ("Pocock, futility 0.95", {"spending": "pocock"}),
    ("max 13 (1.08 x the fixed 12), default rule", {"max_seeds": 13}),
)
"""Design variants of the printed figures: overrides of the default design's fields
(every one is compared with the fixed 12-seed design)."""

FIXED_SEEDS = 12
"""Seeds per arm of the fixed design the printed figures compare with."""


def default_design(arms: Sequence[str], **overrides: object) -> AdaptiveDesign:
    """The default design on ``arms`` (each against ``arms[0]``): 3 seeds, +3, max 12."""
    fields: dict[str, object] = {"comparisons": every_arm_versus(arms[0], arms),
                                 "initial_seeds": (0, 1, 2)}
    fields.update(overrides)
    return AdaptiveDesign(**fields)  # type: ignore[arg-type]


def _print_scenarios(arms: list[str], studies: int, rho: float,
                     rng: np.random.Generator) -> None:
    """Figures of every design variant under the README's true-difference scenarios."""
    sd_d = np.sqrt(2.0 * (1.0 - rho))  # sd of a paired difference (sd = 1)
    scenarios = (("null: a, b, c = ref", (0.0, 0.0, 0.0)),
                 ("a +0.8, b +1.2, c = ref", (0.8, 1.2, 0.0)),
                 ("a, b, c +0.7", (0.7, 0.7, 0.7)),
                 ("a, b, c +1.0", (1.0, 1.0, 1.0)),
                 ("a, b, c +1.4", (1.4, 1.4, 1.4)))
    for title, eff in scenarios:
        means = [0.0, *(e * sd_d for e in eff)]
        print(f"\n== 3 comparisons vs ref, {title}")
        print(f"{'design':42s} {'FWER ad/fixed':>13s}  {'power ad/fixed12 per comparison':>32s}"
              f"  {'seeds ad/fixed':>14s}  {'fixed at equal cost':>24s}  futile")
        for name, over in VARIANTS:
            f = figures(default_design(arms, **over), means, arms, studies, rng,
                        rho=rho, fixed_seeds=FIXED_SEEDS)
            pw = " ".join("  -  " if np.isnan(a) else f"{a:.3f}/{b:.3f}" for a, b in f.power)
            eq = " ".join("  -  " if np.isnan(x) else f"{x:.3f}" for x in f.equal_cost_power)
            fr = " ".join(f"{x:.2f}" for x in f.futile_rate)
            print(f"{name:42s} {f.false_claim_rate[0]:.4f}/{f.false_claim_rate[1]:.4f}  "
                  f"{pw:>32s}  {f.mean_seeds[0]:6.1f}/{f.mean_seeds[1]:5.0f}  "
                  f"{f.equal_cost_seeds:2d} seeds: {eq:>17s}  {fr}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the README's figures: the default design (3 seeds, +3 per look, max 12) and
    variants, against the fixed 12-seed design, on the same simulated studies."""
    ap = argparse.ArgumentParser(prog="python -m ccpo_lab.adaptive.simulate",
                                 description=main.__doc__)
    ap.add_argument("--studies", type=int, default=20_000, help="simulated studies per row")
    ap.add_argument("--seed", type=int, default=2024, help="seed of the Generator")
    ap.add_argument("--rho", type=float, default=0.5, help="seed correlation between arms")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    se = np.sqrt(0.05 * 0.95 / args.studies)
    print(f"{args.studies} simulated studies per row (Generator seed {args.seed}); alpha 0.05; "
          f"paired t-tests; seed correlation {args.rho}; effects in sd of a paired "
          f"difference; MC se of a rate near 0.05: {se:.4f}")

    print("\n== one comparison, no futility, null: the error rate of the boundaries alone")
    arms1 = ["ref", "a"]
    for name, paired, rho in (("paired", True, args.rho), ("welch", False, 0.0)):
        d = default_design(arms1, futility=False)
        sc = simulate_scores([0.0, 0.0], args.studies, d.max_seeds, rng, rho=rho)
        rates = [float((run_design(d, sc, arms1, paired, method).claims != 0).mean())
                 for method in ("calibrated", "normal")]
        fixed = float((fixed_design(d, sc, arms1, paired) != 0).mean())
        print(f"{name:7s} calibrated {rates[0]:.4f}   normal-theory levels {rates[1]:.4f}   "
              f"fixed 12 seeds {fixed:.4f}")

    arms = ["ref", "a", "b", "c"]
    print("\n== 3 comparisons, null, non-normal scores (the t-tests are approximate here)")
    n = args.studies
    shapes = {"t(3) noise": lambda: rng.standard_t(3, (n, 4, 12)),
              "exponential noise": lambda: rng.exponential(1.0, (n, 4, 12)),
              "success rates of 48 episodes (p 0.45) + seed effect":
                  lambda: rng.binomial(48, 0.45, (n, 4, 12)) / 48
                  + rng.normal(0.0, 0.05, (n, 1, 12))}
    d = default_design(arms)
    for name, draw in shapes.items():
        sc = draw()
        ad = float((run_design(d, sc, arms).claims != 0).any(axis=1).mean())
        fx = float((fixed_design(d, sc, arms) != 0).any(axis=1).mean())
        print(f"{name:55s} FWER adaptive {ad:.4f}   fixed 12 seeds {fx:.4f}")

    _print_scenarios(arms, args.studies, args.rho, rng)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
