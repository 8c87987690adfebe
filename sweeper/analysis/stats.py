"""Statistics on per-seed arrays: effect sizes, bootstrap CIs, tests, Holm, power. Pure numpy/scipy, no I/O.

    from sweeper.analysis import stats
    stats.welch_test(a, b).pvalue                    # == scipy.stats.ttest_ind(a, b, equal_var=False).pvalue
    stats.permutation_test(a, b).pvalue              # exact enumeration at small n, Monte Carlo above max_exact
    stats.bootstrap_delta(a, b, lower_is_better=True).delta   # Interval: BCa, percentile fallback
    stats.holm([0.01, 0.04]); stats.seeds_needed(0.5)         # -> adjusted p-values; 64 per arm
    w = stats.worst_rank_test(a, b, lost_a=2, lost_b=0, lower_is_better=True)   # lost seeds ranked worst
    stats.worst_rank_interval(w, 0.975); stats.prob_better_interval(0.8, 4, 4)   # shift CI; P(better) CI
    stats.min_detectable_effect(3, 0.05, 0.8, n_b=8)          # ratio form (statsmodels TTestIndPower)

Conventions: `a` is the variant, `b` the baseline; every difference is a - b; two-sided unless `alternative`
says otherwise. Inputs must be finite (a NaN seed is a diverged run: count it, do not pass it in). Results that
a design cannot produce (zero variance, n < 2) come back as NaN, never as an exception or a fake 0.
Every random step takes an explicit seed (np.random.default_rng(seed)); the same call gives the same numbers.
The bootstrap draws multiplicity counts (B, n) once and gets every resampled statistic by matrix products:
no Python loop per resample.
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special  # scipy.stats / scipy.optimize cost ~0.5 s to import: the report needs neither

from sweeper.config.decision import DecisionOptions

DEFAULT = DecisionOptions   # the decision rule's defaults (resamples, seed, confidence, alpha), stated there once
ALTERNATIVES = ("two-sided", "greater", "less")
_ROUNDING = 1e-12   # a spread below this fraction of the values is float rounding: treated as zero variance


@dataclass(frozen=True)
class TestResult:
    name: str
    statistic: float
    pvalue: float
    df: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)   # CI of the mean difference implied by a t-test
    min_p: float = math.nan                          # smallest p this test can reach at this n (resampling tests)
    exact: bool | None = None                        # enumeration (True) or Monte Carlo (False)
    n_resamples: int = 0
    note: str = ""


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    method: str          # "BCa", or "percentile" with the reason BCa was not usable
    confidence: float
    n_resamples: int
    seed: int


def _finite(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf: a non-finite seed is a diverged run; count it, do not test it")
    return x


def _paired_differences(a, b) -> np.ndarray:
    """a - b of two finite arrays of matched seeds (ValueError naming what is wrong)."""
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length ({a.size} vs {b.size}): pass the matched seeds only")
    return a - b


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r}: accepted values are {', '.join(ALTERNATIVES)}")


def _brentq(f, a, b, **kw) -> float:
    from scipy.optimize import brentq  # deferred: scipy, only when this runs

    return brentq(f, a, b, **kw)


# ----------------------------------------------------------------------------- descriptive and effect sizes
def iqm(x) -> float:
    """Interquartile mean (25% trimmed mean over all values), as rliable's aggregate_iqm."""
    x = np.asarray(x, dtype=float)
    if not x.size:
        return math.nan
    x = x.ravel()
    cut = int(0.25 * x.size)                              # scipy.stats.trim_mean(x, 0.25, axis=None), step by step
    return float(np.partition(x, (cut, x.size - cut - 1))[cut:x.size - cut].mean())


def describe(x) -> dict:
    x = _finite(x, "values")
    n = x.size
    return {"n": n, "mean": float(x.mean()) if n else math.nan, "sd": float(x.std(ddof=1)) if n > 1 else math.nan,
            "median": float(np.median(x)) if n else math.nan, "iqm": iqm(x),
            "min": float(x.min()) if n else math.nan, "max": float(x.max()) if n else math.nan}


def hedges_g(a, b) -> float:
    """(mean a - mean b) / pooled sd, times the exact small-sample correction
    J(df) = G(df/2) / (sqrt(df/2) G((df-1)/2)), df = n_a + n_b - 2."""
    a, b = _finite(a, "a"), _finite(b, "b")
    df = a.size + b.size - 2
    if a.size < 1 or b.size < 1 or df < 1:
        return math.nan
    pooled = math.sqrt(((a.size - 1) * a.var(ddof=1 if a.size > 1 else 0)
                        + (b.size - 1) * b.var(ddof=1 if b.size > 1 else 0)) / df)
    diff = a.mean() - b.mean()
    if pooled == 0:
        return math.nan if diff == 0 else math.copysign(math.inf, diff)
    if df <= 1:
        return math.nan
    j = math.exp(special.gammaln(df / 2) - 0.5 * math.log(df / 2) - special.gammaln((df - 1) / 2))
    return float(diff / pooled * j)


def _better_matrix(a: np.ndarray, b: np.ndarray, lower_is_better: bool) -> np.ndarray:
    """S[i, j] = 1 if a_i beats b_j, 0.5 on a tie, else 0.   # (n_a, n_b)"""
    wins = a[:, None] < b[None, :] if lower_is_better else a[:, None] > b[None, :]
    return wins + 0.5 * (a[:, None] == b[None, :])


