"""Group-sequential tests for few seeds: alpha spending, boundaries, Holm across comparisons.

The design adds seeds in looks (e.g. 3, 6, 9, 12 seeds per arm) and tests at every look.
Re-testing until significant inflates the false-positive rate; this module keeps the
whole procedure at ``alpha`` across looks *and* comparisons:

1. **Alpha spending** (Lan & DeMets 1983): a spending function ``f(t, alpha)`` gives the
   two-sided type-I error spent by information fraction ``t`` (``f(1) = alpha``). The
   default is the O'Brien-Fleming type, each side spending ``alpha / 2`` as
   ``2 - 2 Phi(z_{1-alpha/4} / sqrt(t))`` (so ``f(t) = 4 Phi(-z_{1-alpha/4} / sqrt(t))``,
   the convention of the R packages ldbounds and gsDesign; O'Brien & Fleming 1979: almost
   nothing early, nearly the full alpha at the end); ``pocock`` is
   ``alpha ln(1 + (e - 1) t)``; ``power-2`` and ``power-3`` are Kim & DeMets' (1987)
   ``alpha t^rho``; ``hsd-4`` is Hwang, Shih & DeCani's (1990) family at gamma -4,
   ``alpha (1 - e^{4 t}) / (1 - e^4)``. The information of a comparison is its number of seeds
   (pairs when paired); ``t = n / max_seeds``, and a comparison's last look spends
   ``alpha`` in full whatever its ``n`` (as error-spending designs do). :func:`alpha_spent`.
2. **Boundaries for t-tests at few seeds.** The classical boundaries are on the z scale
   (:func:`normal_boundaries`, by the recursive numerical integration of Armitage,
   McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19). Turning each into a nominal
   level ``2 Phi(-c_k)`` for the t-test (the "significance level approach" Jennison &
   Turnbull describe for group sequential t-tests; :func:`normal_nominal_levels`) lets
   too much through at 3 to 12 seeds (0.054 instead of 0.05 for 3 paired seeds, +3 per
   look up to 12). So the levels actually used are calibrated for t-tests
   (:func:`calibrated_levels`): under the null the paired t statistics' joint law does not
   depend on the sd, and a fixed-seed simulation of a million null studies sets each
   look's level so that exactly the alpha spent there is crossed for the first time.
3. **Holm across comparisons** (the sequentially rejective graphical procedure of
   Maurer & Bretz 2013 with Holm's equal weights; also Ye et al. 2013): each of the ``r``
   comparisons not yet rejected is tested at level ``alpha / r`` with the boundary
   computed at that level; a rejection (at any look) passes its alpha to the others, whose
   boundaries are recomputed at the larger level. Rejecting only at the current look (not
   re-testing earlier looks or closed comparisons with the recycled level) rejects a
   subset of what Maurer & Bretz allow, so it keeps their strong family-wise control.
   :func:`step_down`.
4. **Futility is non-binding**: stopping a comparison early never raises its chance of
   crossing a boundary (the boundaries ignore futility), so it can only lower the error
   rate. :func:`futile`, with the power figures of :func:`t_test_power` and
   :func:`seeds_needed_at` (Colas et al. 2018's approximation, two-sided).

Shapes: ``S`` studies (1 for a real sweep), ``m`` comparisons, ``K`` looks. Everything
is numpy/scipy.special, deterministic, and has no I/O.

References:
    Armitage P, McPherson CK, Rowe BC (1969). Repeated significance tests on accumulating
    data. J R Stat Soc A 132:235-244.
    Lan KKG, DeMets DL (1983). Discrete sequential boundaries for clinical trials.
    Biometrika 70:659-663.
    O'Brien PC, Fleming TR (1979). A multiple testing procedure for clinical trials.
    Biometrics 35:549-556.
    Jennison C, Turnbull BW (2000). Group Sequential Methods with Applications to Clinical
    Trials. Chapman & Hall/CRC.
    Maurer W, Bretz F (2013). Multiple testing in group sequential trials using graphical
    approaches. Stat Biopharm Res 5:311-320.
    Ye Y, Li A, Liu L, Yao B (2013). A group sequential Holm procedure with multiple
    primary endpoints. Stat Med 32:1112-1124.
    Colas C, Sigaud O, Oudeyer P-Y (2018). How many random seeds? Statistical power
    analysis in deep reinforcement learning experiments. arXiv:1806.08295.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

__all__ = [
    "CALIBRATION_PATHS",
    "SPENDING_FUNCTIONS",
    "UNEQUAL_SDS",
    "WELCH_CALIBRATION_PATHS",
    "alpha_spent",
    "calibrated_levels",
    "crossing_threshold",
    "futile",
    "information",
    "nominal_table",
    "normal_boundaries",
    "normal_nominal_levels",
    "planned_information",
    "seeds_needed_at",
    "step_down",
    "t_boundary",
    "t_test_power",
    "unequal_sds",
]

SpendingFunction = Callable[[NDArray[np.float64], float], NDArray[np.float64]]
"""(t (K,), alpha) -> cumulative two-sided alpha spent by each information fraction t."""


def _obrien_fleming(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    # each side spends half of alpha with 2 - 2 Phi(z_{1 - alpha/4} / sqrt(t)) (as ldbounds
    # and gsDesign do for a symmetric two-sided test)
    z = special.ndtri(1.0 - alpha / 4.0)
    with np.errstate(divide="ignore"):
        return 4.0 * special.ndtr(-z / np.sqrt(t))


def _pocock(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    return alpha * np.log1p((math.e - 1.0) * t)


def _power_family(rho: float) -> SpendingFunction:
    def fn(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
        return alpha * np.power(t, rho)
    return fn


def _hwang_shih_decani(gamma: float) -> SpendingFunction:
    def fn(t: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
        return alpha * np.expm1(-gamma * t) / math.expm1(-gamma)
    return fn


SPENDING_FUNCTIONS: dict[str, SpendingFunction] = {
    "obrien-fleming": _obrien_fleming,
    "pocock": _pocock,
    "power-2": _power_family(2.0),
    "power-3": _power_family(3.0),
    "hsd-4": _hwang_shih_decani(-4.0),
}
"""The spending functions by name (Lan & DeMets 1983): the one registry of valid names."""

_BOUNDARY_CAP = 9.0  # |z| beyond which the null density is negligible (Phi(-9) ~ 1e-19)
_GRID_PER_SD = 24  # grid points per sd of an increment (Simpson: error << 1e-6 in alpha)


def alpha_spent(
    fractions: ArrayLike, alpha: float, spending: str = "obrien-fleming"
) -> NDArray[np.float64]:
    """Cumulative two-sided alpha spent by each information fraction.

    Args:
        fractions: float (K,), information fractions in (0, 1] (values above 1 count as 1).
        alpha: total two-sided level, in (0, 1).
        spending: a key of :data:`SPENDING_FUNCTIONS`.

    Returns:
        float (K,), non-decreasing in the fraction, equal to ``alpha`` at fraction 1.

    Raises:
        ValueError: unknown ``spending`` (the message lists the valid names), ``alpha``
            outside (0, 1), or a fraction <= 0.
    """
    fn = _spending(spending)
    _check_alpha(alpha)
    t = np.minimum(np.asarray(fractions, dtype=np.float64), 1.0)
    if t.ndim != 1 or np.any(~(t > 0.0)):
        raise ValueError(f"information fractions must be a 1-D array in (0, 1], got {t}")
    out = np.asarray(fn(t, float(alpha)), dtype=np.float64)
    return np.where(t >= 1.0, float(alpha), out)


def _spending(name: str) -> SpendingFunction:
    try:
        return SPENDING_FUNCTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown spending function {name!r}; valid: {', '.join(SPENDING_FUNCTIONS)}"
        ) from None


def _check_alpha(alpha: float) -> None:
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def _simpson_weights(n: int, h: float) -> NDArray[np.float64]:
    """Composite Simpson weights for ``n`` (odd) equally spaced points ``h`` apart."""
    w = np.ones(n)
    w[1:-1:2] = 4.0
    w[2:-1:2] = 2.0
    return w * (h / 3.0)


def _grid(half_width: float, step: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    n = max(int(math.ceil(2.0 * half_width / step)), 50)
    n += 1 - n % 2  # odd, for Simpson
    x = np.linspace(-half_width, half_width, n)
    return x, _simpson_weights(n, x[1] - x[0])


def _cross_probability(
    c: float, s: NDArray[np.float64], g: NDArray[np.float64], root_i: float, root_d: float
) -> float:
    """P(|Z_k| >= c, continued so far): ``g`` = weighted sub-density of S_{k-1} on ``s``."""
    b = c * root_i
    tails = special.ndtr((-b - s) / root_d) + special.ndtr((s - b) / root_d)
    return float(np.dot(g, tails))


@lru_cache(maxsize=4096)
def _boundaries(
    information: tuple[float, ...], spent: tuple[float, ...]
) -> tuple[float, ...]:
    """Cached core of :func:`normal_boundaries` (increments of spent alpha given)."""
    info = np.asarray(information)
    c_out: list[float] = []
    s = g = None  # grid of the score S_{k-1} and its Simpson-weighted sub-density
    prev_spent = 0.0
    prev_i = 0.0
    for k, (i_k, a_k) in enumerate(zip(info, spent, strict=True)):
        inc = a_k - prev_spent
        root_i = math.sqrt(i_k)
        if k == 0:
            c = float(special.ndtri(1.0 - inc / 2.0)) if inc > 0.0 else math.inf
        else:
            root_d = math.sqrt(i_k - prev_i)
            assert s is not None and g is not None
            if inc <= 0.0:
                c = math.inf
            elif _cross_probability(0.0, s, g, root_i, root_d) <= inc:
                c = 0.0
            else:
                lo, hi = 0.0, 40.0
                for _ in range(100):  # bisection: the crossing probability falls with c
                    mid = 0.5 * (lo + hi)
                    if _cross_probability(mid, s, g, root_i, root_d) > inc:
                        lo = mid
                    else:
                        hi = mid
                    if hi - lo < 1e-10:
                        break
                c = 0.5 * (lo + hi)
        c_out.append(c)
        # sub-density of S_k on the continuation region (-c sqrt(I_k), c sqrt(I_k))
        half = min(c, _BOUNDARY_CAP) * root_i
        if k + 1 < len(info):
            step = math.sqrt(float(info[k + 1]) - i_k) / _GRID_PER_SD
            if k == 0:
                step = min(step, root_i / _GRID_PER_SD)
            x, w = _grid(half, step)
            if k == 0:
                dens = np.exp(-0.5 * (x / root_i) ** 2) / (root_i * math.sqrt(2.0 * math.pi))
            else:
                root_d = math.sqrt(i_k - prev_i)
                assert s is not None and g is not None
                kern = np.exp(-0.5 * ((x[:, None] - s[None, :]) / root_d) ** 2)
                dens = kern @ g / (root_d * math.sqrt(2.0 * math.pi))
            s, g = x, dens * w
        prev_spent, prev_i = max(a_k, prev_spent), i_k
    return tuple(c_out)


def normal_boundaries(
    information: ArrayLike,
    max_information: float,
    alpha: float = 0.05,
    spending: str = "obrien-fleming",
    final: bool = False,
) -> NDArray[np.float64]:
    """Two-sided z boundaries ``c_k`` of a Lan-DeMets group-sequential test.

    Under the null, with ``Z_k`` the z statistic of look ``k`` (Brownian motion in the
    information), ``P(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, |Z_k| >= c_k)`` equals the
    alpha spent between looks ``k - 1`` and ``k``.

    Args:
        information: float (K,), strictly increasing positive information at each look
            (seeds, or pairs of seeds).
        max_information: the information of the planned last look (``max_seeds``);
            fractions are ``information / max_information`` (capped at 1).
        alpha: total two-sided level.
        spending: a key of :data:`SPENDING_FUNCTIONS`.
        final: the last entry is the final look: it spends all of ``alpha`` whatever its
            fraction.

    Returns:
        float (K,): the boundaries; ``inf`` where a look spends nothing new.

    Raises:
        ValueError: non-increasing or non-positive information, bad ``alpha``/``spending``.
    """
    info = np.asarray(information, dtype=np.float64)
    if info.ndim != 1 or info.size == 0 or np.any(~(info > 0.0)) or np.any(np.diff(info) <= 0):
        raise ValueError(f"information must be strictly increasing and positive, got {info}")
    if not max_information > 0.0:
        raise ValueError(f"max_information must be positive, got {max_information!r}")
    spent = alpha_spent(info / float(max_information), alpha, spending)
    if final:
        spent[-1] = float(alpha)
    key_i = tuple(round(float(v), 12) for v in info)
    key_a = tuple(round(float(v), 15) for v in spent)
    return np.array(_boundaries(key_i, key_a))


def normal_nominal_levels(
    information: ArrayLike,
    max_information: float,
    alpha: float = 0.05,
    spending: str = "obrien-fleming",
    final: bool = False,
) -> NDArray[np.float64]:
    """Nominal two-sided levels ``2 Phi(-c_k)`` of :func:`normal_boundaries`.

    The significance-level approach (Jennison & Turnbull 2000): reject at look
    ``k`` when the t-test's p-value is <= this level. At a few seeds it lets slightly more
    than alpha through (3 paired seeds, +3 per look up to 12: about 0.054 at alpha 0.05),
    which is why the decisions use :func:`calibrated_levels`; this is kept as the
    large-sample reference. Arguments as :func:`normal_boundaries`.

    Returns:
        float (K,), in [0, alpha]; 0 where a look spends nothing new.
    """
    c = normal_boundaries(information, max_information, alpha, spending, final)
    return 2.0 * special.ndtr(-c)


Test = Literal["paired", "welch"]
Sizes = tuple[tuple[int, int], ...]
"""Per look, ``(n_x, n_y)``: the seeds of both arms (paired: both are the pair count)."""

CALIBRATION_PATHS = 1_000_000
"""Simulated null studies behind :func:`calibrated_levels` (its alpha is exact to about
``sqrt(alpha / CALIBRATION_PATHS)``, 0.0002 at alpha 0.05)."""
WELCH_CALIBRATION_PATHS = 250_000
"""The same for Welch tests (rare here: arms normally share seeds), whose p-values cost
more to simulate: alpha exact to about 0.00045 at 0.05."""
CALIBRATION_SEED = 20_181_112
"""Seed of the calibration's Generator: the levels are the same on every machine and run."""
_CALIBRATION_CHUNK = 50_000
UNEQUAL_SDS: tuple[float, ...] = (1.0, 0.5, 0.25, 0.01)
"""The two-sample tests' least favourable variances: one arm's sd, the other's being 1,
in the null studies a Welch (or ranks') boundary is calibrated on; each look's threshold is
the most stringent of theirs. Neither Welch's p nor the ranks' is exact at a few seeds, and
how far off it is depends on the ratio of the arms' variances: a boundary calibrated on
arms that vary alike let 0.066 of null studies through when the reference's sd was a
quarter of the others' (the joint family's, 8,000 studies). At equal seed counts a ratio
and its inverse give one comparison the same law, so these also stand for an arm 2, 4 and
100 times as variable as the other; at unequal counts both directions are calibrated."""


