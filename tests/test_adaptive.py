"""The adaptive decision engine (sweeper.adaptive) against independent references: spending functions in closed
form, boundaries against a brute-force simulation of the looks, graphical Holm, futility, invalid; the
benchmark script end to end in a tiny mode."""
import json
import math

import numpy as np
import pytest

from sweeper.adaptive import calibration
from sweeper.adaptive import design as ad
from sweeper.analysis import robust


def _phi(x):                      # the normal cdf from math.erfc: independent of scipy
    return 0.5 * math.erfc(-x / math.sqrt(2))


def test_spending_functions_match_their_closed_forms():
    z = 1.959963984540054
    for t in (0.1, 0.25, 0.5, 0.8, 1.0):
        assert ad.spent(t, 0.05, "obf") == pytest.approx(2 - 2 * _phi(z / math.sqrt(t)), rel=1e-9)
        assert ad.spent(t, 0.05, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) * t), rel=1e-12)
    assert ad.spent(1.0, 0.05, "obf") == pytest.approx(0.05) and ad.spent(0.0, 0.05) == 0.0
    g = ad.HSD_GAMMA
    for t in (0.25, 0.5, 1.0):
        assert ad.spent(t, 0.05, "hsd") == pytest.approx(0.05 * (1 - math.exp(-g * t)) / (1 - math.exp(-g)), rel=1e-12)
    with pytest.raises(ValueError, match="accepted values are obf, pocock, hsd"):
        ad.spent(0.5, 0.05, "linear")


def test_one_look_is_the_fixed_two_sided_test():
    assert ad.boundaries((1.0,), 0.05) == pytest.approx((1.959964,), abs=1e-5)
    assert ad.nominal_p(ad.boundaries((1.0,), 0.025)[0]) == pytest.approx(0.025, rel=1e-6)


@pytest.mark.parametrize("kind", ["obf", "pocock"])
def test_boundaries_spend_alpha_look_by_look_as_a_brute_force_simulation_says(kind):
    fractions = (3 / 9, 5 / 9, 7 / 9, 1.0)
    c = np.array(ad.boundaries(fractions, 0.05, kind))
    rng = np.random.default_rng(1)
    steps = np.diff((0.0,) + fractions)
    s = np.cumsum(rng.standard_normal((400_000, 4)) * np.sqrt(steps), axis=1)      # (paths, looks) Brownian
    z = s / np.sqrt(fractions)
    crossed = np.maximum.accumulate(np.abs(z) >= c, axis=1).mean(axis=0)          # P(crossed by look k)
    for k, t in enumerate(fractions):
        want = ad.spent(t, 0.05, kind)
        assert abs(crossed[k] - want) < 4 * math.sqrt(want * (1 - want) / 400_000) + 2e-4, (k, crossed[k], want)
    assert np.all(np.diff(c) < 0) if kind == "obf" else True      # O'Brien-Fleming: strict early, lax late


def _stat(p, est=1.0, n=9, low=-5.0, high=5.0):
    return ad.LookStat(n, "paired t-test", p, est, 0.5, n - 1, low, high)


def test_graphical_holm_passes_a_decided_comparisons_alpha_on():
    # one look: plain Holm
    d = ad.Design(start=9, batch=1, max_seeds=9, min_effect=0.1, alpha=0.05, spending="obf", lower_is_better=True)
    states = ad.start_states(d, ["a", "b"])
    ad.decide_look(d, states, {"a": _stat(1e-9), "b": _stat(0.03)})
    assert states["a"].status == ad.WORSE and states["b"].status == ad.WORSE     # 0.03 < 0.05 after a's share
    states = ad.start_states(d, ["a", "b"])
    ad.decide_look(d, states, {"a": _stat(0.04), "b": _stat(0.03)})
    assert states["a"].status == states["b"].status == ad.BUDGET               # neither < 0.025: none
    assert states["a"].alpha == pytest.approx(0.025)


