"""Statistics on per-seed arrays: effect sizes, bootstrap CIs, tests, Holm, power. Pure numpy/scipy, no I/O.

    from sweeper import stats
    stats.welch_test(a, b).pvalue                    # == scipy.stats.ttest_ind(a, b, equal_var=False).pvalue
    stats.permutation_test(a, b).pvalue              # exact enumeration at small n, Monte Carlo above max_exact
    stats.bootstrap_delta(a, b, lower_is_better=True).delta   # Interval: BCa, percentile fallback
    stats.holm([0.01, 0.04]); stats.seeds_needed(0.5)         # -> adjusted p-values; 64 per arm

Conventions: `a` is the variant, `b` the baseline; every difference is a - b; two-sided unless `alternative`
says otherwise. Inputs must be finite (a NaN seed is a diverged run: count it, do not pass it in). Results that
a design cannot produce (zero variance, n < 2) come back as NaN, never as an exception or a fake 0.
Every random step takes an explicit seed (np.random.default_rng(seed)); the same call gives the same numbers.
The bootstrap draws multiplicity counts (B, n) once and gets every resampled statistic by matrix products:
no Python loop per resample.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

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


def _check_alternative(alternative: str) -> None:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative={alternative!r}: accepted values are {', '.join(ALTERNATIVES)}")


# ----------------------------------------------------------------------------- descriptive and effect sizes
def iqm(x) -> float:
    """Interquartile mean (25% trimmed mean over all values), as rliable's aggregate_iqm."""
    x = np.asarray(x, dtype=float)
    return float(sps.trim_mean(x, 0.25, axis=None)) if x.size else math.nan


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


def prob_better(a, b, lower_is_better: bool = False) -> float:
    """P(a random seed of `a` beats one of `b`) = U / (n_a n_b), ties count half (Mann-Whitney U of `a`).

    2-D inputs (runs x tasks) give the mean over tasks, as rliable's probability_of_improvement.
    """
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.ndim == 2:
        return float(np.mean([prob_better(a[:, t], b[:, t], lower_is_better) for t in range(a.shape[1])]))
    if a.size == 0 or b.size == 0:
        return math.nan
    return float(_better_matrix(a, b, lower_is_better).mean())


# ----------------------------------------------------------------------------- parametric tests
def _t_pvalue(t: float, df: float, alternative: str) -> float:
    if alternative == "two-sided":
        return float(min(1.0, 2 * sps.t.sf(abs(t), df)))
    return float(sps.t.sf(t, df) if alternative == "greater" else sps.t.cdf(t, df))


def welch_test(a, b, alternative: str = "two-sided", confidence: float = 0.95) -> TestResult:
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
    half = sps.t.ppf(0.5 + confidence / 2, df) * se
    return TestResult("Welch t-test", float(t), _t_pvalue(t, df, alternative), float(df),
                      (float(diff - half), float(diff + half)))


def paired_t_test(a, b, alternative: str = "two-sided", confidence: float = 0.95) -> TestResult:
    """Paired t-test on d = a - b (scipy.stats.ttest_rel); only valid when seed i of both arms shares its randomness."""
    _check_alternative(alternative)
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length ({a.size} vs {b.size}): pass the matched seeds only")
    d = a - b
    if d.size < 2:
        return TestResult("paired t-test", math.nan, math.nan, note="needs at least 2 pairs")
    se = d.std(ddof=1) / math.sqrt(d.size)
    if se <= _ROUNDING * max(np.abs(a).max(), np.abs(b).max()):
        return TestResult("paired t-test", math.nan, math.nan,
                          note="undefined: every paired difference is the same")
    df = d.size - 1
    t = d.mean() / se
    half = sps.t.ppf(0.5 + confidence / 2, df) * se
    return TestResult("paired t-test", float(t), _t_pvalue(t, df, alternative), float(df),
                      (float(d.mean() - half), float(d.mean() + half)))


# ----------------------------------------------------------------------------- resampling tests
def smallest_p(test: str, n_a: int, n_b: int | None = None, alternative: str = "two-sided") -> float:
    """Smallest p-value an exact rank/permutation test can return at this n, whatever the data.

    test: "mannwhitney" | "permutation" (two independent arms), "signflip" | "wilcoxon" (n_a pairs).
    3 vs 3 Mann-Whitney: 2/20 = 0.1; 4 vs 4: 2/70; sign-flip n = 3, one-sided: 1/8; Wilcoxon n = 5: 2/32.
    """
    _check_alternative(alternative)
    sides = 2 if alternative == "two-sided" else 1
    if test in ("signflip", "wilcoxon"):
        return min(1.0, sides / 2.0**n_a)
    if test in ("mannwhitney", "permutation"):
        if n_b is None:
            raise ValueError(f"smallest_p({test!r}) needs n_b, the size of the second arm")
        if test == "permutation" and n_a != n_b:
            sides = 1      # with unequal arms the two extreme splits give different |mean difference|
        return min(1.0, sides / math.comb(n_a + n_b, n_a))
    raise ValueError(f"test={test!r}: accepted values are mannwhitney, permutation, signflip, wilcoxon")


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


