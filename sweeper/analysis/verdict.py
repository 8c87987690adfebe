"""A comparison family -> one verdict per comparison, with its reason. Numbers come from sweeper.analysis.stats.

    from sweeper.analysis.verdict import analyze, analyze_all
    a = analyze(runs, metric="val_loss", lower_is_better=True,
                comparisons=[("nope", "rope"), ("rope_frozen_qk", "rope")], options=DecisionOptions())
    for c in a.comparisons: print(c.variant, c.verdict, c.decision_ci, c.reason)
    primary, secondary = analyze_all(runs, experiment, options)   # secondary: metric -> Analysis, each its own family

Decision rule, fixed before looking at the data (report.md repeats it):
1. Outcome of each planned run: usable = finished with a finite metric; failed; diverged (status diverged, or
   finished with a non-finite or absent metric); incomplete = missing, pending, running, interrupted, unknown.
   Ended = usable + failed + diverged. Nothing is dropped: every count is shown, and lost (failed + diverged)
   seeds count against the arm that lost them, baseline or variant alike.
2. Either arm with fewer than `min_seeds` ended seeds -> "insufficient": no test, no guess.
3. Lost seeds in either arm -> worst-rank test: every ended seed of both arms enters an exact rank test
   (Mann-Whitney count, null distribution enumerated exactly) in which a lost seed ranks worse than every
   usable one. A t-test on the survivors would compare biased samples (an arm that lost its worst seeds looks
   better than it is); this way losing seeds can only hurt the arm that lost them, and a variant that loses
   most of its seeds can be called "worse". Simulated with the baseline losing its 3 worst of 10 seeds and no
   true effect, its family-wise error stays below 0.05 (benchmarks/calibrate.py).
4. No lost seeds -> the deciding test of sweeper.analysis.robust. Design: paired when every seed usable in both
   arms has the same data_order_hash and eval_batches_hash in both (the seed then fixes data order and
   evaluation batches), or, for user code without those hashes, when both arms drew their data order from the
   run API's seed stream (summary fingerprint seed_streams holds data_order); experiment.design=paired|independent
   declares it instead; otherwise independent. The test: an exact permutation test that keeps its level for any
   noise law, with a statistic that one outlier seed cannot swamp: independent, Welch's t of the values clipped at
   the pooled median +- 1.5 robust sd; paired, the sign-flip max-type test of Student's t and a one-step Huber t
   of the differences (min-p over the same flips). Exact enumeration up to 20,000 splits (4,096 sign flips), else
   Monte Carlo with the fixed RNG seed. Where its exact floor (4 vs 4: 2/70 = 0.029; 5 pairs: 2/32 = 0.0625)
   is above alpha / m (Holm's first step), no permutation test can decide: the t-test does (paired t; Student's
   t with equal arms, Welch's with unequal ones), with the exact test beside it as the robustness check; where
   the permutation test decides, the t-test is the check. Zero spread (every paired difference equal, or both
   arms constant): the exact sign-flip / permutation result, p = 2 / 2^n (2 / C(n_a + n_b, n_a)) or 1.
   Measured against scipy's tests on simulated sweeps (benchmarks/power_sim.py, docs/decisions.md).
5. Multiplicity: Holm over the whole planned family (every comparison; insufficient ones enter with p = 1;
   health-invalid ones stay in, the conservative choice: excluding them would loosen the others' thresholds
   after looking at the runs). The family of each secondary metric is its own and never changes a primary verdict.
6. Verdict: Holm-adjusted p < alpha -> "better" or "worse" in the metric's direction; otherwise
   "inconclusive", with the minimum detectable effect at the current n and the seeds per arm needed for 80%
   power (two-sided t-test at alpha / m, Holm's strictest step, with the sd on the deciding test's scale: of
   the clipped values when the robust test decides) at experiment.min_effect when declared, else at the
   observed difference (labelled post hoc); at zero spread, the n from which the exact test can reach
   alpha / m. Any verdict becomes "inconclusive" when the arms were evaluated on different corpora
   (corpus_hash). Other fingerprint differences are listed, never pooled silently.
7. Decision interval, shown beside the verdict: the same test inverted at the level of the Holm step that
   decided the comparison (step k of m: level 1 - alpha / (m - k + 1); a comparison Holm did not reject gets
   the level of the step where Holm stopped): the shifts of the variant's values the deciding test accepts
   (the t interval in closed form where the t-test decides), or those the worst-rank test accepts. It
   excludes 0 exactly when the verdict is better or worse. The BCa bootstrap interval of the difference is a
   secondary, labelled figure.
8. Health: a variant whose runs failed health checks that its baseline passed is "invalid" (the comparison
   does not test what the variant claims); a baseline that failed health checks makes every comparison with it
   "invalid". The numbers stay computed and shown; "invalid" is never counted as beaten or winning.
9. Checks across runs (sweeper.analysis.integrity, run before the tests): a comparison a finding concerns gets the
   finding's effect as its verdict, the check named: "invalid" (seeds or a change with no effect, a reversed
   metric direction, a selected final, no spread), "not comparable" (different training budgets), "no baseline"
   (no usable baseline seed). What the numbers alone would say is kept beside it. No test is run on copies of one
   run (every seed the same run) nor against a baseline with no usable seed: such a comparison enters Holm with
   p = 1. A check the experiment silences (experiment.silence) is shown with its reason and changes nothing.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import sweeper.analysis.robust as robust
import sweeper.analysis.scaling as scaling
import sweeper.analysis.stats as stats
from sweeper.analysis.results import MISSING, UNKNOWN
from sweeper.config.decision import DecisionOptions
from sweeper.run.files.status_values import STALE, Status

FINISHED, FAILED, DIVERGED = Status.FINISHED.value, Status.FAILED.value, Status.DIVERGED.value
INCOMPLETE = (MISSING, Status.PENDING.value, Status.RUNNING.value, Status.INTERRUPTED.value, UNKNOWN, STALE)
ENV_KEYS = ("torch_version", "python_version", "device", "num_threads", "deterministic")
PAIRING_KEYS = ("data_order_hash", "eval_batches_hash")


@dataclass
class Arm:
    variant: str
    planned: int
    failed: int
    diverged: int
    incomplete: int
    seeds: np.ndarray               # usable seeds, sorted            # (n,)
    values: np.ndarray              # their final metric              # (n,)
    summary: dict                   # n, mean, sd, median, iqm, min, max
    mean_ci: stats.Interval
    health: dict                    # verdict -> count over all planned runs
    health_failed: list[str]        # names of failing checks

    @property
    def usable(self) -> int:
        return int(self.values.size)

    @property
    def lost(self) -> int:
        return self.failed + self.diverged

    @property
    def ended(self) -> int:
        return self.usable + self.lost


@dataclass
class Comparison:
    variant: str
    baseline: str
    verdict: str = "insufficient"
    reason: str = ""
    design: str = "-"
    n_variant: int = 0
    n_baseline: int = 0
    n_pairs: int = 0
    delta: stats.Interval | None = None          # difference of means, BCa bootstrap: secondary figure
    p_better: stats.Interval | None = None       # P(variant better), Newcombe score interval (lost seeds worst)
    hedges_g: float = math.nan
    primary: stats.TestResult | None = None      # the deciding test
    robustness: stats.TestResult | None = None
    p_adjusted: float = math.nan
    mde: float = math.nan           # minimum detectable |difference| at this n, metric units
    seeds_needed: int | None = None
    spread: float = math.nan        # sd behind the power figures (pooled, or of the paired differences)
    driver_why: str = ""            # why the driving test is the one it is, in words for report.md
    notes: list[str] = field(default_factory=list)
    decision_ci: stats.Interval | None = None    # the deciding test inverted at decision_level (see rule 7)
    decision_level: float = math.nan             # alpha of the Holm step that decided it; ci level 1 - this
    holm_step: int = 0                           # that step, 1..m
    seeds_needed_basis: str = ""                 # "declared min_effect ..." or "post hoc: ..."
    invalid_checks: list[str] = field(default_factory=list)   # failed health checks behind "invalid"
    numbers_say: str = ""                        # for "invalid": the verdict the numbers alone would give
    integrity_checks: list[str] = field(default_factory=list)  # checks across runs behind the verdict
    #                                               (sweeper.analysis.integrity.effects: invalid, not comparable, ...)
    integrity_warnings: list[str] = field(default_factory=list)  # checks across runs that warn beside it


@dataclass
class Analysis:
    metric: str
    lower_is_better: bool
    options: DecisionOptions         # alpha, min_seeds, n_resamples, seed, confidence (sweeper.config.decision)
    arms: dict[str, Arm]
    comparisons: list[Comparison]
    min_effect: float | None = None
    role: str = "primary"            # or "secondary": its own Holm family, outside the decision
    design: str = "auto"             # experiment.design: auto | paired | independent
    scale: int = 0                   # the tests ran on values / 2^scale (sweeper.analysis.scaling): 0 but near 1e308

    @property
    def alpha(self) -> float:
        return self.options.alpha

    @property
    def min_seeds(self) -> int:
        return self.options.min_seeds

    @property
    def n_resamples(self) -> int:
        return self.options.n_resamples

    @property
    def seed(self) -> int:
        return self.options.seed

    @property
    def confidence(self) -> float:
        return self.options.confidence


def _arm(variant: str, rows: pd.DataFrame, column: str, n_resamples: int, seed: int, confidence: float) -> Arm:
    status = rows["status"].to_numpy(dtype=object)
    value = rows[column].to_numpy(dtype=float) if column in rows else np.full(len(rows), np.nan)
    finished = status == FINISHED
    usable = finished & np.isfinite(value)
    order = np.argsort(rows["seed"].to_numpy()[usable], kind="stable")
    values = value[usable][order]
    health = rows["health"].fillna("not checked").value_counts().to_dict() if "health" in rows else {}
    failed_checks = sorted({c for s in rows.get("health_failed", pd.Series(dtype=object)).dropna()
                            for c in str(s).split(",") if c})
    return Arm(variant, len(rows), int(np.sum(status == FAILED)),
               int(np.sum(status == DIVERGED) + np.sum(finished & ~usable)), int(np.isin(status, INCOMPLETE).sum()),
               rows["seed"].to_numpy()[usable][order], values, stats.describe(values),
               stats.bootstrap_mean(values, confidence, n_resamples, seed), health, failed_checks)


def _counts(arm: Arm) -> str:
    parts = [f"{arm.usable} of {arm.planned} seeds usable"]
    parts += [f"{k} {name}" for k, name in ((arm.failed, FAILED), (arm.diverged, DIVERGED),
                                              (arm.incomplete, "not finished")) if k]
    return ", ".join(parts)


def _fingerprint(rows: pd.DataFrame, seeds: np.ndarray, key: str) -> dict:
    column = f"fp_{key}"
    if column not in rows:
        return {}
    sub = rows[rows["seed"].isin(seeds) & (rows["status"] == FINISHED)]
    return dict(zip(sub["seed"].tolist(), sub[column].tolist()))


def _design(va: Arm, vb: Arm, rows_a: pd.DataFrame, rows_b: pd.DataFrame,
            min_seeds: int, declared: str = "auto") -> tuple[bool, np.ndarray, str]:
    common = np.intersect1d(va.seeds, vb.seeds)
    if common.size < min_seeds:
        return False, common, f"independent: only {common.size} seeds usable in both arms"
    if declared == "independent":
        return False, common, "independent: declared by experiment.design=independent"
    if declared == "paired":
        return True, common, ("paired by seed: declared by experiment.design=paired (the experiment says a seed "
                              "fixes the randomness both arms share)")
    if not any(f"fp_{key}" in rows_a for key in PAIRING_KEYS) and "fp_seed_streams" in rows_a:
        fa, fb = _fingerprint(rows_a, common, "seed_streams"), _fingerprint(rows_b, common, "seed_streams")
        shared = all("data_order" in str(fa.get(s) or "").split(",") and fa.get(s) == fb.get(s)
                     for s in common.tolist())
        if shared:
            return True, common, ("paired by seed: both arms drew their data order from the run's seed stream "
                                  "(run.generator('data_order')), so a seed gives both the same data order")
        return False, common, ("independent: the runs did not all draw their data order from the run's seed "
                               "stream (run.generator('data_order')) in both arms; experiment.design=paired "
                               "declares it when the seed fixes the shared randomness some other way")
    if not any(f"fp_{key}" in rows_a for key in PAIRING_KEYS):
        return False, common, ("independent: the runs recorded nothing that says a seed fixes their data order "
                               "(the run API records it when the data order comes from "
                               "run.generator('data_order'); experiment.design=paired declares it)")
    for key in PAIRING_KEYS:
        fa, fb = _fingerprint(rows_a, common, key), _fingerprint(rows_b, common, key)
        if not fa or any(fa.get(s) is None or fa.get(s) != fb.get(s) for s in common.tolist()):
            return False, common, (f"independent: {key} is missing or differs between arms for some seed, "
                                   "so a seed does not control the shared randomness")
    return True, common, "paired by seed: same data order and evaluation batches in both arms"


PAIRING_HINT = "suggestion: experiment.design=paired"   # a comparison note the terminal report repeats
PAIRING_R = 0.8                  # finals correlated this much by seed across arms: the seed fixes shared randomness


def _pairing_hint(va: Arm, vb: Arm, common: np.ndarray) -> str | None:
    """A comparison decided as independent whose arms' finals move together by seed (Pearson r >= PAIRING_R over
    at least 4 shared seeds): the seed likely fixes what both arms share (a Trainer's seed, Lightning's
    seed_everything: data order, init), which a paired test would use."""
    if common.size < 4:
        return None
    a = np.array([va.values[va.seeds == s][0] for s in common], dtype=float)
    b = np.array([vb.values[vb.seeds == s][0] for s in common], dtype=float)
    if not (np.isfinite(a).all() and np.isfinite(b).all()) or a.std() == 0 or b.std() == 0:
        return None
    r = float(np.corrcoef(a, b)[0, 1])
    if r < PAIRING_R:
        return None
    return (f"{PAIRING_HINT} ({va.variant} vs {vb.variant}): their finals move together by seed (Pearson r="
            f"{r:.2f} over {common.size} shared seeds), as when the seed fixes the data order or the init in both "
            f"arms (a Trainer's seed, Lightning's seed_everything); if it does, `design: paired` in the experiment "
            f"(+experiment.design=paired on the command line) compares them seed by seed, with more power; they "
            f"were compared as independent samples")


def _environment_notes(rows: pd.DataFrame) -> tuple[list[str], bool]:
    notes, corpus_differs = [], False
    usable = rows[rows["status"] == FINISHED]
    for key in ("corpus_hash",) + ENV_KEYS:
        column = f"fp_{key}"
        if column in usable:
            distinct = sorted({str(v) for v in usable[column].dropna()})
            if len(distinct) > 1:
                counts = usable.groupby(usable[column].astype(str))["variant"].agg(lambda s: ",".join(sorted(set(s))))
                notes.append(f"{key} differs across these runs: " +
                             "; ".join(f"{v} ({counts[v]})" for v in distinct))
                corpus_differs |= key == "corpus_hash"
    return notes, corpus_differs


@dataclass
class _Work:
    """What the decision interval needs once Holm has fixed the comparison's level."""
    kind: str = ""                   # "deciding" (sweeper.analysis.robust) | "worst-rank"
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    paired: bool = False
    worst: stats.WorstRank | None = None


