"""The decision rule (sweeper.analysis.verdict) against known truth and independent references: lost seeds in either
arm, the decision interval vs the verdict and scipy's t intervals at the Holm step's level, health-invalid
comparisons, secondary-metric families, declared smallest effects, the robustness caution at the same level.

    python -m pytest -q tests/test_verdict.py
"""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sweeper.analysis import stats, verdict
from sweeper.analysis.results import load_experiment, load_manifest, load_runs
from sweeper.config.decision import DecisionOptions
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.rundir import RunDir
from tests.helpers.synthetic_sweep import write_sweep

FAST = dict(options=DecisionOptions(n_resamples=500))


def frame(values: dict, status: dict | None = None, paired: bool = True, health_failed: dict | None = None,
          extra: dict | None = None) -> pd.DataFrame:
    """A runs DataFrame shaped like results.load_runs: values {variant: [final val_loss or None]}."""
    rows = []
    for v, vals in values.items():
        for seed, x in enumerate(vals):
            st = (status or {}).get((v, seed), "finished" if x is not None else "diverged")
            failed = (health_failed or {}).get(v, "")
            row = dict(variant=v, seed=seed, status=st, final_val_loss=math.nan if x is None else x,
                       health="fail" if failed else "pass", health_failed=failed,
                       fp_data_order_hash=f"o{seed}" if paired else f"o{v}{seed}",
                       fp_eval_batches_hash=f"e{seed}" if paired else f"e{v}{seed}", fp_corpus_hash="c")
            for metric, per_variant in (extra or {}).items():
                row[f"final_{metric}"] = per_variant[v][seed]
            rows.append(row)
    return pd.DataFrame(rows)


def _family_error_rate(rule, reps: int, rng) -> float:
    """Share of simulated families (baseline b, variants v1, v2; no true effect; the baseline loses its 3 worst of
    10 seeds) with any false better/worse verdict."""
    false = 0
    for _ in range(reps):
        x = rng.standard_normal((3, 10))
        vals = {name: list(row) for name, row in zip(("b", "v1", "v2"), x)}
        for k in np.argsort(x[0])[-3:]:
            vals["b"][k] = None                                    # diverged: its 3 worst (lower is better)
        an = rule(frame(vals, paired=False))
        false += any(c.verdict in ("better", "worse") for c in an.comparisons)
    return false / reps


def _analyze(runs, m=2, **kw):
    return verdict.analyze(runs, "val_loss", True, [(f"v{i}", "b") for i in range(1, m + 1)], **FAST, **kw)


# ----------------------------------------------------------------------------- item 1: lost seeds
@pytest.mark.slow
def test_baseline_losing_its_worst_seeds_gives_no_false_verdicts():
    """Issue 12: with the old rule (t-test on the survivors) the family-wise error here was 0.175."""
    rate = _family_error_rate(_analyze, 300, np.random.default_rng(12))
    assert rate <= 0.05


@pytest.mark.slow
def test_survivors_only_t_test_would_fail_the_same_simulation():
    """The reference the rule replaces: Welch on the survivors, Holm over 2, errs far above 0.05 here."""
    def survivors_rule(runs):
        class A:
            comparisons = []
        out, ps = A(), []
        b = runs[(runs.variant == "b") & (runs.status == "finished")].final_val_loss.to_numpy()
        for v in ("v1", "v2"):
            a = runs[(runs.variant == v) & (runs.status == "finished")].final_val_loss.to_numpy()
            ps.append(sps.ttest_ind(a, b, equal_var=False).pvalue)
        out.comparisons = [type("C", (), {"verdict": "worse" if p < 0.05 else "inconclusive"})()
                           for p in stats.holm(ps)]
        return out
    assert _family_error_rate(survivors_rule, 300, np.random.default_rng(12)) > 0.1