def test_direction_follows_the_metric():
    d = ad.Design(start=9, max_seeds=9, min_effect=0.1, lower_is_better=False, alpha=0.05, batch=2, spending="obf")
    states = ad.start_states(d, ["a"])
    ad.decide_look(d, states, {"a": _stat(1e-9, est=2.0)})
    assert states["a"].status == ad.BETTER


def test_invalid_variant_is_stopped_at_its_first_look_and_keeps_its_alpha():
    d = ad.Design(start=3, batch=2, max_seeds=9, min_effect=0.1, alpha=0.05, spending="obf", lower_is_better=True)
    states = ad.start_states(d, ["a", "b"])
    ad.decide_look(d, states, {"a": _stat(1e-12, n=3), "b": _stat(0.5, n=3)}, invalid={"a": "gradient_flow"})
    assert states["a"].status == ad.INVALID and "gradient_flow" in states["a"].reason
    assert states["b"].alpha == pytest.approx(0.025) and states["b"].status == ad.OPEN


def test_early_look_needs_far_more_than_the_fixed_level():
    d = ad.Design(start=3, batch=2, max_seeds=9, min_effect=0.1, alpha=0.05, spending="obf", lower_is_better=True)
    states = ad.start_states(d, ["a"])
    ad.decide_look(d, states, {"a": _stat(0.01, n=3)})
    assert states["a"].status == ad.OPEN                  # p=0.01 < 0.05, but look 1 of 4 spends ~0.0007
    # the first look's level is the t p-value quantile spending alpha(1/3): ~spent, up to the calibration's MC error
    assert states["a"].looks[0]["nominal_p"] == pytest.approx(ad.spent(3 / 9, 0.05), rel=0.3)


def test_futility_no_effect_and_budget():
    d = ad.Design(start=3, batch=2, max_seeds=9, min_effect=1.0, alpha=0.05, spending="obf", lower_is_better=True)
    states = ad.start_states(d, ["eq", "wide", "trend"])
    first = {"eq": _stat(0.5, est=0.0, n=3, low=-0.2, high=0.3), "wide": _stat(0.5, est=0.0, n=3, low=-9, high=9),
             "trend": _stat(0.5, est=0.0, n=3, low=-9, high=9)}
    ad.decide_look(d, states, first)
    assert all(s.status == ad.OPEN for s in states.values())       # no futility stop at the first look
    # look 2 (5 of 9 seeds): z = 0 -> predictive power P(|N(0, 4/5)| >= c_final) ~ 0.07 > 0.05 keeps it open
    ad.decide_look(d, states, {"eq": ad.LookStat(5, "paired t-test", 0.98, 0.01, 0.2, 4, -0.2, 0.25),
                               "wide": ad.LookStat(5, "paired t-test", 0.9, 0.0, 50.0, 4, -99, 99),
                               "trend": ad.LookStat(5, "paired t-test", 0.2, 0.3, 0.2, 4, -0.1, 0.7)})
    assert states["wide"].status == ad.BUDGET and "probability" in states["wide"].reason   # X undetectable
    assert states["trend"].status == ad.OPEN
    pp = states["eq"].looks[-1]["predictive_power"]
    c = states["eq"].looks[-1]
    assert 0 < pp < 1 and c["conditional_power"] > 0.05
    # look 3 (7 of 9): z ~ 0 -> predictive power P(|N(0, 2/7)| >= c_final) < 0.05, inside +-X: no effect
    ad.decide_look(d, states, {"eq": ad.LookStat(7, "paired t-test", 0.99, 0.0, 0.15, 6, -0.2, 0.2),
                               "trend": ad.LookStat(7, "paired t-test", 0.05, 0.4, 0.2, 6, 0.0, 0.8)})
    assert states["eq"].status == ad.NO_EFFECT and "no effect >= 1" in states["eq"].reason
    assert states["trend"].status == ad.OPEN