def _compare(c: Comparison, va: Arm, vb: Arm, rows_a: pd.DataFrame, rows_b: pd.DataFrame, an: Analysis,
             family_size: int) -> _Work:
    c.n_variant, c.n_baseline = va.usable, vb.usable
    work = _Work()
    if va.ended < an.min_seeds or vb.ended < an.min_seeds:
        short = [arm for arm in (va, vb) if arm.ended < an.min_seeds]
        c.reason = "; ".join(f"{arm.variant}: {_counts(arm)}, need {an.min_seeds}" for arm in short)
        return work
    if va.lost or vb.lost:
        a, b, paired = va.values, vb.values, False
        w = stats.worst_rank_test(a, b, va.lost, vb.lost, an.lower_is_better, an.n_resamples, an.seed)
        work = _Work("worst-rank", a, b, False, w)
        c.design, c.primary = "independent", w.test
        c.robustness = (stats.welch_test(a, b) if min(a.size, b.size) >= 2 else
                        stats.TestResult("Welch t-test", math.nan, math.nan, note="needs at least 2 usable seeds"))
        c.robustness = stats.TestResult(c.robustness.name + " on the usable seeds only", c.robustness.statistic,
                                        c.robustness.pvalue, c.robustness.df, c.robustness.ci,
                                        note="for reference: survivors only, a biased sample; it decides nothing")
        lost = [f"{arm.variant} lost {arm.lost} of {arm.ended} ended seeds" for arm in (va, vb) if arm.lost]
        c.notes.append("; ".join(lost) + ": they count against the arm that lost them (ranked worse than every "
                       "usable seed); the survivors alone would be a biased sample")
        c.driver_why = ("seeds were lost (failed or diverged), so every ended seed enters an exact rank test in "
                        "which a lost seed ranks worst; a t-test on the survivors would compare biased samples")
        c.p_better = stats.prob_better_interval(w.p_better, va.ended, vb.ended, an.confidence)
        c.spread = _pooled_sd(a, b)
        n_a, n_b = a.size, b.size
    else:
        paired, common, why = _design(va, vb, rows_a, rows_b, an.min_seeds, an.design)
        c.notes.append(why)
        if paired:
            a = va.values[np.isin(va.seeds, common)]
            b = vb.values[np.isin(vb.seeds, common)]
            c.design, c.n_pairs = "paired", int(common.size)
        else:
            a, b = va.values, vb.values
            c.design = "independent"
            hint = _pairing_hint(va, vb, common) if an.design == "auto" else None
            if hint:
                c.notes.append(hint)
        n_a, n_b = a.size, b.size
        m = family_size
        permutation = robust.uses_permutation(paired, n_a, n_b, m, an.alpha)
        c.primary = robust.deciding_test(a, b, paired, m, an.alpha, an.n_resamples, an.seed, an.confidence)
        if permutation:
            c.robustness = robust.t_test(a, b, paired, an.confidence)
        else:
            c.robustness = (stats.sign_flip_test(a, b, n_resamples=an.n_resamples, seed=an.seed) if paired else
                            stats.permutation_test(a, b, n_resamples=an.n_resamples, seed=an.seed))
        zero = "zero spread" in c.primary.name
        if zero:                 # the t-test is undefined: the check is the plain exact test, as exact as the driver
            c.robustness = (stats.sign_flip_test(a, b, n_resamples=an.n_resamples, seed=an.seed) if paired else
                            stats.permutation_test(a, b, n_resamples=an.n_resamples, seed=an.seed))
        c.spread = robust.spread(a, b, paired, permutation)
        work = _Work("deciding", a, b, paired)
        rob = c.robustness
        c.driver_why = ("the seed fixes data order and evaluation batches in both arms (matching hashes), so "
                        "differences within a seed cancel that shared noise; " if paired else
                        "the arms do not share randomness seed by seed; ")
        if "zero spread" in c.primary.name:
            c.driver_why += "zero spread between seeds: the t statistic is undefined, the exact test is the valid one"
        elif permutation:
            c.driver_why += ("a permutation test keeps its level whatever the noise law (heavy tails, outlier seeds) "
                             f"and can reach p={robust.floor(paired, n_a, n_b):.3g} at this n, below alpha/m="
                             f"{an.alpha / m:.3g}; its robust statistic keeps the power that one outlier seed takes "
                             f"from a t-test; under normal noise it gives up 1-5 points of power at 5-10 seeds to "
                             f"the {rob.name}, the check beside it (part of that is the price of any exact test)")
        else:
            c.driver_why += (f"a t-test because no permutation test can go below p={robust.floor(paired, n_a, n_b):.3g}"
                             f" at this n, above alpha/m={an.alpha / m:.3g} (Holm over {m}), so it could never decide"
                             + ("; Student's t, not Welch's, with equal arms: more power at few seeds"
                                if not paired and n_a == n_b else ""))
        pb = stats.prob_better(a, b, an.lower_is_better)
        c.p_better = stats.prob_better_interval(pb, a.size, b.size, an.confidence)
    if min(a.size, b.size) >= 1:
        boot = stats.bootstrap_delta(a, b, paired=paired, lower_is_better=an.lower_is_better,
                                     confidence=an.confidence, n_resamples=an.n_resamples, seed=an.seed)
        c.delta, c.hedges_g = boot.delta, stats.hedges_g(a, b)
    else:
        c.delta = stats.Interval(math.nan, math.nan, math.nan, "none (an arm has no usable seed)",
                                 an.confidence, 0, an.seed)
    _power(c, an, family_size, paired, n_a, n_b)
    if c.primary is not None and "zero spread" in c.primary.name:
        # exact at zero spread: any difference is detected once the exact test can reach alpha / m, none before
        k = _seeds_to_beat_floor(c.design, an.alpha / family_size)
        c.mde = 0.0 if n_a >= k else math.inf
        c.seeds_needed = k
        c.seeds_needed_basis = "zero spread: the exact test's smallest p falls below alpha / m from this n on"
    return work


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    if a.size + b.size - 2 < 1 or min(a.size, b.size) < 1:
        return math.nan
    ss = (a.size - 1) * (a.var(ddof=1) if a.size > 1 else 0.0) + (b.size - 1) * (b.var(ddof=1) if b.size > 1 else 0.0)
    return float(math.sqrt(ss / (a.size + b.size - 2)))


