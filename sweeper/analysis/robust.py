"""The deciding test of a comparison: robust permutation tests that keep their level for any noise shape, the t-test
where no permutation test can reach the level, and the decision interval by inverting whichever decides.

    from sweeper.analysis import robust
    robust.deciding_test(a, b, paired=False, family_size=3, alpha=0.05)   # TestResult; which test is by n alone
    robust.independent_test(a, b).pvalue      # permutation test of Welch's t on Huber-clipped values
    robust.paired_test(a, b).pvalue           # sign-flip test of max(|t|, |Huber t|), min-p over the same flips
    robust.decision_interval(a, b, paired, confidence=0.95)   # {shift d : the test at a - d vs b accepts}

Why these (benchmarks/power_sim.py, docs/decisions.md): under normal noise they lose a few points of power
against the t-test. Part of it is the price of exactness itself: at alpha / 3 with 5 vs 5 or 10 pairs even the
most powerful exact test (the permutation of means, the sign-flip of the mean) trails the t-test by 2-3 points
(benchmarks/exact_limit.py); the paired max-type adds up to ~3 more there. With heavy tails or outlier seeds they
match the best of Yuen / Mann-Whitney / Wilcoxon / Tukey-McLaughlin. Both are exact permutation tests
(exchangeable arms, or differences symmetric about 0 when paired), so their level holds whatever the noise law:
- independent: every value is clipped to [M - K s, M + K s], M and s the median and MAD (scaled to the sd) of the
  POOLED values of both arms, K = INDEPENDENT_K. The clip is the same for every relabelling of the pooled values
  (it reads only the pooled sample), so the permutation test of Welch's t of the clipped values is exact; one
  outlier seed is pulled in to K sd instead of dragging the mean of its arm.
- paired: two statistics of the differences d, Student's t and a one-step Huber M-estimate of location divided
  by its standard error (median start, MAD scale, K = PAIRED_K), each a function of the signed differences;
  their sign-flip p-values are combined by the minimum, and the minimum is calibrated on the same sign flips
  (a max-type test chosen before the data: it keeps the level and takes most of the power of the better one).
- Exact enumeration of all C(n_a + n_b, n_a) splits up to MAX_EXACT_SPLITS, of all 2^n sign flips up to
  MAX_EXACT_PAIRS; beyond, Monte Carlo with a fixed RNG seed, p = (hits + 1) / (n_resamples + 1).
- When the exact floor of the permutation test (2 / C(n_a + n_b, n_a), 2 / 2^n) is above alpha / family_size
  (Holm's first step), no permutation test can decide; the t-test does: Student's t with equal arms (at 3 vs 3
  it has 8 points more power than Welch's), Welch's t with unequal arms, the paired t-test when paired.
- Zero spread (every paired difference equal, or every value of both arms equal): the exact sign-flip or
  permutation result, p = 2 / 2^n (or 2 / C(n, n_a)) when the difference is not 0, else 1.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from scipy import special

from sweeper.analysis import random_splits
from sweeper.analysis.stats import (
    TestResult,
    _finite,
    _paired_differences,
    _t_pvalue,
    comb,
    countable,
    paired_t_test,
    smallest_p,
    welch_test,
)
from sweeper.config.decision import DecisionOptions

DEFAULT = DecisionOptions   # the decision rule's defaults (resamples, seed, confidence, alpha), stated there once

INDEPENDENT_K = 1.5        # clip at the pooled median +- this many robust sd
PAIRED_K = 2.0             # Huber's tuning constant of the paired one-step M-estimate
MAX_EXACT_SPLITS = 20_000   # 8 vs 8 seeds (12,870 splits) is enumerated; from 9 vs 9 (48,620), Monte Carlo
MAX_EXACT_PAIRS = 12        # 2^12 = 4,096 sign flips; from 13 pairs, Monte Carlo
INTERVAL_RESAMPLES = 1_000  # Monte Carlo arrangements per point of the interval's search (the decision: all)
_MAD = 0.6744897501960817   # MAD of the standard normal: MAD / _MAD estimates the sd
_TOL = 1e-9                 # relative tolerance of "as extreme as observed" (rounding in the statistics)

INDEPENDENT_NAME = "permutation test of Welch's t on Huber-clipped values"
PAIRED_NAME = "sign-flip max-type test (t and Huber t)"


def floor(paired: bool, n_a: int, n_b: int) -> float:
    """Smallest two-sided p the exact permutation (sign-flip) test can return at this n."""
    return smallest_p("signflip", n_a) if paired else min(1.0, 2 / comb(n_a + n_b, n_a))   # int / int: no overflow


def spread(a, b, paired: bool, permutation: bool) -> float:
    """The sd behind the power figures, on the deciding test's scale: the sd of the paired differences (pooled sd
    of the arms when independent), of the values clipped as the robust test clips them when it decides (an
    outlier seed then does not inflate the seeds-needed figure), of the raw values when the t-test decides."""
    a, b = _finite(a, "a"), _finite(b, "b")
    if paired:
        d = a - b
        if d.size < 2:
            return math.nan
        if permutation:
            med = float(np.median(d))
            s = _robust_scale(d, med)
            d = np.clip(d, med - PAIRED_K * s, med + PAIRED_K * s) if s > 0 else d
        return float(d.std(ddof=1))
    if a.size + b.size - 2 < 1 or min(a.size, b.size) < 1:
        return math.nan
    if permutation:
        a, b = clip_pooled(a, b)
    ss = (a.size - 1) * (a.var(ddof=1) if a.size > 1 else 0.0) + (b.size - 1) * (b.var(ddof=1) if b.size > 1 else 0.0)
    return float(math.sqrt(ss / (a.size + b.size - 2)))


def uses_permutation(paired: bool, n_a: int, n_b: int, family_size: int = 1, alpha: float = DEFAULT.alpha) -> bool:
    """True when the robust permutation test decides: its exact floor reaches Holm's strictest level alpha / m."""
    return min(n_a, n_b) >= 2 and floor(paired, n_a, n_b) <= alpha / max(1, family_size)


