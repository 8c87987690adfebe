"""sweeper.analysis.stats against independent references: scipy's own functions on random data, exact small-sample
facts (shared/notes/statistics.md), hand-computed examples and rliable's unit values.

    python -m pytest -q tests/test_stats.py
"""
import math

import numpy as np
import pytest
from scipy import stats as sps

from sweeper.analysis import stats

RNG_SEEDS = [0, 1, 2, 3]


def _data(seed, na=6, nb=5, shift=0.7):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, na), rng.normal(shift, 1.5, nb)


def _abs_mean_diff(x, y, axis=-1):
    return np.abs(x.mean(axis=axis) - y.mean(axis=axis))


# ----------------------------------------------------------------------------- t-tests
@pytest.mark.parametrize("seed", RNG_SEEDS)
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_welch_matches_scipy_ttest_ind_unequal_var(seed, alternative):
    a, b = _data(seed)
    ours = stats.welch_test(a, b, alternative=alternative)
    ref = sps.ttest_ind(a, b, equal_var=False, alternative=alternative)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.df == pytest.approx(ref.df, rel=1e-12)
    if alternative == "two-sided":
        assert ours.ci == pytest.approx(tuple(ref.confidence_interval(0.95)), rel=1e-10)


def test_welch_is_not_students_t():
    a, b = np.array([1.0, 1.1, 0.9, 1.05]), np.array([2.0, 5.0, -1.0, 3.0, 4.5, 0.2])
    student = sps.ttest_ind(a, b).pvalue
    assert stats.welch_test(a, b).pvalue != pytest.approx(student, rel=1e-3)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_paired_t_matches_scipy_ttest_rel(seed):
    rng = np.random.default_rng(seed)
    b = rng.normal(3, 1, 7)
    a = b + rng.normal(0.2, 0.3, 7)
    ours, ref = stats.paired_t_test(a, b), sps.ttest_rel(a, b)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.ci == pytest.approx(tuple(ref.confidence_interval(0.95)), rel=1e-10)


def test_degenerate_t_tests_give_nan_with_a_reason():
    same = stats.welch_test([2.0, 2.0, 2.0], [3.0, 3.0, 3.0])
    assert math.isnan(same.pvalue) and "zero variance" in same.note
    one = stats.welch_test([1.0], [1.0, 2.0, 3.0])
    assert math.isnan(one.pvalue) and "at least 2" in one.note
    shifted = stats.paired_t_test([2.0, 3.0, 4.0], [1.0, 2.0, 3.0])
    assert math.isnan(shifted.pvalue) and "same" in shifted.note
    rounding = stats.paired_t_test([1.1, 2.2, 3.3], [1.0, 2.1, 3.2])       # differences 0.1 up to float rounding
    assert np.std(np.subtract([1.1, 2.2, 3.3], [1.0, 2.1, 3.2])) > 0 and math.isnan(rounding.pvalue)
    # zero variance in one arm only is a valid Welch test
    assert 0 < stats.welch_test([2.0, 2.0, 2.0], [3.0, 3.5, 2.9]).pvalue < 1


def test_identical_arms():
    a = np.array([3.1, 3.3, 3.2, 3.5])
    assert stats.welch_test(a, a.copy()).pvalue == pytest.approx(1.0)
    assert stats.prob_better(a, a.copy()) == 0.5
    assert stats.permutation_test(a, a.copy()).pvalue == 1.0
    assert stats.sign_flip_test(a, a.copy()).pvalue == 1.0