def _power(c: Comparison, an: Analysis, family_size: int, paired: bool, n_a: int, n_b: int) -> None:
    """Minimum detectable effect (ratio form for unequal arms) and seeds per arm for 80% power."""
    power_alpha = an.alpha / family_size
    c.mde = stats.min_detectable_effect(n_a, power_alpha, 0.8, paired, n_b) * c.spread
    if an.min_effect is not None:
        target, c.seeds_needed_basis = float(scaling.down(an.min_effect, an.scale)), \
            f"at the declared smallest effect that matters, " \
                                                      f"min_effect = {an.min_effect:.4g}"
    else:
        target = abs(c.delta.estimate) if c.delta is not None else math.nan
        c.seeds_needed_basis = ("post hoc: at the observed difference (no experiment.min_effect declared; an "
                                "observed difference overstates the true one when it is noisy)")
    if not math.isfinite(c.spread) or math.isnan(target):
        c.seeds_needed = None
        return
    effect = target / c.spread if c.spread > 0 else (math.inf if target else 0.0)
    c.seeds_needed = stats.seeds_needed(effect, power_alpha, 0.8, paired)


def _seeds_to_beat_floor(design: str, threshold: float) -> int:
    """Smallest n per arm whose exact test floor (sign-flip or permutation) is below `threshold`."""
    n = 2
    floor = (lambda k: stats.smallest_p("signflip", k)) if design == "paired" else \
        (lambda k: stats.smallest_p("permutation", k, k))
    while floor(n) >= threshold:
        n += 1
    return n