def test_a_variant_that_loses_most_seeds_is_worse_on_real_files(tmp_path):
    base = [3.00, 3.02, 2.99, 3.01, 3.03, 2.98, 3.00, 3.04]
    var = [2.995, None, None, None, None, None, float("nan"), 3.005]        # 6 of 8 lost; survivors look as good
    root = write_sweep(tmp_path / "s", {"base": base, "var": var}, baseline="base")
    an = verdict.analyze(load_runs(root, load_manifest(root)), "val_loss", True, [("var", "base")], **FAST)
    c = an.comparisons[0]
    assert an.arms["var"].lost == 6 and c.primary.name == "worst-rank test"
    assert c.verdict == "worse" and c.decision_ci.low > 0
    assert c.primary.pvalue == pytest.approx(0.01538461538461533, rel=1e-9)
    assert c.p_better.estimate == pytest.approx(10 / 64)                    # survivors beat 3 and 7 baseline seeds
    assert "count against the arm that lost them" in " ".join(c.notes)


def test_lost_baseline_seeds_count_against_the_baseline():
    runs = frame({"b": [3.1, 3.12, None, None, None], "v1": [3.05, 3.02, 3.08, 3.01, 3.07]})
    c = _analyze(runs, m=1).comparisons[0]
    assert c.primary.name == "worst-rank test" and c.verdict == "better"      # 3 lost < every usable seed
    assert c.primary.pvalue == pytest.approx(2 / 252) and c.p_better.estimate == 1.0
    assert "paired" not in c.design                          # the rank test treats the arms as independent


def test_no_lost_seeds_keeps_the_t_test_and_fewer_ended_than_min_seeds_is_insufficient():
    runs = frame({"b": [3.0, 3.1, 3.05, 3.2], "v1": [2.5, 2.6, 2.55, 2.62]})
    c = _analyze(runs, m=1).comparisons[0]
    assert c.primary.name == "paired t-test"
    assert c.primary.pvalue == pytest.approx(sps.ttest_rel([2.5, 2.6, 2.55, 2.62], [3.0, 3.1, 3.05, 3.2]).pvalue)
    short = frame({"b": [3.0, 3.1, 3.05], "v1": [2.5, 2.6, 2.55]}, status={("v1", 2): "pending"})
    assert _analyze(short, m=1).comparisons[0].verdict == "insufficient"


# ----------------------------------------------------------------------------- item 2: the decision interval
def _random_family(rng, n, m, paired, lost):
    x = rng.standard_normal((m + 1, n)) * rng.uniform(0.2, 2)
    x[1:] += rng.choice([-2.0, -0.7, 0.0, 0.7, 2.0], size=(m, 1))
    vals = {name: list(row) for name, row in zip(["b"] + [f"v{i}" for i in range(1, m + 1)], x)}
    for _ in range(lost):
        vals[rng.choice(list(vals))][int(rng.integers(n))] = None
    return frame(vals, paired=paired)