def permutation_test(a, b, alternative: str = "two-sided", n_resamples: int = 10_000, seed: int = 0,
                     max_exact: int = 100_000) -> TestResult:
    """Permutation test of the difference of means (two-sided: |mean a - mean b| as extreme or more).

    Exact enumeration of all C(n_a + n_b, n_a) splits when there are at most `max_exact`; otherwise
    `n_resamples` random splits with p = (hits + 1) / (n_resamples + 1).
    """
    _check_alternative(alternative)
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.size < 1 or b.size < 1:
        return TestResult("permutation test", math.nan, math.nan, note="needs at least 1 seed per arm")
    x = np.concatenate([a, b])
    n, na, nb = x.size, a.size, b.size
    total = math.comb(n, na)
    observed = a.mean() - b.mean()
    if total <= max_exact:
        members = np.zeros((total, n))                                            # (C, N) 1 = in arm a
        rows = np.repeat(np.arange(total), na)
        members[rows, np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), na)),
                                  dtype=np.int64, count=total * na)] = 1.0
        exact, floor = True, smallest_p("permutation", na, nb, alternative)
    else:
        rng = np.random.default_rng(seed)
        order = rng.permuted(np.tile(np.arange(n), (n_resamples, 1)), axis=1)[:, :na]  # (B, n_a)
        members = np.zeros((n_resamples, n))
        np.put_along_axis(members, order, 1.0, axis=1)
        exact, floor = False, 1.0 / (n_resamples + 1)
    sum_a = members @ x                                                           # (C,)
    null = sum_a / na - (x.sum() - sum_a) / nb
    p = _resampling_pvalue(null, observed, alternative, exact)
    name = "exact permutation test" if exact else "Monte Carlo permutation test"
    return TestResult(name, float(observed), p, min_p=floor, exact=exact, n_resamples=int(null.size))


def sign_flip_test(a, b, alternative: str = "two-sided", n_resamples: int = 10_000, seed: int = 0,
                   max_exact_pairs: int = 16) -> TestResult:
    """Paired permutation test: flip the sign of each difference d = a - b; statistic mean(d).

    Exact over all 2^n sign patterns for n <= max_exact_pairs, else Monte Carlo. Zero differences are kept.
    """
    _check_alternative(alternative)
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired arrays differ in length ({a.size} vs {b.size}): pass the matched seeds only")
    d = a - b
    n = d.size
    if n < 1:
        return TestResult("sign-flip test", math.nan, math.nan, note="needs at least 1 pair")
    if n <= max_exact_pairs:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1                # (2^n, n)
        signs, exact, floor = 1.0 - 2.0 * bits, True, smallest_p("signflip", n, alternative=alternative)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_resamples, n))
        exact, floor = False, 1.0 / (n_resamples + 1)
    null = signs @ d / n
    p = _resampling_pvalue(null, float(d.mean()), alternative, exact)
    name = "exact sign-flip test" if exact else "Monte Carlo sign-flip test"
    return TestResult(name, float(d.mean()), p, min_p=floor, exact=exact, n_resamples=int(null.size))


# ----------------------------------------------------------------------------- bootstrap
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


def bootstrap_mean(x, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0) -> Interval:
    """CI of one arm's mean (BCa, percentile fallback)."""
    x = _finite(x, "values")
    if x.size < 2:
        return Interval(float(x.mean()) if x.size else math.nan, math.nan, math.nan, "none (n < 2)",
                        confidence, 0, seed)
    boot = resample_counts(x.size, n_resamples, np.random.default_rng(seed)) @ x / x.size     # (B,)
    low, high, method = bca_interval(boot, float(x.mean()), [x - x.mean()], confidence)
    return Interval(float(x.mean()), low, high, method, confidence, n_resamples, seed)


@dataclass(frozen=True)
class BootstrapDelta:
    delta: Interval          # mean(a) - mean(b), or mean(a - b) when paired
    p_better: Interval       # P(a beats b) = U / (n_a n_b), percentile interval


def bootstrap_delta(a, b, paired: bool = False, lower_is_better: bool = False, confidence: float = 0.95,
                    n_resamples: int = 10_000, seed: int = 0) -> BootstrapDelta:
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
    wins = _better_matrix(a, b, lower_is_better)                                  # (n_a, n_b)
    ca = resample_counts(a.size, n_resamples, rng)                                # (B, n_a)
    cb = ca if paired else resample_counts(b.size, n_resamples, rng)              # (B, n_b)
    boot_delta = ca @ a / a.size - cb @ b / b.size                                # (B,)
    boot_pb = np.einsum("ij,ij->i", ca @ wins, cb) / (a.size * b.size)            # (B,)
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
def t_power(d: float, n: int, alpha: float = 0.05, paired: bool = False) -> float:
    """Power of the two-sided t-test at standardized effect d with n seeds per arm (n pairs when paired).

    Two-sample: df = 2n - 2, noncentrality d sqrt(n/2); paired: df = n - 1, noncentrality d sqrt(n) (d = d_z).
    """
    df = n - 1 if paired else 2 * n - 2
    if df < 1:
        return math.nan
    d = abs(d)
    if math.isinf(d):
        return 1.0
    nc = d * math.sqrt(n if paired else n / 2)
    crit = sps.t.ppf(1 - alpha / 2, df)
    lower = sps.nct.cdf(-crit, df, nc)           # wrong-sign rejections; scipy gives NaN far in the tail,
    lower = min(float(np.nan_to_num(lower)), float(special.ndtr(-nc)))   # where it is below P(T < 0) = Phi(-nc)
    return float(sps.nct.sf(crit, df, nc) + lower)


def seeds_needed(d: float, alpha: float = 0.05, power: float = 0.8, paired: bool = False,
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


def min_detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8, paired: bool = False) -> float:
    """Smallest standardized effect (d, or d_z when paired) the two-sided t-test detects with `power` at n."""
    if (n - 1 if paired else 2 * n - 2) < 1:
        return math.nan
    hi = 1.0
    while t_power(hi, n, alpha, paired) < power:
        hi *= 2
    return float(optimize.brentq(lambda d: t_power(d, n, alpha, paired) - power, 0.0, hi, xtol=1e-10))