def _holm_levels(p: list[float], alpha: float) -> list[tuple[float, int]]:
    """(alpha of the Holm step that decided each comparison, that step 1..m): a rejected comparison at sorted
    position k gets alpha / (m - k); the others get the level of the first step that failed."""
    m = len(p)
    order = np.argsort(np.asarray(p, dtype=float), kind="stable")
    out: list[tuple[float, int]] = [(alpha, 1)] * m
    stopped = None
    for k, i in enumerate(order):
        if stopped is None and p[i] >= alpha / (m - k):
            stopped = k
        step = k if stopped is None else stopped
        out[i] = (alpha / (m - step), step + 1)
    return out


def _decision_ci(c: Comparison, work: _Work, level: float, step: int, m: int, alpha: float,
                 n_resamples: int, seed: int) -> stats.Interval:
    conf = 1 - level
    label = f"Holm step {step} of {m}, level {conf:.4g}"
    if work.kind == "worst-rank":
        ci = stats.worst_rank_interval(work.worst, conf)
        return stats.Interval(ci.estimate, ci.low, ci.high, f"{ci.method}; {label}", conf, 0, 0)
    est, low, high = robust.decision_interval(work.a, work.b, work.paired, level, m, alpha, n_resamples, seed)
    return stats.Interval(est, low, high, f"{c.primary.name} inverted over shifts of {c.variant}; {label}", conf,
                          0, seed)