@pytest.mark.slow
@pytest.mark.parametrize("paired", [True, False])
def test_decision_interval_never_disagrees_with_the_verdict_and_is_scipys_at_the_holm_level(paired):
    rng = np.random.default_rng(int(paired))
    seen = set()
    for rep in range(120):
        n, m, lost = int(rng.choice([3, 4, 5, 8])), int(rng.choice([1, 2, 3])), int(rng.choice([0, 0, 1, 2]))
        an = _analyze(_random_family(rng, n, m, paired, lost), m=m)
        p = [c.primary.pvalue if c.primary is not None else 1.0 for c in an.comparisons]
        order = np.argsort(p, kind="stable")
        for c in an.comparisons:
            if c.primary is None:
                continue
            ci = c.decision_ci
            assert ci.confidence == pytest.approx(1 - c.decision_level)
            assert f"Holm step {c.holm_step} of {m}" in ci.method
            assert c.decision_level == pytest.approx(0.05 / (m - c.holm_step + 1))
            excludes = ci.low > 0 or ci.high < 0
            assert excludes == (c.verdict in ("better", "worse")), (c.verdict, ci, c.p_adjusted)
            assert (c.p_adjusted < 0.05) == (c.primary.pvalue < c.decision_level)
            seen.add((c.primary.name, c.verdict))
            if c.primary.name in ("paired t-test", "Welch t-test", "Student t-test"):
                a = an.arms[c.variant].values
                b = an.arms[c.baseline].values
                ref = (sps.ttest_rel(a, b) if c.primary.name == "paired t-test" else
                       sps.ttest_ind(a, b, equal_var=c.primary.name == "Student t-test")
                       ).confidence_interval(1 - c.decision_level)
                assert (ci.low, ci.high) == pytest.approx((ref.low, ref.high), rel=1e-9)
        # a comparison Holm did not reject carries the level of the step where Holm stopped
        rejected = [c.p_adjusted < 0.05 for c in an.comparisons]
        first_fail = next((k for k, i in enumerate(order) if not rejected[i]), None)
        for k, i in enumerate(order):
            c = an.comparisons[i]
            assert c.holm_step == (k + 1 if first_fail is None or k < first_fail else first_fail + 1)
    names = {name for name, _ in seen}
    assert {"worst-rank test"} <= names and {"better", "worse", "inconclusive"} <= {v for _, v in seen}
    assert any("sign-flip max-type" in x or "Huber-clipped" in x for x in names)        # the robust test decided too


@pytest.mark.slow
def test_decision_interval_covers_the_true_difference():
    rng = np.random.default_rng(3)
    hits = total = 0
    for _ in range(300):
        x = rng.standard_normal((3, 4))
        x[1] += 1.5                                                   # v1 worse by 1.5; v2 no effect
        an = _analyze(frame({"b": list(x[0]), "v1": list(x[1]), "v2": list(x[2])}, paired=False))
        for c, truth in zip(an.comparisons, (1.5, 0.0)):
            hits += c.decision_ci.low <= truth <= c.decision_ci.high
            total += 1
    assert hits / total >= 0.94


# ----------------------------------------------------------------------------- item 8: caution, like with like
def test_the_permutation_test_decides_at_the_holm_level_and_the_t_test_is_the_check():
    a = [2.93, 2.88, 2.85, 2.85, 2.93]
    b = [2.92, 2.97, 3.0, 2.94, 3.03]              # Student t p 0.014; exact permutation p 0.0317 = 8/252
    runs = frame({"b": b, "v1": a, "v2": list(np.array(b) + [0.01, -0.02, 0.0, 0.03, -0.01])}, paired=False)
    c = _analyze(runs).comparisons[0]
    # 5 vs 5 can reach 2/252 < 0.05/2: the robust permutation test decides, held to Holm's level 0.025
    assert "permutation test of Welch's t on Huber-clipped values" in c.primary.name
    assert c.primary.pvalue == pytest.approx(8 / 252) and c.decision_level == pytest.approx(0.025)
    assert c.robustness.name == "Student t-test"
    assert c.robustness.pvalue == pytest.approx(sps.ttest_ind(a, b).pvalue)
    assert c.verdict == "inconclusive" and c.decision_ci.low < 0 < c.decision_ci.high


def test_an_outlier_seed_does_not_hide_a_clear_difference_and_the_note_says_why():
    b = [3.0, 3.02, 2.99, 3.01, 3.03, 2.98, 3.0, 3.02]
    a = [2.90, 2.91, 2.89, 2.92, 2.90, 2.88, 2.91, 3.9]         # one diverging-ish seed at 3.9
    c = _analyze(frame({"b": b, "v1": a}, paired=False), m=1).comparisons[0]
    assert sps.ttest_ind(a, b).pvalue > 0.5                      # the t-test sees nothing
    assert c.verdict == "better" and c.decision_ci.high < 0      # the deciding test: lower val_loss
    assert c.reason.startswith("v1 has lower val_loss by")
    assert any(n.startswith("the Student t-test alone would not reject") for n in c.notes)