def information(sizes: Sizes, test: Test) -> NDArray[np.float64]:
    """float (K,): ``n`` (paired; ``sizes[k] = (n, n)``) or ``2 n_x n_y / (n_x + n_y)``."""
    s = np.asarray(sizes, dtype=np.float64).reshape(-1, 2)
    if test == "paired":
        return s[:, 0].copy()
    return 2.0 * s[:, 0] * s[:, 1] / (s[:, 0] + s[:, 1])


def _check_sizes(sizes: Sizes, test: Test) -> Sizes:
    if test not in ("paired", "welch"):
        raise ValueError(f"test must be 'paired' or 'welch', got {test!r}")
    out = tuple((int(a), int(b)) for a, b in sizes)
    if not out:
        raise ValueError("sizes must hold at least one look")
    for k, (a, b) in enumerate(out):
        if a < 2 or b < 2 or (test == "paired" and a != b):
            raise ValueError(f"look {k + 1}: sizes {a, b} invalid for a {test} test "
                             "(>= 2 seeds per arm; paired sizes are (n, n))")
        if k and (a < out[k - 1][0] or b < out[k - 1][1]):
            raise ValueError(f"sizes must not shrink from look to look, got {out}")
    info = information(out, test)
    if np.any(np.diff(info) <= 0):
        raise ValueError(f"information must grow at every look, got {info}")
    return out