def student_test(a, b, confidence: float = DEFAULT.confidence) -> TestResult:
    """Student's pooled-variance t-test (scipy.stats.ttest_ind(a, b), equal_var=True), with its mean-difference CI."""
    a, b = _finite(a, "a"), _finite(b, "b")
    if a.size < 2 or b.size < 2:
        return TestResult("Student t-test", math.nan, math.nan, note="needs at least 2 seeds per arm")
    df = a.size + b.size - 2
    pooled = ((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / df
    se = math.sqrt(pooled * (1 / a.size + 1 / b.size))
    if se <= 1e-12 * max(np.abs(a).max(), np.abs(b).max()):
        return TestResult("Student t-test", math.nan, math.nan, note="undefined: zero variance in both arms")
    diff = a.mean() - b.mean()
    t = diff / se
    half = special.stdtrit(df, 0.5 + confidence / 2) * se
    return TestResult("Student t-test", float(t), _t_pvalue(t, df, "two-sided"), float(df),
                      (float(diff - half), float(diff + half)))


def t_test(a, b, paired: bool, confidence: float = DEFAULT.confidence) -> TestResult:
    """The small-n deciding test: paired t, else Student's t with equal arms, Welch's t with unequal arms."""
    if paired:
        return paired_t_test(a, b, confidence=confidence)
    return (student_test if np.size(a) == np.size(b) else welch_test)(a, b, confidence=confidence)


# ----------------------------------------------------------------------------- independent arms
@functools.lru_cache(maxsize=4)
def _membership(n: int, na: int) -> np.ndarray:
    """Every split of n pooled values into arm a (True) and b, the identity split first.   # (C(n, na), n)"""
    total = math.comb(n, na)
    first = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), na)), dtype=np.int64,
                        count=total * na).reshape(total, na)
    member = np.zeros((total, n))
    np.put_along_axis(member, first, 1.0, axis=1)
    member.setflags(write=False)
    return member                          # 0/1 floats (a matrix product per statistic); row 0: the observed split


def _robust_scale(x: np.ndarray, center: float) -> float:
    """MAD / 0.6745 about `center`; the sd when more than half the values tie (MAD 0); 0 when all are equal."""
    s = float(np.median(np.abs(x - center))) / _MAD
    return s if s > 0 else (float(x.std(ddof=1)) if x.size > 1 else 0.0)