def weighted_wins(a: np.ndarray, b: np.ndarray, ca: np.ndarray, cb: np.ndarray,
                  lower_is_better: bool) -> np.ndarray:
    """sum_ij ca[r, i] cb[r, j] S[i, j] for every row r (S = _better_matrix), in O(B (n_a + n_b)) instead of
    O(B n_a n_b): per b_j, the weight of the a's that beat or tie it is a difference of cumulative sums over
    sorted a. Bitwise equal to the matrix form for integer counts (every partial sum is a multiple of 0.5).
    ca: (B, n_a), cb: (B, n_b) -> (B,)"""
    order = np.argsort(a, kind="stable")
    left = np.searchsorted(a[order], b, side="left")                              # (n_b,) a's below b_j
    right = np.searchsorted(a[order], b, side="right")                            # (n_b,) a's up to b_j
    out = np.empty(ca.shape[0])
    rows = max(1, 2**19 // (a.size + b.size + 1))                                 # blocks that stay in cache
    for r in range(0, ca.shape[0], rows):
        cum = np.zeros((min(rows, ca.shape[0] - r), a.size + 1))                  # (R, n_a + 1)
        np.cumsum(ca[r:r + rows, order], axis=1, out=cum[:, 1:])
        lo, hi = cum[:, left], cum[:, right]                                      # (R, n_b)
        beat = lo if lower_is_better else cum[:, -1:] - hi
        out[r:r + rows] = np.einsum("ij,ij->i", beat + 0.5 * (hi - lo), cb[r:r + rows])
    return out


def prob_better(a, b, lower_is_better: bool = False) -> float:
    """P(a random seed of `a` beats one of `b`) = U / (n_a n_b), ties count half (Mann-Whitney U of `a`).

    2-D inputs (runs x tasks) give the mean over tasks, as rliable's probability_of_improvement.
    """
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.ndim == 2:
        return float(np.mean([prob_better(a[:, t], b[:, t], lower_is_better) for t in range(a.shape[1])]))
    if a.size == 0 or b.size == 0:
        return math.nan
    sb = np.sort(b)                          # O(n log n): no (n_a, n_b) matrix at thousands of seeds
    below, upto = np.searchsorted(sb, a, "left"), np.searchsorted(sb, a, "right")   # (n_a,) b's under / up to a_i
    wins = 2 * ((b.size - upto) if lower_is_better else below) + (upto - below)     # doubled: ties count half
    return float(int(wins.sum()) / (2 * a.size * b.size))


# ----------------------------------------------------------------------------- parametric tests
def _t_pvalue(t: float, df: float, alternative: str) -> float:
    if alternative == "two-sided":
        return float(min(1.0, 2 * special.stdtr(df, -abs(t))))        # scipy.stats.t.sf(|t|, df), its own kernel
    return float(special.stdtr(df, -t) if alternative == "greater" else special.stdtr(df, t))


def welch_test(a, b, alternative: str = "two-sided", confidence: float = DEFAULT.confidence) -> TestResult:
    """Welch's unequal-variance t-test (scipy's ttest_ind default is Student's: equal_var=False is this one)."""
    _check_alternative(alternative)
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.size < 2 or b.size < 2:
        return TestResult("Welch t-test", math.nan, math.nan, note="needs at least 2 seeds per arm")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se <= _ROUNDING * max(np.abs(a).max(), np.abs(b).max()):
        return TestResult("Welch t-test", math.nan, math.nan, note="undefined: zero variance in both arms")
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    diff = a.mean() - b.mean()
    t = diff / se
    half = special.stdtrit(df, 0.5 + confidence / 2) * se
    return TestResult("Welch t-test", float(t), _t_pvalue(t, df, alternative), float(df),
                      (float(diff - half), float(diff + half)))


def paired_t_test(a, b, alternative: str = "two-sided", confidence: float = DEFAULT.confidence) -> TestResult:
    """Paired t-test on d = a - b (scipy.stats.ttest_rel); only valid when seed i of both arms shares its randomness."""
    _check_alternative(alternative)
    d = _paired_differences(a, b)
    if d.size < 2:
        return TestResult("paired t-test", math.nan, math.nan, note="needs at least 2 pairs")
    se = d.std(ddof=1) / math.sqrt(d.size)
    if se <= _ROUNDING * max(np.abs(a).max(), np.abs(b).max()):
        return TestResult("paired t-test", math.nan, math.nan,
                          note="undefined: every paired difference is the same")
    df = d.size - 1
    t = d.mean() / se
    half = special.stdtrit(df, 0.5 + confidence / 2) * se
    return TestResult("paired t-test", float(t), _t_pvalue(t, df, alternative), float(df),
                      (float(d.mean() - half), float(d.mean() + half)))


# ----------------------------------------------------------------------------- resampling tests
@functools.lru_cache(maxsize=256)
def comb(n: int, k: int) -> int:
    """math.comb, remembered: C(5,000, 2,500) has 1,500 digits and the deciding test asks for it ~100 times."""
    return math.comb(n, k)


def smallest_p(test: str, n_a: int, n_b: int | None = None, alternative: str = "two-sided") -> float:
    """Smallest p-value an exact rank/permutation test can return at this n, whatever the data.

    test: "mannwhitney" | "permutation" (two independent arms), "signflip" | "wilcoxon" (n_a pairs).
    3 vs 3 Mann-Whitney: 2/20 = 0.1; 4 vs 4: 2/70; sign-flip n = 3, one-sided: 1/8; Wilcoxon n = 5: 2/32.
    """
    _check_alternative(alternative)
    sides = 2 if alternative == "two-sided" else 1
    if test in ("signflip", "wilcoxon"):
        return min(1.0, sides / 2**n_a)              # int / int: 0.0 below the smallest float, never an overflow
    if test in ("mannwhitney", "permutation"):
        if n_b is None:
            raise ValueError(f"smallest_p({test!r}) needs n_b, the size of the second arm")
        if test == "permutation" and n_a != n_b:
            sides = 1      # with unequal arms the two extreme splits give different |mean difference|
        return min(1.0, sides / comb(n_a + n_b, n_a))
    raise ValueError(f"test={test!r}: accepted values are mannwhitney, permutation, signflip, wilcoxon")


def countable(arrangements: int) -> int:
    """An exact test's number of arrangements as a TestResult records it: the count itself when it fits in 64 bits,
    else 0 (C(2000, 1000) has 600 digits: such a test is decided by formula, never enumerated)."""
    return arrangements if arrangements < 2**63 else 0


def _resampling_pvalue(null: np.ndarray, observed: float, alternative: str, exact: bool) -> float:
    """Same comparison rule as scipy.stats.permutation_test (relative tolerance; +1 correction for Monte Carlo)."""
    gamma = abs(observed) * np.finfo(float).eps * 100
    if alternative == "two-sided":
        hits = np.count_nonzero(np.abs(null) >= abs(observed) - gamma)
    elif alternative == "greater":
        hits = np.count_nonzero(null >= observed - gamma)
    else:
        hits = np.count_nonzero(null <= observed + gamma)
    adjust = 0 if exact else 1
    return float(min(1.0, (hits + adjust) / (null.size + adjust)))


def _splits(n: int, na: int) -> np.ndarray:
    """Every split of n indices into arm a (first na columns) and arm b, each part ascending, in
    itertools.combinations order: the arrangement scipy.stats.permutation_test enumerates.   # (C(n, na), n)"""
    total = math.comb(n, na)
    first = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), na)), dtype=np.int64,
                        count=total * na).reshape(total, na)
    member = np.zeros((total, n), dtype=bool)
    np.put_along_axis(member, first, True, axis=1)
    rest = np.nonzero(~member)[1].reshape(total, n - na)                 # ascending within each row
    return np.concatenate([first, rest], axis=1)