@lru_cache(maxsize=4)
def _paired_null_paths(width: int, ns: tuple[int, ...]) -> NDArray[np.float32]:
    """float32 (CALIBRATION_PATHS, K): ``-|t|`` of null paired studies on their first
    ``ns[k]`` seeds.

    iid N(0, 1) differences: under the null the law of the t statistics does not depend on
    the sd, and at a fixed ``n`` the p-value is monotone in ``|t|``. ``width`` values are
    drawn per study whatever ``ns``, so every schedule up to ``width`` seeds sees the same
    draws and a look's level does not depend on the looks planned after it.
    """
    rng = np.random.default_rng(CALIBRATION_SEED)
    n = np.array(ns)
    out = np.empty((CALIBRATION_PATHS, n.size), dtype=np.float32)
    for lo in range(0, CALIBRATION_PATHS, _CALIBRATION_CHUNK):
        c = min(_CALIBRATION_CHUNK, CALIBRATION_PATHS - lo)
        mean, var = _prefix_moments(rng.standard_normal((c, width)), n)
        with np.errstate(divide="ignore"):
            out[lo:lo + c] = -np.abs(mean) / np.sqrt(var / n)
    return out


@lru_cache(maxsize=8)
def _welch_null_paths(sizes: Sizes, width: int, sd_x: float = 1.0, sd_y: float = 1.0
                      ) -> NDArray[np.float64]:
    """float (WELCH_CALIBRATION_PATHS, K): two-sided Welch p-values of null studies (two
    normal arms of mean 0 and sd ``sd_x``, ``sd_y``) on their first ``sizes[k]`` seeds;
    ``width`` columns are drawn per arm whatever the sizes, so a look's level does not
    depend on later looks."""
    rng = np.random.default_rng(CALIBRATION_SEED)
    nx = np.array([a for a, _ in sizes])
    ny = np.array([b for _, b in sizes])
    out = np.empty((WELCH_CALIBRATION_PATHS, len(sizes)))
    for lo in range(0, WELCH_CALIBRATION_PATHS, _CALIBRATION_CHUNK):
        c = min(_CALIBRATION_CHUNK, WELCH_CALIBRATION_PATHS - lo)
        mx, vx = _prefix_moments(sd_x * rng.standard_normal((c, width)), nx)
        my, vy = _prefix_moments(sd_y * rng.standard_normal((c, width)), ny)
        a, b = vx / nx, vy / ny
        se2 = a + b
        df = se2 * se2 / (a * a / (nx - 1) + b * b / (ny - 1))
        out[lo:lo + c] = 2.0 * special.stdtr(df, -np.abs(mx - my) / np.sqrt(se2))
    return out