def test_predictive_power_against_its_closed_form():
    st = ad.LookStat(8, "paired t-test", 0.3, 0.5, 0.5, 7)
    z = 1.0364333894937898                                      # two-sided p 0.3
    t, c = 0.5, 2.0
    mean, sd = z / math.sqrt(t), math.sqrt((1 - t) / t)
    want = (1 - _phi((c - mean) / sd)) + _phi((-c - mean) / sd)
    assert ad.predictive_power(st, t, c) == pytest.approx(want, rel=1e-6)


@pytest.mark.slow
def test_levels_beyond_the_stored_robust_ones_spend_alpha_on_t_p_values_in_an_independent_simulation():
    ns = (18, 20, 22, 24, 26)      # above calibration.MAX_N: the robust test decides at levels calibrated on t
    fr = tuple(n / 26 for n in ns)
    levels = ad.look_levels(True, ns, fr, 0.05, "obf")
    assert all(lv.robust for lv in levels)
    q = np.array([lv.q for lv in levels])
    rng = np.random.default_rng(2024)                          # not the calibration's seed
    from scipy import stats as sps
    x = rng.standard_normal((200_000, 26))
    crossed = np.zeros(x.shape[0], bool)
    for k, n in enumerate(ns):
        p = sps.ttest_1samp(x[:, :n], 0.0, axis=1).pvalue
        crossed |= p <= q[k]
    fwer, want = crossed.mean(), 0.05 * ad.CALIBRATION_SHARE                # the margin: 0.048, not 0.05
    se = math.sqrt(want * (1 - want) / 200_000) + math.sqrt(want * (1 - want) / calibration.PATHS)
    assert abs(fwer - want) < 4 * se, fwer
    # the normal-theory boundaries applied to t p-values would spend more than the calibrated levels
    nominal = np.array([ad.nominal_p(c) for c in ad.boundaries(fr, 0.05, "obf")])
    assert np.all(q[1:] < nominal[1:])


def _fresh_paths_fwer(paired: bool, ns, levels, noise, paths: int) -> float:
    """The family-wise error of the looks on new null paths (not the calibration's), each look run by look_stat
    with its level: the real tests, an independent check of the stored calibration."""
    rng = np.random.default_rng(77)
    crossed = 0
    for _ in range(paths):
        a = noise(rng, ns[-1])
        b = np.zeros(ns[-1]) if paired else noise(rng, ns[-1])
        for n, level in zip(ns, levels):
            st = ad.look_stat("paired" if paired else "independent", a[:n], b[:n], level=level)
            if st.pvalue <= level.q:
                crossed += 1
                break
    return crossed / paths


@pytest.mark.slow
@pytest.mark.parametrize("paired", [True, False], ids=["paired", "independent"])
def test_robust_look_levels_keep_the_error_on_new_paths_normal_and_heavy_tailed(paired):
    ns = (4, 6, 8, 10)
    fr = tuple(n / 10 for n in ns)
    levels = ad.look_levels(paired, ns, fr, 0.05, "hsd")
    assert not levels[0].robust and levels[-1].robust          # the t-test early (below the floor), robust late
    want = 0.05 * ad.CALIBRATION_SHARE
    paths = 3000
    se = math.sqrt(want * (1 - want) / paths)
    normal = _fresh_paths_fwer(paired, ns, levels, lambda rng, n: rng.standard_normal(n), paths)
    assert abs(normal - want) < 4 * se, normal
    heavy = _fresh_paths_fwer(paired, ns, levels, lambda rng, n: rng.standard_t(2, n), paths)   # infinite variance
    assert heavy < 0.05 + 3 * se, heavy