def permutation_test(a, b, alternative: str = "two-sided", n_resamples: int = DEFAULT.n_resamples,
                     seed: int = DEFAULT.seed, max_exact: int = 100_000) -> TestResult:
    """Permutation test of the difference of means; agrees exactly with
    scipy.stats.permutation_test((a, b), statistic, n_resamples=np.inf) where statistic is
    |mean a - mean b| with alternative="greater" (our two-sided) or mean a - mean b ("greater", "less").

    The observed and every null statistic are computed by the same formula, and ties use scipy's relative
    tolerance 100 eps |observed|. Exact enumeration of all C(n_a + n_b, n_a) splits when there are at most
    `max_exact` (x[part].mean() - x[rest].mean(), parts in ascending index order, as scipy does); otherwise
    `n_resamples` random splits (arm a's sum S, then S / n_a - (total - S) / n_b: O(B n) in bounded blocks)
    with p = (hits + 1) / (n_resamples + 1).
    """
    _check_alternative(alternative)
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.size < 1 or b.size < 1:
        return TestResult("permutation test", math.nan, math.nan, note="needs at least 1 seed per arm")
    x = np.concatenate([a, b])
    n, na, nb = x.size, a.size, b.size
    observed = a.mean() - b.mean()
    if comb(n, na) <= max_exact:
        order = _splits(n, na)                                                    # (C, N)
        batch = x[order]                                                          # (C, N)
        null = batch[:, :na].mean(axis=-1) - batch[:, na:].mean(axis=-1)         # (C,)
        exact, floor = True, smallest_p("permutation", na, nb, alternative)
    else:
        observed, null = _random_splits(x, na, n_resamples, np.random.default_rng(seed))
        exact, floor = False, 1.0 / (n_resamples + 1)
    if alternative == "two-sided":
        p = _resampling_pvalue(np.abs(null), abs(observed), "greater", exact)
    else:
        p = _resampling_pvalue(null, observed, alternative, exact)
    name = "exact permutation test" if exact else "Monte Carlo permutation test"
    return TestResult(name, float(observed), p, min_p=floor, exact=exact, n_resamples=int(null.size))


_CHUNK = 2**21          # values per block of random splits: bounded memory and cache-sized work at any n