def _decide(c: Comparison, va: Arm, vb: Arm, an: Analysis, corpus_differs: bool) -> None:
    if c.primary is None:
        return
    p, d, ci, level = c.primary.pvalue, c.delta, c.decision_ci, c.decision_level
    m = len(an.comparisons)
    # the shift the deciding test estimates (it is the centre of its interval); the worst-rank test: the mean
    est = ci.estimate if not c.primary.name.endswith("worst-rank test") and math.isfinite(ci.estimate) else d.estimate
    direction = ("lower" if est < 0 else "higher") + f" {an.metric}"
    shown = (f"{ci.confidence:.4g} interval of the difference {ci.low:.4g} to {ci.high:.4g}, Holm step "
             f"{c.holm_step} of {m}")
    size = f"{abs(est):.4g}" if math.isfinite(est) else "more than the largest float (1.8e308)"
    effect = (f"{va.variant} has {direction} by {size} ({shown})" if not math.isnan(est)
              else f"{va.variant} has no usable seed ({shown})")
    test = f"{c.primary.name} p={p:.3g}, Holm-adjusted {c.p_adjusted:.3g}"
    rob = c.robustness
    rejected = c.p_adjusted < an.alpha
    if rob is not None and not math.isnan(rob.pvalue) and not math.isnan(rob.min_p):
        at_floor = rob.pvalue <= rob.min_p * (1 + 1e-9)
        holm_floor = min(1.0, rob.min_p * m)
        floor_note = (f"p={rob.pvalue:.3g} is the smallest p it can reach at this n" + (
            f"; Holm over {m} comparisons would lift it to {holm_floor:.3g}, above alpha, which is why it cannot "
            f"be the driving test" if holm_floor >= an.alpha else "")) if at_floor else ""
        if "zero spread" in c.primary.name:
            pass
        elif rob.min_p >= level:
            c.notes.append(f"the {rob.name} (p={rob.pvalue:.3g}) cannot go below p={rob.min_p:.3g} at this n, "
                           f"so it cannot confirm at this comparison's Holm level {level:.3g}; the verdict rests "
                           f"on the t-test" + (f"; {floor_note}" if at_floor else ""))
        elif at_floor:
            c.notes.append(floor_note)
        elif rejected and rob.pvalue >= level and rob.exact is not None:
            c.notes.append(f"caution: the {rob.name} does not confirm at the same Holm level (p={rob.pvalue:.3g} "
                           f">= {level:.3g}, although it could reach {rob.min_p:.3g}): look at the per-seed values "
                           f"for outliers")
    if rejected and rob is not None and rob.exact is None and not math.isnan(rob.pvalue) and rob.pvalue >= level \
            and not c.primary.name.endswith("worst-rank test"):
        c.notes.append(f"the {rob.name} alone would not reject at this Holm level (p={rob.pvalue:.3g} >= {level:.3g}):"
                       f" look at the per-seed values; an outlying seed widens a t-test, the {c.primary.name} "
                       "down-weights it and keeps its level for any noise law")
    if rejected:
        higher = ci.low > 0 if (ci.low > 0 or ci.high < 0) else est > 0
        c.verdict = "worse" if higher == an.lower_is_better else "better"
        if c.primary.name.endswith("worst-rank test"):
            effect = (f"{va.variant} ranks {'lower' if not higher else 'higher'} in {an.metric} counting lost "
                      f"seeds as worst ({shown}; P({va.variant} better) = {c.p_better.estimate:.2f})")
        c.reason = f"{effect}; {test} < {an.alpha}"
    elif "zero spread" in c.primary.name:
        c.verdict = "inconclusive"
        k = _seeds_to_beat_floor(c.design, an.alpha / m)
        c.reason = (f"{effect}; {test} >= {an.alpha}; the seeds show no spread, so the t-test is undefined and only "
                    f"the {c.primary.name} applies: it cannot go below p={c.primary.min_p:.3g} at this n; "
                    f"{k} seeds per arm could decide")
    else:
        c.verdict = "inconclusive"
        needed = (f"about {c.seeds_needed} seeds per arm would be needed {c.seeds_needed_basis}"
                  if c.seeds_needed else "no finite number of seeds detects a zero difference")
        c.reason = (f"{effect}; {test} >= {an.alpha}; at this n only differences of at least {c.mde:.3g} are "
                    f"detected with 80% power; {needed} (fix n before running more: adding seeds until p < alpha "
                    f"inflates false positives)")
    if c.primary.name.endswith("worst-rank test") and va.lost > vb.lost and c.verdict != "worse":
        c.reason += f"; {va.variant}'s lost seeds count against it: its survivors alone would be a biased sample"
    if corpus_differs:
        c.verdict = "inconclusive"
        c.reason = f"the arms were evaluated on different corpora (corpus_hash differs); {c.reason}"