def unequal_sds(equal_counts: bool) -> tuple[tuple[float, float], ...]:
    """``(sd_x, sd_y)`` of the null studies a two-sample boundary is calibrated on
    (:data:`UNEQUAL_SDS`): the second arm's sd varied, and the first's too at unequal
    seed counts."""
    out = [(1.0, s) for s in UNEQUAL_SDS]
    if not equal_counts:
        out += [(s, 1.0) for s in UNEQUAL_SDS if s != 1.0]
    return tuple(out)


def _prefix_moments(
    z: NDArray[np.float64], ns: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Means and variances (ddof=1) of the first ``ns[k]`` columns: (c, K) each."""
    s1 = np.cumsum(z, axis=1)[:, ns - 1]
    s2 = np.cumsum(z * z, axis=1)[:, ns - 1]
    mean = s1 / ns
    var = (s2 - ns * mean * mean) / (ns - 1.0)
    return mean, np.maximum(var, 0.0)


def calibrated_levels(
    sizes: Sizes,
    max_information: float,
    alphas: Sequence[float],
    spending: str = "obrien-fleming",
    final: bool = False,
    test: Test = "paired",
) -> NDArray[np.float64]:
    """Nominal levels that spend exactly the Lan-DeMets alpha with t-tests at these sizes.

    Look ``k`` rejects when the test's two-sided p-value is <= ``levels[k]``. The level is
    set so that, among :data:`CALIBRATION_PATHS` (Welch: :data:`WELCH_CALIBRATION_PATHS`)
    simulated null studies (a fixed seed:
    deterministic) that crossed no earlier boundary, the share crossing now equals the
    alpha spent between the looks (the first paired look needs no simulation: a single
    t-test is exact, its level is the alpha it spends; Welch's is not, at few seeds).
    For paired tests the null law of the t statistics does not depend on the sd, so the
    result is exact up to the calibration's Monte-Carlo error; for Welch each look's level
    is the most stringent of null studies at several ratios of the arms' variances
    (:func:`unequal_sds`), so it holds for each of them.

    Args:
        sizes: per look ``(n_x, n_y)`` (see :data:`Sizes`); information grows at each look.
        max_information: information of the planned final look (``max_seeds``).
        alphas: float (R,), the levels to calibrate for (e.g. ``alpha / r``).
        spending: a key of :data:`SPENDING_FUNCTIONS`.
        final: the last look spends each level in full.
        test: 'paired' or 'welch'.

    Returns:
        float (R, K): the nominal levels; 0 where a look spends nothing new.
    """
    sz = _check_sizes(sizes, test)
    key = (test, sz, float(max_information), tuple(float(a) for a in alphas), spending,
           bool(final))
    return np.array(_calibrated(*key))


@lru_cache(maxsize=1024)
def _calibrated(
    test: Test, sizes: Sizes, max_information: float, alphas: tuple[float, ...],
    spending: str, final: bool,
) -> tuple[tuple[float, ...], ...]:
    info = information(sizes, test)
    width = max(int(np.ceil(max_information)), max(max(a, b) for a, b in sizes))
    evs: list[NDArray[np.floating[Any]]]
    if test == "paired":
        evs = [_paired_null_paths(width, tuple(a for a, _ in sizes))]
    else:  # the least favourable of several variance ratios, look by look
        evs = [_welch_null_paths(sizes, width, sx, sy)
               for sx, sy in unequal_sds(all(a == b for a, b in sizes))]
    n_paths = evs[0].shape[0]
    df = np.array([a - 1.0 for a, _ in sizes])

    def to_level(k: int, e: float) -> float:  # evidence threshold -> nominal level
        return float(2.0 * special.stdtr(df[k], e)) if test == "paired" else e

    def to_evidence(k: int, level: float) -> float:
        if test != "paired":
            return level
        return float(special.stdtrit(df[k], level / 2.0)) if level > 0.0 else -np.inf

    rows = []
    for a in alphas:
        spent = alpha_spent(info / max_information, a, spending)
        if final:
            spent[-1] = a
        levels = []
        alive = [np.ones(n_paths, dtype=bool) for _ in evs]
        crossed = np.zeros(len(evs), dtype=np.int64)
        budget, prev = 0, 0.0
        for k in range(len(sizes)):
            inc = max(float(spent[k]) - prev, 0.0)
            prev = max(prev, float(spent[k]))
            budget += int(round(inc * n_paths))  # paths allowed to have crossed by now
            if k == 0 and test == "paired":  # a single t-test: exact
                level, thr = inc, to_evidence(0, inc)
            else:
                # one law: this look's share of alpha (the first paired look's crossings
                # are exact, not counted); several: what each has left of the budget
                left = ([int(round(inc * n_paths))] if len(evs) == 1
                        else [budget - int(c) for c in crossed])
                thr = min(crossing_threshold(ev[al, k], j)
                          for ev, al, j in zip(evs, alive, left, strict=True))
                level = 0.0 if thr == -np.inf else 1.0 if thr == np.inf else to_level(k, thr)
            levels.append(level)
            for i, ev in enumerate(evs):
                alive[i] &= ev[:, k] > thr
                crossed[i] = n_paths - int(np.count_nonzero(alive[i]))
        rows.append(tuple(levels))
    return tuple(rows)


def crossing_threshold(e: NDArray[np.floating[Any]], j: int, discrete: bool = False
                       ) -> float:
    """The value of ``e`` at or below which exactly its ``j`` smallest lie (the midpoint
    of two neighbours); -inf for ``j <= 0``, inf for all of them. ``discrete`` (p-values
    that tie, a rank p): a tie across it puts it just below the tie, so fewer cross
    (never more)."""
    if j <= 0:
        return -np.inf
    if j >= e.size:
        return np.inf
    part = np.partition(e, (j - 1, j))
    lo, hi = float(part[j - 1]), float(part[j])
    if discrete and lo == hi:
        return lo * (1.0 - 1e-5)
    return 0.5 * (lo + hi)


def t_boundary(level: ArrayLike, df: ArrayLike) -> NDArray[np.float64] | float:
    """The |t| a two-sided test at ``level`` needs with ``df`` degrees of freedom.

    Args:
        level: nominal two-sided level(s) in (0, 1); 0 gives inf.
        df: degrees of freedom (> 0), broadcast with ``level``.

    Returns:
        ``t.ppf(1 - level / 2, df)``: a float for scalar inputs; nan where df is not > 0.
    """
    lv = np.asarray(level, dtype=np.float64)
    d = np.asarray(df, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = np.where(lv > 0.0, special.stdtrit(np.where(d > 0, d, np.nan), 1.0 - lv / 2.0),
                       np.inf)
    out = np.where(d > 0, out, np.nan)
    return float(out) if out.ndim == 0 else out


def t_test_power(
    eps: ArrayLike, var_a: ArrayLike, var_b: ArrayLike, n: ArrayLike, level: ArrayLike,
    df: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Power of a two-sided t-test at ``n`` seeds per arm (Colas et al. 2018 approximation).

    ``nu = (va + vb)^2 (n - 1) / (va^2 + vb^2)``, ``t_eps = |eps| / sqrt((va + vb) / n)``,
    power ``= 1 - t.cdf(t.ppf(1 - level/2, nu) - t_eps, nu)`` (the far tail ignored). Welch:
    ``va, vb`` = the two arms' variances across seeds; paired: ``va`` = the variance of
    the per-seed differences and ``vb = 0`` (then ``nu = n - 1``, the paired test's df).

    Args:
        eps: true (or observed) difference(s); sign ignored. All arguments broadcast.
        var_a, var_b: variances (ddof=1) as above.
        n: seeds per arm (>= 2).
        level: two-sided level of the test (e.g. a nominal level of the last look).
        df: the test's degrees of freedom at ``n`` seeds when it is not ``nu`` (a pooled
            variance's: :func:`ccpo_lab.stats.joint.joint_df`); None: ``nu``.

    Returns:
        float array of the broadcast shape, power in [0, 1]; nan where undefined (n < 2,
        nan or zero variance, nan eps).
    """
    e = np.abs(np.asarray(eps, dtype=np.float64))
    va = np.asarray(var_a, dtype=np.float64)
    vb = np.asarray(var_b, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    lv = np.asarray(level, dtype=np.float64)
    vsum = va + vb
    ok = (nn >= 2) & (vsum > 0) & (va >= 0) & (vb >= 0) & np.isfinite(e) & (lv > 0) & (lv < 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        n_s = np.where(ok, nn, 2.0)
        v_s = np.where(ok, vsum, 1.0)
        nu = v_s * v_s * (n_s - 1.0) / np.where(ok, va * va + vb * vb, 1.0)
        if df is not None:
            nu = np.asarray(df, dtype=np.float64) * np.ones_like(nu)
        t_eps = np.where(ok, e, 0.0) / np.sqrt(v_s / n_s)
        crit = special.stdtrit(nu, 1.0 - np.where(ok, lv, 0.05) / 2.0)
        power = 1.0 - special.stdtr(nu, crit - t_eps)
    return np.where(ok, power, np.nan)


def seeds_needed_at(
    eps: float, var_a: float, var_b: float, level: float, power: float, n_max: int = 1000
) -> int | None:
    """Smallest seeds per arm ``n >= 2`` whose :func:`t_test_power` reaches ``power``.

    Args:
        eps, var_a, var_b: as :func:`t_test_power` (scalars).
        level: two-sided level of the test.
        power: target power in (0, 1).
        n_max: largest ``n`` searched.

    Returns:
        The count, or None when undefined (eps 0 or nan, zero variance) or above ``n_max``.
    """
    if not (np.isfinite(eps) and eps != 0.0):
        return None
    ns = np.arange(2, int(n_max) + 1)
    p = t_test_power(eps, var_a, var_b, ns, level)
    hit = np.flatnonzero(p >= power)
    return int(ns[hit[0]]) if hit.size else None


def step_down(
    p_values: ArrayLike, testable: ArrayLike, rejected: ArrayLike, nominal: ArrayLike
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """One look of the group-sequential Holm procedure: which comparisons are rejected now.

    With ``r`` comparisons not yet rejected in a study, comparison ``i`` is rejected at
    this look when it is testable and its p-value is <= ``nominal[..., i, r - 1]`` (its
    boundary at level ``alpha / r``); each rejection lowers ``r`` and the rest are tested
    again at the larger level until nothing changes (the graphical procedure of Maurer &
    Bretz 2013 with Holm weights, restricted to the current look). Rejecting all that pass
    at once gives the same end result as one at a time (the levels only grow).

    Args:
        p_values: float (S, m), each comparison's two-sided t-test p-value at this look
            (nan: untestable, never rejected).
        testable: bool (S, m), comparisons tested at this look (open, with new data).
        rejected: bool (S, m), comparisons rejected at earlier looks (they count out of
            ``r`` and are not tested again).
        nominal: float (S or 1, m, m): ``nominal[s, i, j]`` is comparison ``i``'s nominal
            level at this look when ``j + 1`` comparisons are not yet rejected
            (level ``alpha / (j + 1)``; non-decreasing in ``j``'s level, i.e. falling in j).

    Returns:
        ``(now, family)``: bool (S, m), rejected at this look (earlier rejections not
        included); int (S, m), the ``r`` in force -- when it was rejected for those
        rejected now, after this look's rejections for the others.
    """
    p = np.asarray(p_values, dtype=np.float64)
    test = np.asarray(testable, dtype=bool)
    done = np.asarray(rejected, dtype=bool).copy()
    nom = np.asarray(nominal, dtype=np.float64)
    if p.ndim != 2 or test.shape != p.shape or done.shape != p.shape:
        raise ValueError(f"p_values, testable, rejected must share shape (S, m), got "
                         f"{p.shape}, {test.shape}, {done.shape}")
    s_count, m = p.shape
    if nom.ndim != 3 or nom.shape[1:] != (m, m) or nom.shape[0] not in (1, s_count):
        raise ValueError(f"nominal must have shape (S or 1, {m}, {m}), got {nom.shape}")
    nom = np.broadcast_to(nom, (s_count, m, m))
    now = np.zeros_like(done)
    family = np.zeros(p.shape, dtype=np.int64)
    rows = np.arange(s_count)[:, None]
    cols = np.arange(m)[None, :]
    while True:  # at most m rounds: each one rejects at least one more
        r = m - done.sum(axis=1)  # (S,) comparisons not yet rejected
        idx = np.broadcast_to(np.maximum(r - 1, 0)[:, None], (s_count, m))
        thr = nom[rows, cols, idx]
        with np.errstate(invalid="ignore"):
            hit = test & ~done & (p <= thr)
        family = np.where(~done, r[:, None], family)
        if not hit.any():
            return now, family
        now |= hit
        done |= hit


def futile(
    diff: ArrayLike,
    se: ArrayLike,
    df: ArrayLike,
    var_a: ArrayLike,
    var_b: ArrayLike,
    max_seeds: int,
    final_level: ArrayLike,
    power: float,
    confidence: float,
    power_df: ArrayLike | None = None,
) -> NDArray[np.bool_]:
    """Futility: even an optimistic reading of the difference would need more than the max.

    The optimistic difference is the far end of the one-sided ``confidence`` bound of
    ``|diff|``: ``|diff| + t.ppf(confidence, df) * se`` (``confidence = 0.5``: the observed
    difference itself). True where its :func:`t_test_power` at ``max_seeds`` seeds per arm
    and the comparison's final-look nominal level is below ``power`` -- where the seeds
    needed for that power exceed ``max_seeds``. Undefined power (no spread, nan) is never
    futile. Non-binding: the boundaries ignore it, so it can only lower the error rate.

    Args:
        diff: float (S, m), observed differences.
        se: float (S, m), their standard errors.
        df: float (S, m), the tests' degrees of freedom.
        var_a, var_b: float (S, m), variances as in :func:`t_test_power`.
        max_seeds: the design's maximum seeds per arm.
        final_level: float (S or 1, m), nominal level of the comparison's last look.
        power: the power the seeds would have to give, in (0, 1).
        confidence: of the optimistic bound, in [0.5, 1).
        power_df: df of the test at ``max_seeds`` seeds when not the per-comparison t's
            (a pooled variance: :func:`ccpo_lab.stats.joint.joint_df`).

    Returns:
        bool (S, m).
    """
    d = np.asarray(df, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        q = special.stdtrit(np.where(d > 0, d, np.nan), float(confidence))
        optimistic = np.abs(np.asarray(diff, dtype=np.float64)) + q * np.asarray(se)
        pw = t_test_power(optimistic, var_a, var_b, max_seeds, final_level, power_df)
        return np.asarray(pw < power)


def planned_information(initial: int, per_look: int, max_seeds: int) -> tuple[int, ...]:
    """Seeds per arm at each planned look: ``initial``, ``+per_look``, ..., capped at max.

    >>> planned_information(3, 3, 12)
    (3, 6, 9, 12)
    >>> planned_information(3, 4, 12)
    (3, 7, 11, 12)
    """
    out = [int(initial)]
    while out[-1] < max_seeds:
        out.append(min(out[-1] + int(per_look), int(max_seeds)))
    return tuple(out)


def nominal_table(
    looks: Sequence[int],
    max_seeds: int,
    alpha: float,
    m: int,
    spending: str = "obrien-fleming",
    test: Test = "paired",
    method: Literal["calibrated", "normal"] = "calibrated",
) -> NDArray[np.float64]:
    """Nominal levels of a planned schedule at every Holm level ``alpha / r``, r = 1..m.

    Args:
        looks: seeds per arm at each look (:func:`planned_information`); the last is the
            final look (it spends the full level).
        max_seeds: the design's maximum (the information of the final planned look).
        alpha: family-wise level.
        m: number of comparisons.
        spending: a key of :data:`SPENDING_FUNCTIONS`.
        test: 'paired' or 'welch' (equal seeds in both arms).
        method: ``calibrated`` (:func:`calibrated_levels`, what decisions use) or
            ``normal`` (:func:`normal_nominal_levels`, for comparison).

    Returns:
        float (K, m): ``[k, r - 1]`` is the nominal level at look ``k`` at level
        ``alpha / r``.
    """
    alphas = [alpha / r for r in range(1, m + 1)]
    if method == "normal":
        info = information(tuple((n, n) for n in looks), test)
        cols = [normal_nominal_levels(info, max_seeds, a, spending, final=True)
                for a in alphas]
        return np.stack(cols, axis=1)
    if method != "calibrated":
        raise ValueError(f"method must be 'calibrated' or 'normal', got {method!r}")
    sizes = tuple((int(n), int(n)) for n in looks)
    return calibrated_levels(sizes, max_seeds, alphas, spending, True, test).T