def _random_splits(x: np.ndarray, na: int, n_resamples: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """The observed and `n_resamples` random-split differences of means, by one formula: arm a's sum S over its
    na values, then S / na - (total - S) / nb (O(B n), no sort; the first na of x are arm a).   # -> (), (B,)"""
    n, nb = x.size, x.size - na
    total = x.sum()

    def diff(s):
        return s / na - (total - s) / nb

    rows = max(1, _CHUNK // n)
    null = np.empty(n_resamples)
    for lo in range(0, n_resamples, rows):
        k = min(rows, n_resamples - lo)
        perm = rng.permuted(np.broadcast_to(x, (k, n)), axis=1)                   # (k, n) shuffled values
        null[lo:lo + k] = diff(perm[:, :na].sum(axis=1))                          # (k,)
    return float(diff(x[:na].sum())), null


def sign_flip_test(a, b, alternative: str = "two-sided", n_resamples: int = DEFAULT.n_resamples,
                   seed: int = DEFAULT.seed, max_exact_pairs: int = 16) -> TestResult:
    """Paired permutation test: flip the sign of each difference d = a - b; statistic mean(d) (two-sided |mean d|).

    Agrees exactly with scipy.stats.permutation_test((a, b), statistic, permutation_type="samples",
    n_resamples=np.inf) (same formula for observed and null: the mean of the signed differences).
    Exact over all 2^n sign patterns for n <= max_exact_pairs, else Monte Carlo. Zero differences are kept.
    """
    _check_alternative(alternative)
    d = _paired_differences(a, b)
    n = d.size
    if n < 1:
        return TestResult("sign-flip test", math.nan, math.nan, note="needs at least 1 pair")
    if n <= max_exact_pairs:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1                # (2^n, n)
        signs, exact, floor = 1.0 - 2.0 * bits, True, smallest_p("signflip", n, alternative=alternative)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_resamples, n))
        exact, floor = False, 1.0 / (n_resamples + 1)
    null = (signs * d).mean(axis=-1)                                                  # (2^n,)
    observed = d.mean()
    if alternative == "two-sided":
        p = _resampling_pvalue(np.abs(null), abs(observed), "greater", exact)
    else:
        p = _resampling_pvalue(null, observed, alternative, exact)
    name = "exact sign-flip test" if exact else "Monte Carlo sign-flip test"
    return TestResult(name, float(observed), p, min_p=floor, exact=exact, n_resamples=int(null.size))