def test_nan_input_is_refused_not_silently_dropped():
    with pytest.raises(ValueError, match="diverged"):
        stats.welch_test([1.0, np.nan, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="alternative"):
        stats.welch_test([1.0, 2.0], [1.0, 2.0], alternative="bigger")


# ----------------------------------------------------------------------------- permutation tests
@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_exact_permutation_matches_scipy(seed):
    a, b = _data(seed, 5, 6)
    ours = stats.permutation_test(a, b)
    ref = sps.permutation_test((a, b), _abs_mean_diff, alternative="greater", n_resamples=np.inf, vectorized=True)
    assert ours.exact and ours.n_resamples == math.comb(11, 5)
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
    for alt in ("greater", "less"):
        one = sps.permutation_test((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), alternative=alt,
                                   n_resamples=np.inf, vectorized=True)
        assert stats.permutation_test(a, b, alternative=alt).pvalue == pytest.approx(one.pvalue, abs=1e-12)


@pytest.mark.slow
def test_monte_carlo_permutation_within_tolerance_of_exact():
    a, b = _data(7, 10, 10, shift=0.9)
    exact = sps.permutation_test((a, b), _abs_mean_diff, alternative="greater", n_resamples=np.inf,
                                 vectorized=True).pvalue
    mc = stats.permutation_test(a, b, n_resamples=20_000, seed=3, max_exact=1000)
    assert not mc.exact and mc.min_p == pytest.approx(1 / 20_001)
    assert abs(mc.pvalue - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4
    again = stats.permutation_test(a, b, n_resamples=20_000, seed=3, max_exact=1000)
    assert again.pvalue == mc.pvalue          # explicit seed: reproducible


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_exact_sign_flip_matches_scipy_paired_permutation(seed):
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 1, 8)
    a = b + rng.normal(0.3, 0.5, 8)
    ref = sps.permutation_test((a, b), lambda x, y, axis=-1: np.abs((x - y).mean(axis)), permutation_type="samples",
                               alternative="greater", n_resamples=np.inf, vectorized=True)
    ours = stats.sign_flip_test(a, b)
    assert ours.exact and ours.n_resamples == 2**8
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
    mc = stats.sign_flip_test(a, b, n_resamples=20_000, seed=1, max_exact_pairs=4)
    assert abs(mc.pvalue - ref.pvalue) < 4 * math.sqrt(ref.pvalue * (1 - ref.pvalue) / 20_000) + 1e-4


def test_small_sample_floors_from_the_notes():
    assert stats.smallest_p("mannwhitney", 3, 3) == pytest.approx(0.1)
    assert stats.smallest_p("mannwhitney", 4, 4) == pytest.approx(2 / 70)
    assert stats.smallest_p("signflip", 3, alternative="greater") == pytest.approx(1 / 8)
    assert stats.smallest_p("wilcoxon", 5) == pytest.approx(0.0625)
    # scipy's exact tests reach exactly those floors on fully separated / all-positive data
    assert sps.mannwhitneyu([1, 2, 3], [4, 5, 6], method="exact").pvalue == pytest.approx(0.1)
    assert sps.mannwhitneyu([1, 2, 3, 4], [5, 6, 7, 8], method="exact").pvalue == pytest.approx(2 / 70)
    assert sps.wilcoxon([1.0, 2, 3, 4, 5], method="exact").pvalue == pytest.approx(0.0625)


def test_fully_separated_three_vs_three_reaches_only_the_floor():
    result = stats.permutation_test([1.0, 2.0, 3.0], [10.0, 11.0, 12.5])
    assert result.pvalue == pytest.approx(0.1) and result.min_p == pytest.approx(0.1)
    one_sided = stats.sign_flip_test([2.0, 3.0, 4.5], [1.0, 1.0, 1.0], alternative="greater")
    assert one_sided.pvalue == pytest.approx(1 / 8) == one_sided.min_p
    four = stats.permutation_test([1.0, 2.0, 3.0, 4.0], [10.0, 11.0, 12.0, 13.0])
    assert four.pvalue == pytest.approx(2 / 70) == four.min_p


# ----------------------------------------------------------------------------- effect sizes
def test_prob_better_is_mann_whitney_u_over_pairs_with_ties():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 5, 9).astype(float), rng.integers(0, 5, 7).astype(float)
    u = sps.mannwhitneyu(a, b).statistic
    assert stats.prob_better(a, b) == pytest.approx(u / (9 * 7))
    u_lower = sps.mannwhitneyu(-a, -b).statistic
    assert stats.prob_better(a, b, lower_is_better=True) == pytest.approx(u_lower / (9 * 7))
    assert stats.prob_better(a, b) + stats.prob_better(b, a) == pytest.approx(1.0)