# ----------------------------------------------------------------------------- item 6: health -> invalid
def test_health_failed_variant_is_invalid_with_its_numbers_and_stays_in_the_family():
    base, good, broken = [3.0, 3.02, 2.99, 3.01], [3.45, 3.48, 3.44, 3.47], [3.40, 3.43, 3.39, 3.44]
    runs = frame({"b": base, "v1": good, "v2": broken}, health_failed={"v2": "gradient_flow,kernel_agreement"})
    an = _analyze(runs)
    c1, c2 = an.comparisons
    assert c1.verdict == "worse"
    assert c2.verdict == "invalid" and c2.numbers_say == "worse"
    assert c2.reason.startswith("health checks failed (gradient_flow, kernel_agreement): the comparison does not "
                                "test what the variant claims")
    assert c2.invalid_checks == ["gradient_flow", "kernel_agreement"]
    assert c2.primary.pvalue < 0.05 and c2.delta.estimate == pytest.approx(np.mean(broken) - np.mean(base))
    # kept in the Holm family: the other comparison's adjusted p is the same as with a healthy v2
    healthy = _analyze(frame({"b": base, "v1": good, "v2": broken}))
    assert c1.p_adjusted == healthy.comparisons[0].p_adjusted


def test_health_failed_baseline_makes_every_comparison_invalid():
    runs = frame({"b": [3.0, 3.02, 2.99, 3.01], "v1": [3.45, 3.48, 3.44, 3.47], "v2": [3.0, 3.01, 2.98, 3.02]},
                 health_failed={"b": "loss_decreases"})
    an = _analyze(runs)
    assert [c.verdict for c in an.comparisons] == ["invalid", "invalid"]
    assert all(c.reason.startswith("the baseline b failed health checks (loss_decreases): no comparison against "
                                   "it tests what it claims") for c in an.comparisons)


def test_health_invalid_on_real_files(tmp_path):
    health = {("frozen", s): "fail" for s in range(4)}
    root = write_sweep(tmp_path / "s", {"rope": [3.00, 3.02, 2.99, 3.01], "frozen": [3.40, 3.43, 3.39, 3.44]},
                       baseline="rope", health=health)
    runs = load_runs(root, load_manifest(root))
    c = verdict.analyze(runs, "val_loss", True, [("frozen", "rope")], **FAST).comparisons[0]
    assert c.verdict == "invalid" and "qk_grad_nonzero" in c.reason


def test_a_variant_diagnosed_with_a_bug_is_invalid_though_no_check_failed(tmp_path):
    """Issue 29: a whole-run diagnosis that names a bug (labels shuffled apart from the inputs: val at chance
    while train falls) makes the variant invalid like a failed check; a benign one (overfitting) does not."""
    from sweeper.health.result import CheckResult, HealthReport

    root = write_sweep(tmp_path / "s", {"base": [3.00, 3.02, 2.99, 3.01], "shuffled": [2.80, 2.83, 2.79, 2.84],
                                        "over": [2.90, 2.93, 2.89, 2.94]}, baseline="base")
    for variant, name, kind in (("shuffled", "labels_do_not_match_inputs", "bug"), ("over", "overfitting", "benign")):
        for seed in range(4):
            rd = RunDir(root / "runs" / variant / f"seed_{seed}")
            HealthReport([CheckResult("val_at_chance", "warn", 0.1, "> 0.1", "val at chance")],
                         diagnosis={"name": name, "kind": kind, "invalidates": kind == "bug",
                                    "check": "val_at_chance" if kind == "bug" else "overfitting",
                                    "message": "m", "fix": "f"}).write(rd.health_path)
    runs = load_runs(root, load_manifest(root))
    assert set(runs.loc[runs.variant == "shuffled", "health_failed"]) == {"labels_do_not_match_inputs"}
    assert set(runs.loc[runs.variant == "over", "diagnosis"]) == {"overfitting"}
    an = verdict.analyze(runs, "val_loss", True, [("shuffled", "base"), ("over", "base")], **FAST)
    by = {c.variant: c for c in an.comparisons}
    assert by["shuffled"].verdict == "invalid" and "labels_do_not_match_inputs" in by["shuffled"].reason
    assert by["over"].verdict == "better"                       # warned, benign: the numbers decide