def clip_pooled(a: np.ndarray, b: np.ndarray, k: float = INDEPENDENT_K) -> tuple[np.ndarray, np.ndarray]:
    """Both arms clipped to the pooled median +- k robust sd (the same bounds under any relabelling)."""
    x = np.concatenate([a, b])
    m = float(np.median(x))
    s = _robust_scale(x, m)
    if s == 0:
        return a.copy(), b.copy()
    return np.clip(a, m - k * s, m + k * s), np.clip(b, m - k * s, m + k * s)


def _welch_of_sums(sa, qa, total, total_sq, na, nb) -> np.ndarray:
    """Welch's t of arm a (sum sa, sum of squares qa) vs the rest, for arrays of splits; +-inf when both arms are
    constant and differ, 0 when they are constant and equal."""
    ma, mb = sa / na, (total - sa) / nb
    va = np.maximum(qa - na * ma * ma, 0.0) / (na - 1)
    vb = np.maximum((total_sq - qa) - nb * mb * mb, 0.0) / (nb - 1)
    se = np.sqrt(va / na + vb / nb)
    scale = np.sqrt(total_sq / (na + nb))                   # rms of the pooled values: the rounding scale
    diff = ma - mb
    diff = np.where(np.abs(diff) <= 1e-12 * scale, 0.0, diff)   # equal means up to rounding: t = 0 exactly
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / se
    flat = se <= 1e-12 * scale
    return np.where(flat, np.where(np.abs(diff) <= 1e-12 * scale, 0.0, np.copysign(np.inf, diff)), t)


def independent_test(a, b, n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed,
                     max_exact: int = MAX_EXACT_SPLITS) -> TestResult:
    """Two-sided permutation test of Welch's t on the Huber-clipped values (see the module docstring).
    statistic: Welch's t of the clipped values (observed split)."""
    a, b = _finite(a, "a"), _finite(b, "b")
    na, nb = a.size, b.size
    if na < 2 or nb < 2:
        return TestResult(INDEPENDENT_NAME, math.nan, math.nan, note="needs at least 2 seeds per arm")
    ca, cb = clip_pooled(a, b)
    x = np.concatenate([ca, cb])
    total, total_sq = float(x.sum()), float((x * x).sum())
    exact = comb(na + nb, na) <= max_exact
    if exact:
        member = _membership(na + nb, na)
        sa, qa = member @ x, member @ (x * x)
    else:                          # the same fixed-seed draws as splits(), summed a block of rows at a time
        sa, qa = random_splits.sums(x, na, n_resamples + 1, seed)
    floor = 2.0 / sa.shape[0] if exact else 1.0 / sa.shape[0]
    t = np.abs(_welch_of_sums(sa, qa, total, total_sq, na, nb))
    observed = t[0]
    hits = np.count_nonzero(t >= observed * (1 - _TOL)) if np.isfinite(observed) else np.count_nonzero(t == np.inf)
    p = hits / t.size            # Monte Carlo: the observed split is one of the B + 1, so (hits + 1) / (B + 1)
    signed = float(_welch_of_sums(sa[:1], qa[:1], total, total_sq, na, nb)[0])
    name = ("exact " if exact else "Monte Carlo ") + INDEPENDENT_NAME
    return TestResult(name, signed, float(min(1.0, p)), min_p=floor, exact=exact,
                      n_resamples=int(t.size if exact else n_resamples),
                      note=f"values clipped to the pooled median +- {INDEPENDENT_K} robust sd")


def splits(n: int, na: int, n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed,
           max_exact: int = MAX_EXACT_SPLITS) -> tuple[np.ndarray, bool]:
    """(membership, exact): every split of n pooled values into arm a (1.0) and b when there are at most
    max_exact, else the observed split and n_resamples random ones (fixed seed); row 0 is the observed split."""
    if comb(n, na) <= max_exact:
        return _membership(n, na), True
    return random_splits.matrix(n, na, n_resamples + 1, seed), False


# ----------------------------------------------------------------------------- paired arms
@functools.lru_cache(maxsize=4)
def _signs(n: int) -> np.ndarray:
    """Every sign pattern of n differences, all + first.   # (2^n, n)"""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    out = 1.0 - 2.0 * bits
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=4)
def _random_signs(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """The all-+ pattern and n_resamples random sign patterns (fixed seed).   # (B + 1, n)"""
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_resamples + 1, n))
    signs[0] = 1.0
    signs.setflags(write=False)
    return signs