def test_rliable_unit_values():
    x = np.array([[1, 2], [2, 2], [1, 1], [2, 1]], dtype=float)
    y = np.array([[1, 1], [2, 2], [3, 3]], dtype=float)
    assert stats.iqm(x) == 1.5 and float(np.median(x.mean(axis=0))) == 1.5 and x.mean() == 1.5
    assert stats.iqm(y) == 2
    assert stats.prob_better(x, y) == pytest.approx(1 / 3)


def test_hedges_g_hand_computed():
    a, b = np.arange(1.0, 6.0), np.arange(3.0, 8.0)       # difference -2, pooled sd sqrt(2.5), df 8
    j_exact = math.gamma(4) / (math.sqrt(4) * math.gamma(3.5))
    assert stats.hedges_g(a, b) == pytest.approx(-2 / math.sqrt(2.5) * j_exact, rel=1e-12)
    assert stats.hedges_g(a, b) == pytest.approx(-2 / math.sqrt(2.5) * (1 - 3 / (4 * 10 - 9)), rel=1e-3)
    assert math.isnan(stats.hedges_g([1.0, 1.0], [1.0, 1.0]))
    assert stats.hedges_g([2.0, 2.0], [1.0, 1.0]) == math.inf


def test_describe_and_iqm():
    d = stats.describe([4.0, 1.0, 3.0, 2.0, 100.0])
    assert d["n"] == 5 and d["median"] == 3.0 and d["mean"] == 22.0
    assert d["sd"] == pytest.approx(np.std([4, 1, 3, 2, 100], ddof=1))
    assert d["iqm"] == pytest.approx(sps.trim_mean([4, 1, 3, 2, 100], 0.25))
    assert math.isnan(stats.describe([5.0])["sd"])


# ----------------------------------------------------------------------------- bootstrap
def _close_ci(ours, ref, width_frac=0.08):
    width = ref.high - ref.low
    assert abs(ours.low - ref.low) < width_frac * width and abs(ours.high - ref.high) < width_frac * width


@pytest.mark.parametrize("seed", RNG_SEEDS[:3])
def test_bca_difference_matches_scipy_bootstrap(seed):
    a, b = _data(seed, 8, 7)
    ours = stats.bootstrap_delta(a, b, n_resamples=20_000, seed=seed + 10).delta
    ref = sps.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), method="BCa",
                        n_resamples=20_000, rng=seed + 100, vectorized=True).confidence_interval
    assert ours.method == "BCa" and ours.estimate == pytest.approx(a.mean() - b.mean())
    _close_ci(ours, ref)


def test_bca_paired_difference_and_single_mean_match_scipy():
    rng = np.random.default_rng(11)
    b = rng.normal(0, 1, 9)
    a = b + rng.exponential(0.5, 9)
    ours = stats.bootstrap_delta(a, b, paired=True, n_resamples=20_000, seed=1).delta
    ref = sps.bootstrap((a, b), lambda x, y, axis=-1: (x - y).mean(axis), paired=True, method="BCa",
                        n_resamples=20_000, rng=2, vectorized=True).confidence_interval
    _close_ci(ours, ref)
    mean_ci = stats.bootstrap_mean(a, n_resamples=20_000, seed=3)
    ref_mean = sps.bootstrap((a,), np.mean, method="BCa", n_resamples=20_000, rng=4).confidence_interval
    _close_ci(mean_ci, ref_mean)