# ----------------------------------------------------------------------------- item 7: secondary metrics
def test_secondary_metrics_have_their_own_direction_and_holm_family():
    base, v1, v2 = [3.0, 3.02, 2.99, 3.01], [2.9, 2.91, 2.88, 2.92], [3.0, 3.03, 2.98, 3.0]
    tps = {"b": [5000.0, 5010, 4990, 5005], "v1": [4000.0, 4020, 3990, 4010], "v2": [5001.0, 5012, 4991, 5003]}
    runs = frame({"b": base, "v1": v1, "v2": v2}, extra={"tokens_per_s": tps})
    exp = Experiment(name="x", baseline="b", metric="val_loss", lower_is_better=True,
                     variants={"b": [], "v1": [], "v2": []},
                     secondary_metrics={"tokens_per_s": "higher", "val_loss": "lower"})
    primary, secondary = verdict.analyze_all(runs, exp, **FAST)
    assert [c.verdict for c in primary.comparisons] == ["better", "inconclusive"]
    tp = secondary["tokens_per_s"]
    assert tp.role == "secondary" and not tp.lower_is_better
    assert tp.comparisons[0].verdict == "worse"                 # fewer tokens/s is worse when higher is better
    # its own family: the same metric as a secondary has the same numbers, but not the same object
    assert secondary["val_loss"].comparisons[0].p_adjusted == primary.comparisons[0].p_adjusted
    assert secondary["val_loss"] is not primary
    with pytest.raises(ValueError, match="accepted values are lower, higher"):
        verdict.analyze_all(runs, Experiment(name="x", baseline="b", metric="val_loss", lower_is_better=True,
                                             variants={}, secondary_metrics={"tokens_per_s": "up"}), **FAST)


def test_secondary_metric_that_no_run_records_is_insufficient_with_a_reason():
    runs = frame({"b": [3.0, 3.02, 2.99], "v1": [2.9, 2.91, 2.88]})
    exp = Experiment(name="x", baseline="b", metric="val_loss", lower_is_better=True, variants={},
                     secondary_metrics={"memory_mb": "lower"})
    _, secondary = verdict.analyze_all(runs, exp, **FAST)
    c = secondary["memory_mb"].comparisons[0]
    assert c.verdict == "insufficient" and c.reason == "no run recorded memory_mb (no final_memory_mb column)"


# ----------------------------------------------------------------------------- item 5: declared smallest effect
def test_seeds_needed_from_the_declared_min_effect_else_post_hoc():
    runs = frame({"b": [3.0, 3.1, 2.95, 3.05], "v1": [3.02, 3.08, 3.0, 3.01]}, paired=False)
    post = _analyze(runs, m=1).comparisons[0]
    assert post.seeds_needed_basis.startswith("post hoc")
    declared = _analyze(runs, m=1, min_effect=0.05).comparisons[0]
    assert declared.seeds_needed_basis.startswith("at the declared smallest effect that matters, min_effect = 0.05")
    assert declared.seeds_needed == stats.seeds_needed(0.05 / declared.spread, 0.05, 0.8, False)
    assert "min_effect = 0.05" in declared.reason
    with pytest.raises(ValueError, match="min_effect=-1"):
        _analyze(runs, m=1, min_effect=-1)


