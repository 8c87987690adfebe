"""The deciding test (sweeper.analysis.robust) against independent references: scipy's permutation_test and t-tests,
exact enumerations by hand at tiny n, the facts of statistics.md, the interval-inversion property, zero spread,
and its level under heavy-tailed noise (slow).

    python -m pytest -q -n 0 tests/test_robust.py
"""
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from sweeper.analysis import robust, stats


def _clipped_welch_reference(a, b):
    """scipy.stats.permutation_test over every split, statistic |Welch t| of the values clipped at the pooled
    median +- 1.5 MAD / 0.6745 (computed here, not by robust)."""
    x = np.concatenate([a, b])
    med = np.median(x)
    s = np.median(np.abs(x - med)) / sps.norm.ppf(0.75)
    ca, cb = np.clip(a, med - 1.5 * s, med + 1.5 * s), np.clip(b, med - 1.5 * s, med + 1.5 * s)
    p = sps.permutation_test((ca, cb), lambda u, v: abs(sps.ttest_ind(u, v, equal_var=False).statistic),
                             n_resamples=np.inf, alternative="greater").pvalue
    return p, sps.ttest_ind(ca, cb, equal_var=False).statistic


@pytest.mark.parametrize("seed,na,nb", [(0, 4, 4), pytest.param(1, 5, 5, marks=pytest.mark.slow),
                                         pytest.param(2, 4, 6, marks=pytest.mark.slow)])
def test_independent_test_is_scipys_permutation_test_of_the_clipped_welch_t(seed, na, nb):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(na) + 1.0
    b = rng.standard_normal(nb)
    b[0] = 25.0                                                       # an outlier seed: the clip pulls it in
    r = robust.independent_test(a, b)
    assert r.exact and r.n_resamples == math.comb(na + nb, na)
    p, t = _clipped_welch_reference(a, b)
    assert r.pvalue == pytest.approx(p, rel=1e-12) and r.statistic == pytest.approx(t, rel=1e-12)


def test_monte_carlo_beyond_the_exact_limit_is_reproducible_and_close_to_the_enumeration():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(9) + 0.8, rng.standard_normal(9)
    mc = robust.independent_test(a, b, seed=7)
    assert not mc.exact and mc.n_resamples == 10_000 and mc.min_p == pytest.approx(1 / 10_001)
    assert robust.independent_test(a, b, seed=7).pvalue == mc.pvalue                         # fixed RNG seed
    exact = robust.independent_test(a, b, max_exact=10**6)                                    # all 48,620 splits
    assert exact.exact and abs(mc.pvalue - exact.pvalue) < 4 * math.sqrt(exact.pvalue / 10_000) + 1e-4


def test_smallest_p_values_of_statistics_md():
    assert robust.floor(False, 3, 3) == pytest.approx(0.1)             # 3 vs 3: 2/20
    assert robust.floor(False, 4, 4) == pytest.approx(2 / 70)
    assert robust.floor(True, 5, 5) == pytest.approx(0.0625)           # 5 pairs: 2/32
    a, b = np.array([1.0, 2, 3]), np.array([4.0, 5, 6])                # 3 vs 3 fully separated
    assert robust.independent_test(a, b).pvalue == pytest.approx(0.1)
    assert robust.independent_test(np.array([1.0, 2, 3, 4]), np.array([5.0, 6, 7, 8])).pvalue == pytest.approx(2 / 70)