def test_prob_better_interval_matches_scipy_percentile_bootstrap():
    a, b = _data(2, 8, 8, shift=-0.8)

    def p_better(x, y, axis=-1):                        # (..., n) -> (...)
        return ((x[..., :, None] > y[..., None, :]) + 0.5 * (x[..., :, None] == y[..., None, :])).mean(axis=(-1, -2))

    ours = stats.bootstrap_delta(a, b, n_resamples=20_000, seed=5).p_better
    ref = sps.bootstrap((a, b), p_better, method="percentile", n_resamples=20_000, rng=6,
                        vectorized=True).confidence_interval
    assert ours.estimate == pytest.approx(stats.prob_better(a, b))
    _close_ci(ours, ref, 0.1)


def test_bootstrap_is_reproducible_and_degenerate_data_falls_back_to_percentile():
    a, b = _data(3)
    assert stats.bootstrap_delta(a, b, seed=9) == stats.bootstrap_delta(a, b, seed=9)
    flat = stats.bootstrap_delta([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert flat.delta.method.startswith("percentile") and flat.delta.low == flat.delta.high == 1.0
    with np.errstate(all="raise"):
        assert stats.bootstrap_mean([5.0, 5.0, 5.0]).method.startswith("percentile")
    single = stats.bootstrap_delta([1.0], [2.0, 3.0])
    assert math.isnan(single.delta.low) and single.delta.estimate == -1.5


# ----------------------------------------------------------------------------- Holm
def test_holm_hand_computed():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.01, 0.02]) == pytest.approx([0.02, 0.02])
    assert stats.holm([0.0286, 0.0286]) == pytest.approx([0.0572, 0.0572])    # 4 vs 4 floor, two comparisons
    assert stats.holm([0.3, 0.6, 0.9]) == pytest.approx([0.9, 1.0, 1.0])
    assert stats.holm([0.04]) == pytest.approx([0.04])
    with pytest.raises(ValueError, match="untested"):
        stats.holm([0.1, float("nan")])


# ----------------------------------------------------------------------------- power
@pytest.mark.parametrize("d, n", [(0.5, 64), (0.8, 26), (1.0, 17)])
def test_seeds_needed_for_80_percent_power(d, n):
    assert stats.seeds_needed(d) == n
    assert stats.t_power(d, n) >= 0.8 > stats.t_power(d, n - 1)


def test_power_edge_cases_and_consistency():
    assert stats.seeds_needed(8.0) == 2              # statsmodels' solve_power returns NaN here
    assert stats.seeds_needed(0.0) is None and stats.seeds_needed(math.inf) == 2
    assert stats.seeds_needed(0.5, paired=True) == 34  # G*Power: matched pairs, dz = 0.5
    for n, paired in [(4, False), (10, False), (4, True), (12, True)]:
        mde = stats.min_detectable_effect(n, paired=paired)
        assert stats.t_power(mde, n, paired=paired) == pytest.approx(0.8, abs=1e-8)
        assert stats.seeds_needed(mde * 1.0001, paired=paired) == n
    assert math.isnan(stats.min_detectable_effect(1, paired=True))


# ----------------------------------------------------------------------------- issue 12 item 3: exact p as scipy's
def _scipy_perm(a, b, alternative, paired=False):
    if paired:
        stat = (lambda x, y, axis=-1: np.abs((x - y).mean(axis))) if alternative == "two-sided" else \
            (lambda x, y, axis=-1: (x - y).mean(axis))
        return sps.permutation_test((a, b), stat, permutation_type="samples", n_resamples=np.inf, vectorized=True,
                                    alternative="greater" if alternative == "two-sided" else alternative).pvalue
    stat = _abs_mean_diff if alternative == "two-sided" else (lambda x, y, axis=-1: x.mean(axis) - y.mean(axis))
    return sps.permutation_test((a, b), stat, n_resamples=np.inf, vectorized=True,
                                alternative="greater" if alternative == "two-sided" else alternative).pvalue