def _health(c: Comparison, va: Arm, vb: Arm) -> None:
    """Rule 8: a health failure makes the comparison "invalid"; the numbers' verdict is kept in numbers_say."""
    if vb.health_failed:
        c.invalid_checks = list(vb.health_failed)
        why = (f"the baseline {vb.variant} failed health checks ({', '.join(vb.health_failed)}): no comparison "
               f"against it tests what it claims")
    elif va.health_failed:
        c.invalid_checks = list(va.health_failed)
        why = (f"health checks failed ({', '.join(va.health_failed)}): the comparison does not test what the "
               f"variant claims")
    else:
        return
    c.numbers_say = c.verdict
    c.reason = f"{why}; the numbers alone would say {c.verdict}: {c.reason}"
    c.verdict = "invalid"


def _arm_up(arm: Arm, k: int) -> None:
    """An arm computed on values / 2^k (sweeper.analysis.scaling) back in metric units."""
    if k:
        arm.values = np.ldexp(arm.values, k)
        arm.summary = {key: (v if key == "n" else scaling.up(v, k)) for key, v in arm.summary.items()}
        arm.mean_ci = scaling.up_interval(arm.mean_ci, k)


def _comparison_up(c: Comparison, k: int) -> None:
    """A comparison computed on values / 2^k back in metric units (unit-free figures are unchanged)."""
    if k:
        c.delta, c.decision_ci = scaling.up_interval(c.delta, k), scaling.up_interval(c.decision_ci, k)
        c.primary, c.robustness = scaling.up_test(c.primary, k), scaling.up_test(c.robustness, k)
        c.mde, c.spread = scaling.up(c.mde, k), scaling.up(c.spread, k)