def _paired_by_hand(d):
    """All 2^n sign flips enumerated with itertools; t by scipy, Huber one-step written out here; min-p."""
    n = d.size
    rows = np.array([np.array(s) * d for s in itertools.product([1.0, -1.0], repeat=n)])
    t = np.abs(sps.ttest_1samp(rows, 0, axis=1).statistic)
    hub = []
    for r in rows:
        med = np.median(r)
        s = np.median(np.abs(r - med)) / sps.norm.ppf(0.75)
        u = (r - med) / s
        psi = np.clip(u, -2.0, 2.0)
        slope = np.mean(np.abs(u) <= 2.0)
        hub.append(abs(med + s * psi.mean() / slope) / (s * math.sqrt(np.sum(psi**2) / (n - 1)) / slope / math.sqrt(n)))
    hub = np.array(hub)
    p_t = np.array([(t >= v * (1 - 1e-9)).mean() for v in t])
    p_h = np.array([(hub >= v * (1 - 1e-9)).mean() for v in hub])
    combined = np.minimum(p_t, p_h)
    return (combined <= combined[0] * (1 + 1e-9)).mean(), p_t[0], p_h[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_test_equals_a_hand_enumeration_and_its_t_part_is_the_sign_flip_test(seed):
    rng = np.random.default_rng(seed)
    d = rng.standard_normal(7) + 0.9
    d[3] = -12.0                                                      # one outlying pair against the effect
    r = robust.paired_test(d, np.zeros_like(d))
    ref, ref_t, ref_h = _paired_by_hand(d)
    assert r.exact and r.n_resamples == 128 and r.pvalue == pytest.approx(ref, rel=1e-12)
    assert ref_t == pytest.approx(stats.sign_flip_test(d, np.zeros_like(d)).pvalue)      # the t part
    assert min(ref_t, ref_h) <= r.pvalue <= 2 * min(ref_t, ref_h)                         # min-p: Bonferroni bound


def test_the_choice_of_test_follows_n_and_the_family_alone():
    rng = np.random.default_rng(5)
    a3, b3 = rng.standard_normal(3) + 2, rng.standard_normal(3)
    r = robust.deciding_test(a3, b3, paired=False)
    assert r.name == "Student t-test" and r.pvalue == pytest.approx(sps.ttest_ind(a3, b3).pvalue)
    b4 = rng.standard_normal(4)
    r = robust.deciding_test(a3, b4, paired=False)                   # 3 vs 4: floor 2/35 > 0.05
    assert r.name == "Welch t-test" and r.pvalue == pytest.approx(sps.ttest_ind(a3, b4, equal_var=False).pvalue)
    a5, b5 = rng.standard_normal(5) + 1, rng.standard_normal(5)
    assert robust.deciding_test(a5, b5, paired=True).name == "paired t-test"             # 2/32 > 0.05
    assert "sign-flip max-type" in robust.deciding_test(np.append(a5, 1.0), np.append(b5, 0.0), paired=True).name
    assert "permutation test of Welch" in robust.deciding_test(a5, b5, paired=False, family_size=3).name  # 2/252
    assert robust.uses_permutation(False, 4, 4, 1) and not robust.uses_permutation(False, 4, 4, 3)     # 2/70


@pytest.mark.parametrize("paired", [False, True])
def test_decision_interval_is_the_test_inverted_and_excludes_zero_exactly_when_it_rejects(paired):
    rng = np.random.default_rng(11 + paired)
    for rep in range(12):
        n = 7
        a = rng.standard_t(2, n) + rng.choice([0.0, 0.6, 1.5])
        b = rng.standard_t(2, n)
        level = float(rng.choice([0.05, 0.025]))
        p0 = robust.deciding_test(a, b, paired).pvalue
        est, low, high = robust.decision_interval(a, b, paired, level)
        assert (low > 0 or high < 0) == (p0 < level), (rep, p0, low, high)
        assert low <= est <= high
        width = high - low
        for end, out in ((low, low - 0.02 * width), (high, high + 0.02 * width)):
            assert robust.deciding_test(a - out, b, paired).pvalue < level                    # just outside: rejected
        assert robust.deciding_test(a - est, b, paired).pvalue >= level


def test_t_interval_where_the_t_test_decides_is_scipys():
    a, b = np.array([2.1, 2.5, 2.2]), np.array([1.0, 1.4, 0.9])
    est, low, high = robust.decision_interval(a, b, False, 0.05)
    ref = sps.ttest_ind(a, b).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ref.low, ref.high)) and est == pytest.approx(a.mean() - b.mean())
    ref = sps.ttest_rel(a, b).confidence_interval(0.99)
    assert robust.decision_interval(a, b, True, 0.01)[1:] == pytest.approx((ref.low, ref.high))