@pytest.mark.slow
@pytest.mark.parametrize("na, nb", [(3, 3), (4, 4), (5, 5), (3, 5), (5, 3)])
def test_exact_permutation_p_equals_scipy_exactly_on_many_samples(na, nb):
    """Values near 3 with differences down to 1e-4: the old code (null and observed by different formulas)
    missed the observed split's own >= test in about a quarter of these."""
    rng = np.random.default_rng(na * 10 + nb)
    for _ in range(120):
        scale = 10 ** rng.uniform(-4, 0)
        a, b = 3 + scale * rng.normal(size=na), 3 + scale * rng.normal(size=nb)
        for alternative in ("two-sided", "greater", "less"):
            assert stats.permutation_test(a, b, alternative).pvalue == _scipy_perm(a, b, alternative)
        if na == nb:
            raw = sps.permutation_test((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
                                       n_resamples=np.inf, vectorized=True).pvalue
            assert stats.permutation_test(a, b).pvalue == raw        # equal arms: scipy's two-sided agrees too
            for alternative in ("two-sided", "greater", "less"):
                assert stats.sign_flip_test(a, b, alternative).pvalue == _scipy_perm(a, b, alternative, True)


def test_exact_p_counts_the_observed_split_and_its_mirror():
    a, b = np.array([3.0001, 3.0003, 3.0002, 3.0004]), np.array([3.0, 3.00005, 3.00015, 3.00025])
    p = stats.permutation_test(a, b).pvalue
    assert round(p * 70) == p * 70 and p == _scipy_perm(a, b, "two-sided")


# ----------------------------------------------------------------------------- item 1: worst-rank test
def _composite_u(x, y, axis=-1):      # (..., n_x), (..., n_y) -> (...): pairs with x above y, ties half
    return ((x[..., :, None] > y[..., None, :]) + 0.5 * (x[..., :, None] == y[..., None, :])).sum(axis=(-1, -2))


@pytest.mark.parametrize("na, nb, lost_a, lost_b", [(3, 3, 0, 1), (4, 4, 1, 0), (5, 5, 2, 1), (3, 5, 0, 3),
                                                    (2, 5, 3, 0), (4, 4, 0, 0), (0, 4, 4, 0)])
@pytest.mark.parametrize("lower_is_better", [True, False])
def test_worst_rank_p_equals_scipy_permutation_of_the_composite(na, nb, lost_a, lost_b, lower_is_better):
    rng = np.random.default_rng(na + 7 * nb + 31 * lost_a)
    worst = np.inf if lower_is_better else -np.inf
    for _ in range(15):
        a, b = rng.normal(rng.uniform(-2, 2), 1, na), rng.normal(0, 1, nb)
        w = stats.worst_rank_test(a, b, lost_a, lost_b, lower_is_better)
        ca, cb = np.r_[a, [worst] * lost_a], np.r_[b, [worst] * lost_b]
        ref = sps.permutation_test((ca, cb), _composite_u, n_resamples=np.inf, vectorized=True).pvalue
        assert w.test.pvalue == pytest.approx(ref, rel=1e-12, abs=1e-15)
        assert w.p_better == pytest.approx(stats.prob_better(np.where(np.isinf(ca), 1e300 * np.sign(worst), ca),
                                                             np.where(np.isinf(cb), 1e300 * np.sign(worst), cb),
                                                             lower_is_better))
        for conf in (0.95, 0.975, 1 - 0.05 / 3):
            ci = stats.worst_rank_interval(w, conf)
            assert (ci.low > 0 or ci.high < 0) == (w.test.pvalue < 1 - conf)


def test_worst_rank_interval_is_the_set_of_accepted_shifts():
    rng = np.random.default_rng(4)
    a, b = rng.normal(-1, 1, 5), rng.normal(0, 1, 6)
    w = stats.worst_rank_test(a, b, 1, 0, True)
    ci = stats.worst_rank_interval(w, 0.95)
    for shift in np.linspace(-6, 6, 241):
        accepted = stats.worst_rank_test(a - shift, b, 1, 0, True).test.pvalue >= 0.05
        if not np.any(np.isclose(shift, np.subtract.outer(a, b).ravel())):
            assert accepted == (ci.low <= shift <= ci.high)


def test_a_variant_that_loses_most_seeds_is_worse_and_lost_baseline_seeds_count_against_it():
    w = stats.worst_rank_test([5.0], [3.1, 3.2, 3.0, 3.3, 3.25], 4, 0, lower_is_better=True)
    assert w.test.pvalue == pytest.approx(2 / 252) and w.p_better == 0.0      # 5 of C(10, 5) splits worst
    w = stats.worst_rank_test([2.0, 2.1, 2.2, 2.3, 2.4], [3.0, 3.1], 0, 3, lower_is_better=True)
    assert w.p_better == 1.0 and w.test.pvalue == pytest.approx(2 / 252)


# ----------------------------------------------------------------------------- item 4: P(better) interval
def test_prob_better_interval_never_has_zero_width_and_covers_at_small_n():
    for est in (0.0, 1 / 9, 0.5, 1.0):
        ci = stats.prob_better_interval(est, 3, 3)
        assert ci.high - ci.low > 0.3 and 0 <= ci.low <= est <= ci.high <= 1
    rng = np.random.default_rng(0)
    for n, shift in [(3, 0.0), (3, 1.0), (3, 3.0), (4, 0.5), (5, 1.5), (5, 0.0), (10, 2.0)]:
        truth = sps.norm.cdf(shift / math.sqrt(2))             # P(a > b), a ~ N(shift, 1), b ~ N(0, 1)
        a = rng.normal(shift, 1, (2000, n))
        b = rng.normal(0, 1, (2000, n))
        est = ((a[:, :, None] > b[:, None, :]).mean(axis=(1, 2)))
        hits = [(lambda ci: ci.low <= truth <= ci.high)(stats.prob_better_interval(e, n, n)) for e in est]
        assert np.mean(hits) >= 0.93, (n, shift, np.mean(hits))


def test_prob_better_interval_reference_values():
    # Newcombe (2006) method 5 with half a step of continuity correction: both ends solve the score equation
    ci = stats.prob_better_interval(0.5, 3, 3)
    k, z2 = 2.0, sps.norm.ppf(0.975) ** 2
    for theta in (ci.low, ci.high):
        v = theta * (1 - theta) / 9 * (1 + k * ((1 - theta) / (2 - theta) + theta / (1 + theta)))
        assert (abs(0.5 - theta) - 1 / 18) ** 2 == pytest.approx(z2 * v, rel=1e-9)
    assert ci.low + ci.high == pytest.approx(1.0)             # symmetric at 0.5


# ----------------------------------------------------------------------------- item 5: power in ratio form
@pytest.mark.parametrize("n, n_b", [(3, 5), (4, 10), (7, 3), (5, 5), (10, 4)])
def test_min_detectable_effect_unequal_arms_matches_statsmodels_ratio_form(n, n_b):
    power_mod = pytest.importorskip("statsmodels.stats.power")
    for alpha in (0.05, 0.05 / 3):
        ref = power_mod.TTestIndPower().solve_power(None, nobs1=n, ratio=n_b / n, alpha=alpha, power=0.8)
        assert stats.min_detectable_effect(n, alpha, 0.8, n_b=n_b) == pytest.approx(ref, rel=1e-6)
        for d in (0.3, 1.0, 2.5):
            assert stats.t_power(d, n, alpha, n_b=n_b) == pytest.approx(
                power_mod.TTestIndPower().power(d, n, alpha, ratio=n_b / n), abs=1e-12)
    # the old min(n_a, n_b) form understates what the larger arm buys
    assert stats.min_detectable_effect(n, 0.05, n_b=n_b) != pytest.approx(
        stats.min_detectable_effect(min(n, n_b), 0.05), rel=1e-3) or n == n_b


def test_paired_power_matches_statsmodels():
    power_mod = pytest.importorskip("statsmodels.stats.power")
    for n in (3, 5, 12):
        assert stats.min_detectable_effect(n, 0.05, paired=True) == pytest.approx(
            power_mod.TTestPower().solve_power(None, nobs=n, alpha=0.05, power=0.8), rel=1e-6)