def _paired_stats(ds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|t| and |one-step Huber t| of each row of signed differences.   ds: (B, n) -> (B,), (B,)"""
    n = ds.shape[1]
    scale = np.abs(ds).max(1) + 1e-300
    mean = ds.mean(1)
    mean = np.where(np.abs(mean) <= 1e-12 * scale, 0.0, mean)    # a zero mean up to rounding: t = 0 exactly
    sd = ds.std(1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd <= 1e-12 * scale, np.where(np.abs(mean) <= 1e-12 * scale, 0.0, np.inf),
                     np.abs(mean) / (sd / math.sqrt(n)))
        med = np.median(ds, 1)
        s = np.median(np.abs(ds - med[:, None]), 1) / _MAD
        s = np.where(s > 1e-12 * scale, s, sd)                       # MAD 0 (ties): the sd
        u = (ds - med[:, None]) / s[:, None]
        psi = np.clip(u, -PAIRED_K, PAIRED_K)
        slope = (np.abs(u) <= PAIRED_K).mean(1)
        slope = np.where(slope > 0, slope, 1.0)
        mu = med + s * psi.mean(1) / slope
        mu = np.where(np.abs(mu) <= 1e-12 * scale, 0.0, mu)
        se = s * np.sqrt((psi * psi).sum(1) / (n - 1)) / slope / math.sqrt(n)
        h = np.where(se > 1e-12 * scale, np.abs(mu) / se, t)
    return t, np.nan_to_num(h, nan=0.0)


def _pvalues_within(stat: np.ndarray) -> np.ndarray:
    """For every row r: the share of rows whose statistic is at least stat[r] (its permutation p-value)."""
    srt = np.sort(stat)
    return (stat.size - np.searchsorted(srt, stat * (1 - _TOL), side="left")) / stat.size


def paired_test(a, b, n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed,
                max_exact_pairs: int = MAX_EXACT_PAIRS) -> TestResult:
    """Two-sided sign-flip test of the differences d = a - b, statistic min(p_t, p_Huber) calibrated on the same
    flips (see the module docstring). statistic: mean(d). Zero spread: the exact sign-flip result."""
    d = _paired_differences(a, b)
    n = d.size
    if n < 2:
        return TestResult(PAIRED_NAME, math.nan, math.nan, note="needs at least 2 pairs")
    exact = n <= max_exact_pairs
    floor = smallest_p("signflip", n) if exact else 1.0 / (n_resamples + 1)
    scale = float(np.abs(d).max())
    if np.ptp(d) <= 1e-12 * scale or scale == 0:             # zero spread: all 2^n flips are enumerable by hand
        p = 1.0 if scale == 0 else smallest_p("signflip", n)
        return TestResult("exact sign-flip test (zero spread)", float(d.mean()), float(p), min_p=floor, exact=True,
                          n_resamples=countable(2**n), note="every paired difference is the same")
    signs = _signs(n) if exact else _random_signs(n, n_resamples, seed)
    t, h = _paired_stats(signs * d)
    combined = np.minimum(_pvalues_within(t), _pvalues_within(h))
    hits = np.count_nonzero(combined <= combined[0] * (1 + _TOL))
    name = ("exact " if exact else "Monte Carlo ") + PAIRED_NAME
    return TestResult(name, float(d.mean()), float(min(1.0, hits / combined.size)), min_p=floor, exact=exact,
                      n_resamples=int(combined.size if exact else n_resamples),
                      note=f"t and one-step Huber t (k = {PAIRED_K}), min-p over the same sign flips")


# ----------------------------------------------------------------------------- the deciding test and its interval
def deciding_test(a, b, paired: bool, family_size: int = 1, alpha: float = DEFAULT.alpha,
                  n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed,
                  confidence: float = DEFAULT.confidence) -> TestResult:
    """The test that decides a comparison without lost seeds: the robust permutation test when its floor reaches
    alpha / family_size, else the t-test (t_test); zero spread always gets the exact sign-flip/permutation result."""
    a, b = _finite(a, "a"), _finite(b, "b")
    if not paired and min(a.size, b.size) >= 2 and np.ptp(a) == 0 and np.ptp(b) == 0:   # zero spread: exact
        diff = float(a.mean() - b.mean())
        least = floor(False, a.size, b.size)
        p = 1.0 if diff == 0 else least
        return TestResult("exact permutation test (zero spread)", diff, p, min_p=least,
                          exact=True, n_resamples=countable(comb(a.size + b.size, a.size)),
                          note="every seed of each arm has the same value")
    if uses_permutation(paired, a.size, b.size, family_size, alpha):
        return (paired_test if paired else independent_test)(a, b, n_resamples=n_resamples, seed=seed)
    test = t_test(a, b, paired, confidence)
    if math.isnan(test.pvalue) and paired and a.size >= 2:            # zero spread: the exact sign-flip result
        return paired_test(a, b)
    return test


def _pvalue_at(a, b, paired, family_size, alpha, n_resamples, seed, shift: float) -> float:
    return deciding_test(a - shift, b, paired, family_size, alpha, n_resamples, seed).pvalue


def decision_interval(a, b, paired: bool, level: float, family_size: int = 1, alpha: float = DEFAULT.alpha,
                      n_resamples: int = DEFAULT.n_resamples, seed: int = DEFAULT.seed) -> tuple[float, float, float]:
    """(estimate, low, high): the shifts d for which the deciding test of (a - d, b) has p >= level, as an
    interval. It excludes 0 exactly when the test at d = 0 (the decision, with all n_resamples) has p < level:
    the endpoint on 0's side is searched between 0 and the estimate when 0 is rejected, beyond 0 when it is not.
    Beyond exact enumeration the search uses INTERVAL_RESAMPLES of the same fixed-seed arrangements per point.
    The estimate is the shift with the largest p among the mean difference and the median of pairwise (paired:
    the median) differences."""
    a, b = _finite(a, "a"), _finite(b, "b")
    if not uses_permutation(paired, a.size, b.size, family_size, alpha):
        test = t_test(a, b, paired, 1 - level)
        if not math.isnan(test.pvalue):                      # the t interval in closed form
            est = float(np.mean(a - b)) if paired else float(a.mean() - b.mean())
            return est, test.ci[0], test.ci[1]

    def p(shift):       # the endpoints' search: at most INTERVAL_RESAMPLES Monte Carlo arrangements (exact: all)
        return _pvalue_at(a, b, paired, family_size, alpha, min(n_resamples, INTERVAL_RESAMPLES), seed, shift)
    if paired:
        d = a - b
        candidates = (float(d.mean()), float(np.median(d)))
        spread = float(np.ptp(d))
    else:
        candidates = (float(a.mean() - b.mean()), float(np.median(a[:, None] - b[None, :])))
        spread = float(np.ptp(np.concatenate([a, b])))
    p0 = _pvalue_at(a, b, paired, family_size, alpha, n_resamples, seed, 0.0)     # the decision's own p
    pc = [p(c) for c in candidates]
    est = candidates[int(np.argmax(pc))]
    if max(pc) < level and p0 >= level:      # 0 is accepted where the estimates are not: the search starts at 0
        est = 0.0
    elif max(pc) < level:                    # no shift accepted at this level near the estimates: a point
        return est, est, est
    spread = spread if spread > 0 else max(abs(est), 1.0)
    tol = 1e-4 * spread

    def crossing(inside: float, outside: float) -> float:
        """Bisect between an accepted and a rejected shift (the boundary of the accepted set)."""
        while abs(outside - inside) > tol:
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if p(mid) >= level else (inside, mid)
        return (inside + outside) / 2

    def far(direction: int, start: float) -> float:
        step = spread
        out = start + direction * step
        while p(out) >= level:
            step *= 2
            out = start + direction * step
            if step > 1e6 * spread:
                return direction * math.inf
        return out

    ends = []
    for direction in (-1, 1):
        zero_side = (0.0 - est) * direction > 0
        if zero_side and p0 < level:
            ends.append(crossing(est, 0.0))
        elif zero_side:
            out = far(direction, 0.0)
            ends.append(out if math.isinf(out) else crossing(0.0, out))
        else:
            out = far(direction, est)
            ends.append(out if math.isinf(out) else crossing(est, out))
    return est, float(ends[0]), float(ends[1])