def test_mde_uses_the_ratio_form_for_unequal_arms():
    runs = frame({"b": [3.0, 3.1, 2.95, 3.05, 3.0, 3.02, 2.97, 3.04], "v1": [3.02, 3.08, 3.0, None, None, None,
                                                                            None, None]},
                 status={("v1", k): "pending" for k in range(3, 8)}, paired=False)
    c = _analyze(runs, m=1).comparisons[0]
    assert c.design == "independent" and (c.n_variant, c.n_baseline) == (3, 8)
    assert c.mde == pytest.approx(stats.min_detectable_effect(3, 0.05, 0.8, n_b=8) * c.spread)


def test_analyze_all_on_real_files_reads_min_effect_and_secondary_metrics_from_the_manifest(tmp_path):
    root = write_sweep(tmp_path / "s", {"b": [3.0, 3.02, 2.99, 3.01], "v": [2.9, 2.91, 2.88, 2.92]},
                       extra_finals={"tokens_per_s": {"b": [5000, 5010, 4990, 5005], "v": [4000, 4020, 3990, 4010]}},
                       min_effect=0.02, secondary_metrics={"tokens_per_s": "higher"})
    exp, _ = load_experiment(root, load_manifest(root))
    primary, secondary = verdict.analyze_all(load_runs(root, load_manifest(root)), exp, **FAST)
    assert primary.comparisons[0].verdict == "better" and primary.min_effect == 0.02
    assert "min_effect = 0.02" in primary.comparisons[0].seeds_needed_basis
    assert list(secondary) == ["tokens_per_s"] and secondary["tokens_per_s"].comparisons[0].verdict == "worse"


def test_arms_and_comparisons_analysed_in_threads_give_the_serial_bits(monkeypatch):
    """analyze runs arms and comparisons on a thread pool (resampling at 1,000s of seeds); every one has its own
    RNG, so the Analysis is the same, field for field and bit for bit, as one worker in order."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    for paired, lost, n in ((True, 0, 40), (False, 0, 300), (False, 2, 12)):
        runs = _random_family(rng, n, 4, paired, lost)
        threaded = _analyze(runs, m=4)
        with monkeypatch.context() as m:
            m.setattr(verdict, "_workers", lambda tasks: ThreadPoolExecutor(1))
            serial = _analyze(runs, m=4)
        assert repr(threaded) == repr(serial)
        assert [c.variant for c in threaded.comparisons] == ["v1", "v2", "v3", "v4"]
        assert list(threaded.arms) == list(serial.arms)


# ----------------------------------------------------------------------------- zero-spread paired differences
@pytest.mark.parametrize("n,verdict_,k", [(3, "inconclusive", 6), (6, "better", 6)])
def test_zero_spread_pairs_give_one_exact_result_in_every_output(n, verdict_, k):
    b = [3.0, 3.1, 3.05, 3.2, 3.15, 3.12][:n]
    c = _analyze(frame({"b": b, "v1": [x - 0.1 for x in b]}), m=1).comparisons[0]
    assert c.design == "paired" and "zero spread" in c.primary.name
    assert c.primary.pvalue == pytest.approx(2 / 2**n) and c.robustness.pvalue == pytest.approx(2 / 2**n)
    assert c.verdict == verdict_ and c.spread == 0.0 and c.seeds_needed == k
    numbers = [c.primary.pvalue, c.robustness.pvalue, c.p_adjusted, c.decision_ci.low, c.decision_ci.high,
               c.decision_ci.estimate, c.mde]
    assert not any(math.isnan(x) for x in numbers)
    if n >= k:
        assert (c.decision_ci.low, c.decision_ci.high) == pytest.approx((-0.1, -0.1), abs=1e-4)
        assert c.mde == 0.0 and c.reason.startswith("v1 has lower val_loss by 0.1")
    else:
        assert (c.decision_ci.low, c.decision_ci.high) == (-math.inf, math.inf) and c.mde == math.inf
        assert f"{k} seeds per arm could decide" in c.reason