def test_look_levels_spend_what_the_calibration_paths_allow_and_carry_the_rest():
    ns = (4, 6, 8, 10, 12, 14, 16)
    fr = tuple(n / 16 for n in ns)
    for paired in (True, False):
        levels = ad.look_levels(paired, ns, fr, 0.05, "hsd")
        alive = np.ones(calibration.PATHS, bool)
        crossed = 0
        for n, t, lv in zip(ns, fr, levels):
            p = calibration.pvalues(paired, n, robust=lv.robust)
            crossed += int((alive & (p <= lv.q)).sum())
            alive &= ~(p <= lv.q)
            budget = round(ad.spent(t, 0.05, "hsd") * ad.CALIBRATION_SHARE * calibration.PATHS)
            assert crossed <= budget                                   # never more than spent by this look
        assert crossed >= budget - 0.003 * calibration.PATHS          # the last look spends what is left
        assert levels[-1].robust and levels[-1].q >= 0.03


def test_look_stat_is_the_fixed_designs_test():
    from scipy import stats as sps

    a, b = np.array([1.0, 2.2, 2.9, 4.1]), np.array([0.5, 1.9, 2.0, 3.0])
    st = ad.look_stat("paired", a, b)
    assert st.pvalue == pytest.approx(sps.ttest_rel(a, b).pvalue) and st.n == 4      # 4 pairs: floor 1/8
    w = ad.look_stat("independent", a[:3], b, 1, 0, True)
    assert w.test == "worst-rank test" and w.n == 4 and w.design == "independent"
    rng = np.random.default_rng(3)
    d = rng.standard_normal(10) + 1.0
    robust_look = ad.look_stat("paired", d, np.zeros(10), level=ad.Level(0.01, True))
    assert "sign-flip max-type" in robust_look.test
    assert robust_look.pvalue == robust.deciding_test(d, np.zeros(10), True, seed=calibration.SEED).pvalue
    early = ad.look_stat("paired", d, np.zeros(10), level=ad.Level(0.001, False))
    assert early.test == "paired t-test" and early.pvalue == pytest.approx(sps.ttest_1samp(d, 0).pvalue)
    assert robust_look.estimate == early.estimate == pytest.approx(d.mean())          # the label: the t scale
    assert early.se == pytest.approx(d.std(ddof=1) / math.sqrt(10))
    d_out = d.copy()
    d_out[0] += 40.0                                        # one wild seed: futility reads the robust test's scale
    wild = ad.look_stat("paired", d_out, np.zeros(10), level=ad.Level(0.01, True))
    assert wild.se == pytest.approx(robust.spread(d_out, np.zeros(10), True, True) / math.sqrt(10))
    assert wild.se < d_out.std(ddof=1) / math.sqrt(10) / 3
    t_wild = ad.look_stat("paired", d_out, np.zeros(10), level=ad.Level(0.01, False))
    design = ad.Design(alpha=0.05, start=4, batch=2, max_seeds=16, min_effect=1.0, spending="hsd",
                       lower_is_better=True)
    assert ad.conditional_power(design, wild, 10 / 16, 2.0) > ad.conditional_power(design, t_wild, 10 / 16, 2.0)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    ind = ad.look_stat("independent", x, y, level=ad.Level(0.04, False))
    assert ind.pvalue == pytest.approx(sps.ttest_ind(x, y).pvalue)                   # Student's t, equal arms
    d[:] = 0.3                                                                         # zero spread: exact
    assert ad.look_stat("paired", d, np.zeros(10)).pvalue == pytest.approx(2 / 1024)
    assert ad.look_stat("paired", d, np.zeros(10), level=ad.Level(1e-4, False)).pvalue == pytest.approx(2 / 1024)


@pytest.mark.slow
def test_benchmark_script_runs_and_writes_its_results(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "adaptive_sim.py"
    spec = importlib.util.spec_from_file_location("adaptive_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--sweeps", "2", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "adaptive_sim.json").read_text())
    assert len(data["rows"]) == len(mod.scenarios()) and "max_null_fwer" in data["summary"]
    assert "| variants | noise |" in (tmp_path / "adaptive_sim.md").read_text()