@pytest.mark.parametrize("n", [3, 5, 6, 12, 17])
def test_zero_spread_pairs_get_the_exact_sign_flip_result_never_nan(n):
    b = np.linspace(1.0, 2.0, n)
    r = robust.deciding_test(b - 0.25, b, paired=True)
    assert r.pvalue == pytest.approx(2 / 2**n) and "zero spread" in r.name and r.exact
    assert robust.deciding_test(b, b, paired=True).pvalue == 1.0
    est, low, high = robust.decision_interval(b - 0.25, b, True, 0.05)
    if 2 / 2**n < 0.05:                       # only the observed shift is accepted
        assert est == pytest.approx(-0.25) and high - low < 1e-4 and low <= -0.25 <= high
    else:                                     # the exact test cannot reject any shift at this n
        assert (low, high) == (-math.inf, math.inf)


def test_constant_arms_get_the_exact_permutation_result():
    r = robust.deciding_test(np.full(3, 2.0), np.full(3, 1.0), paired=False)
    assert r.pvalue == pytest.approx(0.1) and "zero spread" in r.name
    r = robust.deciding_test(np.full(5, 2.0), np.full(5, 1.0), paired=False)
    assert r.pvalue == pytest.approx(2 / 252)


def test_spread_of_the_power_figures_ignores_an_outlier_only_when_the_robust_test_decides():
    a = np.array([1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 15.0])
    b = np.array([0.5, 0.6, 0.4, 0.55, 0.45, 0.52, 0.48, 0.5])
    assert robust.spread(a, b, False, permutation=False) == pytest.approx(
        math.sqrt((7 * a.var(ddof=1) + 7 * b.var(ddof=1)) / 14))
    assert robust.spread(a, b, False, permutation=True) < 0.5 < robust.spread(a, b, False, permutation=False)


@pytest.mark.slow
@pytest.mark.parametrize("paired", [False, True])
def test_level_holds_under_cauchy_noise(paired):
    rng = np.random.default_rng(21)
    reps, n = 300, 8
    rejections = sum(robust.deciding_test(rng.standard_cauchy(n), rng.standard_cauchy(n), paired).pvalue < 0.05
                     for _ in range(reps))
    assert rejections / reps <= 0.05 + 2.6 * math.sqrt(0.05 * 0.95 / reps)


@pytest.mark.slow
@pytest.mark.parametrize("paired,n", [(True, 14), (False, 10)])
def test_monte_carlo_interval_excludes_zero_exactly_when_the_decision_rejects(paired, n):
    rng = np.random.default_rng(31 + n)
    for _ in range(4):
        a, b = rng.standard_t(3, n) + rng.choice([0.0, 0.9, 2.0]), rng.standard_t(3, n)
        r = robust.deciding_test(a, b, paired)
        assert r.exact is False                                           # beyond the exact limits
        est, low, high = robust.decision_interval(a, b, paired, 0.05)
        assert (low > 0 or high < 0) == (r.pvalue < 0.05) and low <= est <= high


def _old_random_membership(n, na, n_resamples, seed):
    """The splits as the decision drew them before the block evaluation: one (B + 1, n) float matrix."""
    rng = np.random.default_rng(seed)
    order = rng.permuted(np.broadcast_to(np.arange(n), (n_resamples, n)), axis=1)[:, :na]
    member = np.zeros((n_resamples + 1, n))
    member[0, :na] = 1.0
    np.put_along_axis(member[1:], order, 1.0, axis=1)
    return member


@pytest.mark.parametrize("n,na", [(301, 150), (40, 17)])
def test_block_sums_are_the_bits_of_the_whole_matrix_product(n, na):
    """random_splits.sums draws the same splits as one (B + 1, n) matrix and gives the same bits as its product,
    whether the short interval request (1,001 rows) comes before or after the decision's 10,001 (a fresh seed per
    order so neither finds the other's draws cached)."""
    from sweeper.analysis import random_splits
    x = np.random.default_rng(n).normal(1.0, 0.1, n)
    for seed, order in ((101 + n, (1001, 3001)), (202 + n, (3001, 1001))):
        for rows in order:
            ref = _old_random_membership(n, na, rows - 1, seed)
            sa, qa = random_splits.sums(x, na, rows, seed)
            assert sa.shape == (rows,)
            assert np.array_equal(sa, ref @ x) and np.array_equal(qa, ref @ (x * x))
        assert np.array_equal(random_splits.matrix(n, na, 2049, seed), _old_random_membership(n, na, 2048, seed))