# ----------------------------------------------------------------------------- bootstrap
def _blocks(n_resamples: int, width: int) -> list[int]:
    """Rows per block of resamples of `width` values: all at once up to _CHUNK values (below ~200 seeds per arm
    at 10,000 resamples, so one block, the same draws as ever), else blocks of at most _CHUNK values, so memory
    stays bounded and page faults stay few at 1,000s of seeds."""
    rows = max(1, _CHUNK // max(width, 1))
    return [min(rows, n_resamples - lo) for lo in range(0, n_resamples, rows)]


def resample_counts(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap multiplicities: row r says how often each of the n values is drawn.   # (B, n)"""
    idx = rng.integers(0, n, size=(n_resamples, n)) + n * np.arange(n_resamples)[:, None]
    return np.bincount(idx.ravel(), minlength=n_resamples * n).reshape(n_resamples, n).astype(float)


def bca_interval(boot: np.ndarray, observed: float, influences: list[np.ndarray],
                 confidence: float) -> tuple[float, float, str]:
    """BCa bounds from bootstrap replicates and jackknife influence values (one array per sample), as in
    scipy.stats.bootstrap (Efron & Tibshirani 14.3, 15.36); the percentile interval when BCa is undefined."""
    alpha = (1 - confidence) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        z0 = special.ndtri((np.count_nonzero(boot < observed) + np.count_nonzero(boot <= observed)) / (2 * boot.size))
        num = sum(np.sum(u**3) / u.size**3 for u in influences)
        den = sum(np.sum(u**2) / u.size**2 for u in influences)
        accel = num / (6 * den**1.5)
        z = special.ndtri(np.array([alpha, 1 - alpha]))
        levels = special.ndtr(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    if np.all(np.isfinite(levels)) and boot.min() < boot.max():
        low, high = np.percentile(boot, levels * 100)
        return float(low), float(high), "BCa"
    why = "all resamples equal" if boot.min() == boot.max() else "observed value outside the resamples"
    low, high = np.percentile(boot, [alpha * 100, (1 - alpha) * 100])
    return float(low), float(high), f"percentile (BCa undefined: {why})"


def bootstrap_mean(x, confidence: float = DEFAULT.confidence, n_resamples: int = DEFAULT.n_resamples,
                   seed: int = DEFAULT.seed) -> Interval:
    """CI of one arm's mean (BCa, percentile fallback)."""
    x = _finite(x, "values")
    if x.size < 2:
        return Interval(float(x.mean()) if x.size else math.nan, math.nan, math.nan, "none (n < 2)",
                        confidence, 0, seed)
    rng = np.random.default_rng(seed)
    boot = np.concatenate([x[rng.integers(0, x.size, size=(k, x.size))].mean(axis=1)        # (B,) the draws of
                           for k in _blocks(n_resamples, x.size)])                             # resample_counts
    low, high, method = bca_interval(boot, float(x.mean()), [x - x.mean()], confidence)
    return Interval(float(x.mean()), low, high, method, confidence, n_resamples, seed)


@dataclass(frozen=True)
class BootstrapDelta:
    delta: Interval          # mean(a) - mean(b), or mean(a - b) when paired
    p_better: Interval       # P(a beats b) = U / (n_a n_b), percentile interval


def bootstrap_delta(a, b, paired: bool = False, lower_is_better: bool = False, confidence: float = DEFAULT.confidence,
                    n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed) -> BootstrapDelta:
    """Bootstrap the difference of means (BCa) and P(a better) (percentile) from the same resamples.

    Independent arms are resampled separately (stratified); paired arms resample whole pairs.
    """
    a, b = _finite(a, "a"), _finite(b, "b")
    if paired and a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length ({a.size} vs {b.size}): pass the matched seeds only")
    delta = float(a.mean() - b.mean()) if a.size and b.size else math.nan
    pb = prob_better(a, b, lower_is_better) if a.size and b.size else math.nan
    if a.size < 2 or b.size < 2:
        none = "none (n < 2)"
        return BootstrapDelta(Interval(delta, math.nan, math.nan, none, confidence, 0, seed),
                              Interval(pb, math.nan, math.nan, none, confidence, 0, seed))
    rng = np.random.default_rng(seed)
    boot_delta, boot_pb = np.empty(n_resamples), np.empty(n_resamples)
    lo = 0
    for k in _blocks(n_resamples, a.size + (0 if paired else b.size)):
        ca = resample_counts(a.size, k, rng)                                      # (k, n_a)
        cb = ca if paired else resample_counts(b.size, k, rng)                    # (k, n_b)
        boot_delta[lo:lo + k] = ca @ a / a.size - cb @ b / b.size                 # (k,)
        boot_pb[lo:lo + k] = weighted_wins(a, b, ca, cb, lower_is_better) / (a.size * b.size)
        lo += k
    if paired:
        d = a - b
        influences = [d - d.mean()]
    else:
        influences = [a - a.mean(), -(b - b.mean())]
    low, high, method = bca_interval(boot_delta, delta, influences, confidence)
    alpha = (1 - confidence) / 2
    pb_low, pb_high = np.percentile(boot_pb, [alpha * 100, (1 - alpha) * 100])
    return BootstrapDelta(Interval(delta, low, high, method, confidence, n_resamples, seed),
                          Interval(pb, float(pb_low), float(pb_high), "percentile", confidence, n_resamples, seed))


def prob_better_interval(estimate: float, n_a: int, n_b: int, confidence: float = DEFAULT.confidence) -> Interval:
    """CI of P(a beats b) = U / (n_a n_b): Newcombe's Wilson-type score interval (Newcombe 2006, Stat Med 25,
    "Confidence intervals for an effect size measure based on the Mann-Whitney statistic", method 5), with a
    continuity correction of half a step of U.

    Solves (|theta_hat - theta| - 1 / (2 n_a n_b))^2 = z^2 V(theta) with the Hanley-McNeil variance at theta,
    V = theta (1 - theta) / (n_a n_b) [1 + (N* - 1)((1 - theta) / (2 - theta) + theta / (1 + theta))],
    N* = (n_a + n_b) / 2: never zero width, inside [0, 1]. Without the correction it covers 0.91 at 3 vs 3
    (U is coarse there); with it >= 0.95 from 3 seeds per arm on normal arms (tests/test_stats.py).
    """
    method = "Newcombe score interval (method 5, continuity-corrected)"
    if not (n_a >= 1 and n_b >= 1 and 0 <= estimate <= 1):
        return Interval(estimate, math.nan, math.nan, "none (no seeds)", confidence, 0, 0)
    z2 = special.ndtri(0.5 + confidence / 2) ** 2
    k, cc = (n_a + n_b) / 2 - 1, 0.5 / (n_a * n_b)

    def gap(theta):
        v = theta * (1 - theta) / (n_a * n_b) * (1 + k * ((1 - theta) / (2 - theta) + theta / (1 + theta)))
        return max(0.0, abs(estimate - theta) - cc) ** 2 - z2 * v

    low = _brentq(gap, 0.0, min(estimate, 1 - 1e-12), xtol=1e-14) if estimate > cc else 0.0
    high = _brentq(gap, max(estimate, 1e-12), 1.0, xtol=1e-14) if estimate < 1 - cc else 1.0
    return Interval(float(estimate), float(low), float(high), method, confidence, 0, 0)


# ----------------------------------------------------------------------------- worst-rank test (lost seeds)
WORST_RANK_EXACT_CELLS = 4_000_000   # the exact null's table, (n_a + 1) x (2 n^2 + 2): 60 vs 60 seeds; beyond, MC
WORST_RANK_PAIRS = 1_000_000         # n_a n_b pairwise differences enumerated by the interval; beyond, bisection


@dataclass(frozen=True)
class _Null:
    """Null distribution of 2H: counts of consecutive 2H values from `start`, exact or from Monte Carlo draws."""
    start: int
    counts: np.ndarray        # (support,)
    exact: bool

    @property
    def pmf(self) -> np.ndarray:
        return self.counts / self.counts.sum()


def _doubled_midranks(n: int, lost: int, top: bool) -> np.ndarray:
    """The pooled doubled midranks when `lost` of n values tie at the top (top=True) or bottom, the others distinct."""
    usable = np.arange(1, n - lost + 1) + (0 if top else lost)                 # ascending ranks
    return np.array(list(2 * usable) + [2 * (n - lost if top else 0) + lost + 1] * lost, dtype=np.int64)


@functools.lru_cache(maxsize=256)
def _worst_rank_null(n_a: int, n_b: int, lost: int, top: bool, n_resamples: int = DEFAULT.n_resamples,
                     seed: int = DEFAULT.seed) -> _Null:
    """Permutation distribution of 2H, H = #(a above b) + ties/2, when `lost` of the n_a + n_b values tie at
    the top (top=True) or bottom and the others are distinct. Enumerated exactly (subset sums of the doubled
    midranks, rescaled so no count overflows) while the table has at most WORST_RANK_EXACT_CELLS cells; beyond,
    n_resamples random splits (fixed seed), the observed split counted among them at p-value time."""
    n = n_a + n_b
    weights = _doubled_midranks(n, lost, top)
    if (n_a + 1) * (2 * n * n + 2) <= WORST_RANK_EXACT_CELLS:
        counts = np.zeros((n_a + 1, 2 * n * n + 2))                                 # (k chosen, doubled rank sum)
        counts[0, 0] = 1.0
        for w in weights.tolist():
            counts[1:, w:] = counts[1:, w:] + counts[:-1, :-w]
            top_count = counts.max()
            if top_count > 1e250:                       # a common factor keeps every ratio and every count finite
                counts /= top_count
        row = counts[n_a]
        support = np.nonzero(row)[0]
        return _Null(int(support[0]) - n_a * (n_a + 1), row[support[0]:support[-1] + 1], True)
    rng = np.random.default_rng(seed)
    sums = np.empty(n_resamples, dtype=np.int64)
    rows = max(1, _CHUNK // n)
    for lo in range(0, n_resamples, rows):
        k = min(rows, n_resamples - lo)
        sums[lo:lo + k] = rng.permuted(np.broadcast_to(weights, (k, n)), axis=1)[:, :n_a].sum(axis=1)
    low = int(sums.min())
    return _Null(low - n_a * (n_a + 1), np.bincount(sums - low).astype(float), False)


@dataclass(frozen=True)
class WorstRank:
    """Worst-rank composite comparison: a lost (failed or diverged) seed ranks below every usable one."""
    test: TestResult          # statistic = composite P(a better); exact two-sided p
    p_better: float           # composite P(a beats b), ties (lost vs lost) count half
    a: np.ndarray             # usable values of a            # (n_a_usable,)
    b: np.ndarray             # usable values of b            # (n_b_usable,)
    lost_a: int
    lost_b: int
    lower_is_better: bool
    n_resamples: int = DEFAULT.n_resamples     # Monte Carlo draws of the null when it cannot be enumerated
    seed: int = DEFAULT.seed


def _pvalue_2h(h2: np.ndarray, null: _Null) -> np.ndarray:
    """Two-sided p of doubled statistics h2: min(1, 2 min(P(2H <= h2), P(2H >= h2))); Monte Carlo: each tail
    (hits + 1) / (draws + 1), the observed split counted as one of the draws."""
    cum = np.concatenate([[0.0], np.cumsum(null.counts)])
    total, adjust = cum[-1], (0.0 if null.exact else 1.0)
    size = null.counts.size
    k = np.clip(np.asarray(h2) - null.start, -1, size)
    below = cum[np.clip(k + 1, 0, size)]                                       # draws with 2H <= h2
    above = total - cum[np.clip(k, 0, size)]                                   # draws with 2H >= h2
    return np.minimum(1.0, 2 * np.minimum(below + adjust, above + adjust) / (total + adjust))


def worst_rank_test(a, b, lost_a: int = 0, lost_b: int = 0, lower_is_better: bool = True,
                    n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed) -> WorstRank:
    """Exact rank test over every ended seed, a lost one ranked worse than every usable one (both arms).

    The statistic is the Mann-Whitney count H of (a, b) pairs where a's value is higher (lost seeds placed at
    +inf when lower is better, -inf otherwise; equal values count half); its null distribution is enumerated
    exactly (all splits of the pooled ranks, the lost ones tied) up to WORST_RANK_EXACT_CELLS (about 60 vs 60
    seeds), else drawn from n_resamples random splits (Monte Carlo, fixed seed; the test's name says so). Two-sided
    p = min(1, 2 min(P(H <= h), P(H >= h))): the same as scipy.stats.permutation_test with that statistic and
    alternative="two-sided" when the usable values are distinct. Valid for independent arms; for seeds paired
    by shared randomness it is conservative (within-seed correlation narrows the true null).
    """
    a, b = _finite(a, "a"), _finite(b, "b")
    n_a, n_b = a.size + lost_a, b.size + lost_b
    if n_a < 1 or n_b < 1:
        nan = TestResult("worst-rank test", math.nan, math.nan, note="needs at least 1 ended seed per arm")
        return WorstRank(nan, math.nan, a, b, lost_a, lost_b, lower_is_better, n_resamples, seed)
    h2 = _h2(a, b, lost_a, lost_b, lower_is_better, 0.0)
    null = _worst_rank_null(n_a, n_b, lost_a + lost_b, lower_is_better, n_resamples, seed)
    p = float(_pvalue_2h(np.array([h2]), null)[0])
    pmf = null.pmf
    floor = float(min(1.0, 2 * min(pmf[0], pmf[-1]))) if null.exact else 1.0 / (n_resamples + 1)
    better = (1 - h2 / (2 * n_a * n_b)) if lower_is_better else h2 / (2 * n_a * n_b)
    name = "worst-rank test" if null.exact else "Monte Carlo worst-rank test"
    note = f"{lost_a} and {lost_b} lost seed(s) ranked worst" + (
        "" if null.exact else f"; null drawn from {n_resamples} random splits (too many to enumerate)")
    test = TestResult(name, float(better), p, min_p=floor, exact=null.exact,
                      n_resamples=countable(math.comb(n_a + n_b, n_a)) if null.exact else n_resamples, note=note)
    return WorstRank(test, float(better), a, b, lost_a, lost_b, lower_is_better, n_resamples, seed)


def _h2(a, b, lost_a, lost_b, lower_is_better, shift) -> int:
    """2H at a shift of a's usable values by -shift (see worst_rank_test), in O(n log n)."""
    sb = np.sort(b)
    x = a - shift
    below = int(np.searchsorted(sb, x, side="left").sum())                       # pairs with a - shift > b
    ties = int(np.searchsorted(sb, x, side="right").sum()) - below
    fixed = 2 * (lost_a * b.size if lower_is_better else a.size * lost_b) + lost_a * lost_b
    return int(fixed + 2 * below + ties)


def worst_rank_interval(w: WorstRank, confidence: float) -> Interval:
    """Shifts delta (a's usable values minus delta vs b) that the worst-rank test does not reject at level
    1 - confidence: an interval, because H falls as delta grows. It excludes 0 exactly when the test's p is
    below 1 - confidence (an endpoint is open when 0 ties a pairwise difference). When no shift accounts for
    the lost seeds the set is empty and is given as [+inf, +inf] (a above b whatever the shift) or [-inf, -inf].
    Up to WORST_RANK_PAIRS pairwise differences they are enumerated; beyond, each end is bisected on the shift."""
    level = 1 - confidence
    method = f"worst-rank test inversion (shift of the usable values), level {confidence:.4g}"
    n_a, n_b = w.a.size + w.lost_a, w.b.size + w.lost_b
    if n_a < 1 or n_b < 1:
        return Interval(math.nan, math.nan, math.nan, "none (no seeds)", confidence, 0, 0)
    null = _worst_rank_null(n_a, n_b, w.lost_a + w.lost_b, w.lower_is_better, w.n_resamples, w.seed)
    if w.a.size * w.b.size > WORST_RANK_PAIRS:
        return _worst_rank_bisected(w, null, level, confidence, method)
    d = np.sort((w.a[:, None] - w.b[None, :]).ravel())                             # (K,)
    u = np.unique(d)
    fixed = 2 * (w.lost_a * w.b.size if w.lower_is_better else w.a.size * w.lost_b) + w.lost_a * w.lost_b
    # regions (-inf, u1), {u1}, (u1, u2), ..., {uK}, (uK, inf) of the distinct differences u; 2H is constant on each
    right, left = np.searchsorted(d, u, "right"), np.searchsorted(d, u, "left")
    h2 = np.empty(2 * u.size + 1, dtype=np.int64)                                 # (2K' + 1,)
    h2[0::2] = fixed + 2 * np.concatenate([[d.size], d.size - right])
    h2[1::2] = fixed + 2 * (d.size - right) + (right - left)
    bounds = np.concatenate([[-math.inf], u, [math.inf]])
    ends = [(bounds[r // 2], bounds[r // 2 + 1]) if r % 2 == 0 else (u[r // 2], u[r // 2]) for r in range(h2.size)]
    p = _pvalue_2h(h2, null)
    ok = np.nonzero(p >= level)[0]
    if ok.size == 0:                  # even the smallest 2H (largest shift) in the upper tail: a is above b
        inf = math.inf if _above(int(h2[-1]), null) else -math.inf
        return Interval(inf, inf, inf, method + ": no shift accounts for the lost seeds", confidence, 0, 0)
    low, high = ends[ok[0]][0], ends[ok[-1]][1]
    best = np.nonzero(p == p.max())[0]
    lo_b, hi_b = ends[best[0]][0], ends[best[-1]][1]
    estimate = (lo_b + hi_b) / 2 if math.isfinite(lo_b) and math.isfinite(hi_b) else (
        lo_b if math.isfinite(lo_b) else hi_b)
    return Interval(float(estimate), float(low), float(high), method, confidence, 0, 0)


def _above(h2: int, null: _Null) -> bool:
    """Is 2H = h2 in the upper tail of the null (rather than the lower)?"""
    cdf = np.cumsum(null.pmf)
    k = h2 - null.start
    return k > 0 and (k >= cdf.size or 1 - cdf[k - 1] < cdf[min(k, cdf.size - 1)])


def _worst_rank_bisected(w: WorstRank, null: _Null, level: float, confidence: float, method: str) -> Interval:
    """worst_rank_interval at many seeds: 2H(shift) is a non-increasing step function (O(n log n) per shift), the
    accepted 2H values a range [lo, hi] of the null; each end of the accepted shifts is bisected to the step."""
    def h2(shift: float) -> int:
        return _h2(w.a, w.b, w.lost_a, w.lost_b, w.lower_is_better, shift)

    values = null.start + np.arange(null.counts.size)
    ok = values[_pvalue_2h(values, null) >= level]
    smallest, largest = h2(math.inf), h2(-math.inf)          # 2H beyond every pairwise difference, either side
    if ok.size == 0 or smallest > ok[-1] or largest < ok[0]:
        inf = math.inf if (ok.size and smallest > ok[-1]) or (not ok.size and _above(smallest, null)) else -math.inf
        return Interval(inf, inf, inf, method + ": no shift accounts for the lost seeds", confidence, 0, 0)
    span = float(np.ptp(np.concatenate([w.a, w.b]))) or 1.0
    lo_edge = float(w.a.min() - w.b.max()) - span                # below every pairwise difference
    hi_edge = float(w.a.max() - w.b.min()) + span                # above every one

    def first_at_most(target: int) -> float:
        """The smallest shift with 2H <= target (2H falls as the shift grows)."""
        lo, hi = lo_edge, hi_edge
        for _ in range(200):
            mid = lo + (hi - lo) / 2
            if mid in (lo, hi):
                break
            lo, hi = (lo, mid) if h2(mid) <= target else (mid, hi)
        return hi

    low = -math.inf if largest <= ok[-1] else first_at_most(int(ok[-1]))
    high = math.inf if smallest >= ok[0] else first_at_most(int(ok[0]) - 1)
    centre = int(values[int(np.argmax(np.cumsum(null.counts) >= null.counts.sum() / 2))])   # the null's median
    estimate = first_at_most(centre)
    return Interval(float(estimate), float(low), float(high), method + " (ends bisected)", confidence, 0, 0)


# ----------------------------------------------------------------------------- multiplicity
def holm(pvalues) -> np.ndarray:
    """Holm step-down adjusted p-values (plain Holm, not Holm-Sidak): p_(i) * (m - i + 1), running max, cap 1."""
    p = np.asarray(pvalues, dtype=float)
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"holm needs p-values in [0, 1], got {p.tolist()} (enter an untested comparison as 1.0)")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(np.minimum(1.0, p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = stepped
    return out


# ----------------------------------------------------------------------------- power
def t_power(d: float, n: int, alpha: float = DEFAULT.alpha, paired: bool = False, n_b: int | None = None) -> float:
    """Power of the two-sided t-test at standardized effect d with n seeds in the first arm and n_b (default n)
    in the second; n pairs when paired.

    Two-sample: df = n + n_b - 2, noncentrality d / sqrt(1/n + 1/n_b) (statsmodels' TTestIndPower with
    ratio = n_b / n); paired: df = n - 1, noncentrality d sqrt(n) (d = d_z).
    """
    n_b = n if n_b is None or paired else n_b
    df = n - 1 if paired else n + n_b - 2
    if df < 1 or n < 1 or n_b < 1:
        return math.nan
    d = abs(d)
    if math.isinf(d):
        return 1.0
    nc = d * (math.sqrt(n) if paired else 1 / math.sqrt(1 / n + 1 / n_b))
    crit = special.stdtrit(df, 1 - alpha / 2)     # scipy.special directly: t_power sits inside root searches
    lower = special.nctdtr(df, nc, -crit)         # wrong-sign rejections; NaN far in the tail, where it is
    lower = min(0.0 if math.isnan(lower) else float(lower), float(special.ndtr(-nc)))   # below Phi(-nc)
    upper = 1.0 - special.nctdtr(df, nc, crit)
    return float(min(1.0, max(0.0, upper if math.isfinite(upper) else 1.0) + lower))


def seeds_needed(d: float, alpha: float = DEFAULT.alpha, power: float = 0.8, paired: bool = False,
                 max_n: int = 10_000_000) -> int | None:
    """Smallest n per arm (pairs when paired) reaching `power`; integer search, so huge effects work too.
    None when d is 0 or NaN or more than max_n would be needed."""
    if math.isnan(d) or d == 0:
        return None
    lo = 2
    if t_power(d, lo, alpha, paired) >= power:
        return lo
    hi = 4
    while t_power(d, hi, alpha, paired) < power:
        lo, hi = hi, hi * 2
        if hi > max_n:
            return None
    while hi - lo > 1:                 # invariant: power(lo) < target <= power(hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if t_power(d, mid, alpha, paired) >= power else (mid, hi)
    return hi


def min_detectable_effect(n: int, alpha: float = DEFAULT.alpha, power: float = 0.8, paired: bool = False,
                          n_b: int | None = None) -> float:
    """Smallest standardized effect (d, or d_z when paired) the two-sided t-test detects with `power` with
    n and n_b (default n) seeds per arm: the ratio form, as statsmodels' TTestIndPower(ratio=n_b / n)."""
    n_b = n if n_b is None or paired else n_b
    if (n - 1 if paired else n + n_b - 2) < 1 or min(n, n_b) < 1:
        return math.nan
    hi = 1.0
    while t_power(hi, n, alpha, paired, n_b) < power:
        hi *= 2
    return float(_brentq(lambda d: t_power(d, n, alpha, paired, n_b) - power, 0.0, hi, xtol=1e-10))