def _column(runs: pd.DataFrame, metric: str) -> str | None:
    for column in (f"final_{metric}", metric):
        if column in runs:
            return column
    return None


def _workers(tasks: int) -> ThreadPoolExecutor:
    """Threads for independent arms and comparisons: every one has its own RNG (seeded as before), so the
    result is the same bits in any order; numpy releases the GIL in the resampling loops."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:                           # not Linux
        cores = os.cpu_count() or 1
    return ThreadPoolExecutor(max(1, min(cores, tasks, 8)), thread_name_prefix="verdict")


def analyze(runs: pd.DataFrame, metric: str, lower_is_better: bool, comparisons: list[tuple[str, str]],
            options: DecisionOptions, min_effect: float | None = None, role: str = "primary",
            design: str = "auto", untested: dict[tuple[str, str], str] | None = None) -> Analysis:
    """Arms for every variant in `runs`, and one Comparison per (variant, baseline) pair, Holm over the family,
    decided by `options` (alpha, min_seeds, n_resamples, seed, confidence: checked where they entered).
    `metric` is read from the final_<metric> column (or a column of that name, e.g. wall_time_s).
    `untested`: (variant, baseline) -> why no test is run on it (a check across runs found copies of one run, or
    no usable baseline); it enters Holm with p = 1, as an insufficient comparison does."""
    if min_effect is not None and not min_effect > 0:
        raise ValueError(f"min_effect={min_effect}: accepted values are positive differences in metric units")
    column = _column(runs, metric)
    k = scaling.exponent(runs[column]) if column is not None and len(runs) else 0   # values near the largest float
    if k:
        runs = runs.assign(**{column: scaling.down(runs[column], k)})
    an = Analysis(metric, lower_is_better, options, {}, [], min_effect, role, design, k)
    groups = {v: g for v, g in runs.groupby("variant", sort=False)} if len(runs) else {}
    for variant, baseline in comparisons:
        for name in (variant, baseline):
            if name not in groups:
                raise ValueError(f"comparison {variant} vs {baseline}: no runs of variant {name!r} "
                                 f"(variants present: {', '.join(groups) or 'none'})")
    with _workers(len(groups)) as pool:              # resampling at 1,000s of seeds: one core per arm/comparison
        arms = pool.map(lambda item: _arm(item[0], item[1], column or f"final_{metric}", an.n_resamples,
                                          an.seed, an.confidence), groups.items())
        an.arms.update((arm.variant, arm) for arm in arms)
        an.comparisons = [Comparison(variant, baseline) for variant, baseline in comparisons]

        def compare(c: Comparison) -> _Work:
            if untested and (c.variant, c.baseline) in untested:
                c.n_variant, c.n_baseline = an.arms[c.variant].usable, an.arms[c.baseline].usable
                c.reason = untested[(c.variant, c.baseline)]
                return _Work()
            if column is None:
                c.reason = f"no run recorded {metric} (no final_{metric} column)"
                return _Work()
            return _compare(c, an.arms[c.variant], an.arms[c.baseline], groups[c.variant], groups[c.baseline], an,
                            len(comparisons))

        works = list(pool.map(compare, an.comparisons))
    for arm in an.arms.values():
        _arm_up(arm, k)
    raw = [c.primary.pvalue if c.primary is not None and not math.isnan(c.primary.pvalue) else 1.0
           for c in an.comparisons]
    m = len(raw)
    for c, work, p_adj, (level, step) in zip(an.comparisons, works, stats.holm(raw) if raw else [],
                                             _holm_levels(raw, an.alpha)):
        c.p_adjusted = float(p_adj) if c.primary is not None else math.nan
        c.decision_level, c.holm_step = level, step
        if c.primary is not None and work.kind:
            c.decision_ci = _decision_ci(c, work, level, step, m, an.alpha, an.n_resamples, an.seed)
        _comparison_up(c, k)                     # metric units again before the reason quotes any figure
        env_notes, corpus_differs = _environment_notes(pd.concat([groups[c.variant], groups[c.baseline]]))
        c.notes.extend(env_notes)
        if c.decision_ci is not None:
            _decide(c, an.arms[c.variant], an.arms[c.baseline], an, corpus_differs)
        _health(c, an.arms[c.variant], an.arms[c.baseline])
    return an


def analyze_all(runs: pd.DataFrame, experiment, options: DecisionOptions,
                comparisons: list[tuple[str, str]] | None = None,
                untested: dict[tuple[str, str], str] | None = None) -> tuple[Analysis, dict[str, Analysis]]:
    """The primary Analysis (experiment.metric, its Holm family) and one Analysis per
    experiment.secondary_metrics entry (metric -> "lower" | "higher"), each its own Holm family: secondary
    metrics show the cost of a change and never enter the primary decision. `comparisons` defaults to every
    variant present against experiment.baseline; options and untested go to analyze."""
    if comparisons is None:
        present = list(dict.fromkeys(runs["variant"])) if len(runs) else []
        comparisons = [(v, experiment.baseline) for v in present if v != experiment.baseline] \
            if experiment.baseline else []
    design = getattr(experiment, "design", "auto")
    primary = analyze(runs, experiment.metric, experiment.lower_is_better, comparisons, options,
                      min_effect=experiment.min_effect, design=design, untested=untested)
    secondary = {}
    for metric, direction in dict(experiment.secondary_metrics or {}).items():
        if direction not in ("lower", "higher"):
            raise ValueError(f"secondary_metrics.{metric}={direction!r}: accepted values are lower, higher")
        secondary[metric] = analyze(runs, metric, direction == "lower", comparisons, options, role="secondary",
                                    design=design, untested=untested)
    return primary, secondary
