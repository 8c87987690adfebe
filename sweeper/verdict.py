"""A comparison family -> one verdict per comparison, with its reason. Numbers come from sweeper.stats.

    from sweeper.verdict import analyze
    a = analyze(runs, metric="val_loss", lower_is_better=True,
                comparisons=[("nope", "rope"), ("rope_frozen_qk", "rope")])
    for c in a.comparisons: print(c.variant, c.verdict, c.reason)

Decision rule, fixed before looking at the data (report.md repeats it):
1. Outcome of each planned run: usable = finished with a finite metric; failed; diverged (status diverged, or
   finished with a non-finite or absent metric); incomplete = missing, pending, running, interrupted, unknown.
   Nothing is dropped: every count is shown, and lost (failed + diverged) seeds count against their variant.
2. Either arm with fewer than `min_seeds` usable seeds -> "insufficient": no test, no guess.
3. Design: paired when every seed usable in both arms has the same data_order_hash and eval_batches_hash in
   both (the seed then fixes data order and evaluation batches) and there are >= min_seeds such pairs;
   otherwise independent.
4. Driving test: paired t-test (paired design) or Welch t-test (independent). Why a t-test: at the seed counts
   sweeps use, exact rank/permutation tests have a floor on p (4 vs 4: 2/70 = 0.029; 4 pairs sign-flip:
   2/16 = 0.125) that Holm lifts above alpha, so they could never decide whatever the effect; the t-tests reach
   small p when effects are large relative to seed noise, at the price of assuming roughly normal per-seed
   means. When the t statistic is undefined (zero variance), the exact permutation test drives instead.
5. Robustness check: the permutation test (independent) or sign-flip test (paired), exact at small n, with
   its smallest reachable p stated. When it could reach alpha but does not, the comparison carries a caution.
6. Multiplicity: Holm over the whole planned family (every comparison, insufficient ones entering with p = 1).
7. Verdict: Holm-adjusted p < alpha -> "better" or "worse" by the sign of the difference in the metric's
   direction; otherwise "inconclusive", with the minimum detectable effect at the current n and the seeds per
   arm needed for 80% power at the observed spread (two-sided t-test at alpha / m, Holm's strictest step).
   "better" becomes "inconclusive" when the variant lost more seeds (failed + diverged) than the arm it is
   compared with (the survivors would be a biased sample), and any verdict becomes "inconclusive" when the
   arms were evaluated on different corpora (corpus_hash). Other fingerprint differences (versions, device,
   threads, determinism) are listed with the comparison, never pooled silently.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import sweeper.stats as stats
from sweeper.results import MISSING, UNKNOWN
from sweeper.run.rundir import Status

FINISHED, FAILED, DIVERGED = Status.FINISHED.value, Status.FAILED.value, Status.DIVERGED.value
INCOMPLETE = (MISSING, Status.PENDING.value, Status.RUNNING.value, Status.INTERRUPTED.value, UNKNOWN)
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
    delta: stats.Interval | None = None
    p_better: stats.Interval | None = None
    hedges_g: float = math.nan
    primary: stats.TestResult | None = None
    robustness: stats.TestResult | None = None
    p_adjusted: float = math.nan
    mde: float = math.nan           # minimum detectable |difference| at this n, metric units
    seeds_needed: int | None = None
    spread: float = math.nan        # sd behind the power figures (pooled, or of the paired differences)
    driver_why: str = ""            # why the driving test is the one it is, in words for report.md
    notes: list[str] = field(default_factory=list)


@dataclass
class Analysis:
    metric: str
    lower_is_better: bool
    alpha: float
    min_seeds: int
    n_resamples: int
    seed: int
    confidence: float
    arms: dict[str, Arm]
    comparisons: list[Comparison]


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
            min_seeds: int) -> tuple[bool, np.ndarray, str]:
    common = np.intersect1d(va.seeds, vb.seeds)
    if common.size < min_seeds:
        return False, common, f"independent: only {common.size} seeds usable in both arms"
    for key in PAIRING_KEYS:
        fa, fb = _fingerprint(rows_a, common, key), _fingerprint(rows_b, common, key)
        if not fa or any(fa.get(s) is None or fa.get(s) != fb.get(s) for s in common.tolist()):
            return False, common, (f"independent: {key} is missing or differs between arms for some seed, "
                                   "so a seed does not control the shared randomness")
    return True, common, "paired by seed: same data order and evaluation batches in both arms"


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


def _compare(c: Comparison, va: Arm, vb: Arm, rows_a: pd.DataFrame, rows_b: pd.DataFrame, an: Analysis,
             family_size: int) -> None:
    c.n_variant, c.n_baseline = va.usable, vb.usable
    if va.usable < an.min_seeds or vb.usable < an.min_seeds:
        short = [arm for arm in (va, vb) if arm.usable < an.min_seeds]
        c.reason = "; ".join(f"{arm.variant}: {_counts(arm)}, need {an.min_seeds}" for arm in short)
        return
    paired, common, why = _design(va, vb, rows_a, rows_b, an.min_seeds)
    c.notes.append(why)
    if paired:
        a = va.values[np.isin(va.seeds, common)]
        b = vb.values[np.isin(vb.seeds, common)]
        left_out = va.usable + vb.usable - 2 * common.size
        if left_out:
            c.notes.append(f"{left_out} seed(s) usable in only one arm are left out of the paired analysis")
        c.design, c.n_pairs = "paired", int(common.size)
        c.primary = stats.paired_t_test(a, b, confidence=an.confidence)
        c.robustness = stats.sign_flip_test(a, b, n_resamples=an.n_resamples, seed=an.seed)
        c.spread = float(np.std(a - b, ddof=1))
    else:
        a, b = va.values, vb.values
        c.design = "independent"
        c.primary = stats.welch_test(a, b, confidence=an.confidence)
        c.robustness = stats.permutation_test(a, b, n_resamples=an.n_resamples, seed=an.seed)
        c.spread = float(math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1))
                                   / (a.size + b.size - 2)))
    boot = stats.bootstrap_delta(a, b, paired=paired, lower_is_better=an.lower_is_better,
                                 confidence=an.confidence, n_resamples=an.n_resamples, seed=an.seed)
    c.delta, c.p_better, c.hedges_g = boot.delta, boot.p_better, stats.hedges_g(a, b)
    rob, m = c.robustness, family_size
    c.driver_why = ("the seed fixes data order and evaluation batches in both arms (matching hashes), so differences "
                    "within a seed cancel that shared noise" if paired else
                    "the arms do not share randomness seed by seed; Welch because variances may differ between "
                    "variants (scipy's default, Student's t, assumes they do not)")
    c.driver_why += (f"; a t-test because the {rob.name} cannot go below p={rob.min_p:.3g} at this n, "
                     f"{min(1.0, rob.min_p * m):.3g} after Holm over {m}, so it could never decide at alpha={an.alpha}"
                     if rob.min_p * m >= an.alpha else
                     f"; a t-test is the pre-specified driver, the {rob.name} (able to reach alpha at this n) "
                     "checks it")
    if math.isnan(c.primary.pvalue):
        c.notes.append(f"{c.primary.name} {c.primary.note}; the {c.robustness.name} drives the verdict instead")
        c.driver_why = "zero spread between seeds: the t statistic is undefined, the exact test is the valid one"
        c.primary, c.robustness = c.robustness, c.primary
    power_alpha = an.alpha / family_size
    n = c.n_pairs if paired else min(a.size, b.size)
    c.mde = stats.min_detectable_effect(n, power_alpha, 0.8, paired) * c.spread
    effect = abs(c.delta.estimate) / c.spread if c.spread > 0 else (math.inf if c.delta.estimate else 0.0)
    c.seeds_needed = stats.seeds_needed(effect, power_alpha, 0.8, paired)


def _seeds_to_beat_floor(design: str, threshold: float) -> int:
    """Smallest n per arm whose exact test floor (sign-flip or permutation) is below `threshold`."""
    n = 2
    floor = (lambda k: stats.smallest_p("signflip", k)) if design == "paired" else \
        (lambda k: stats.smallest_p("permutation", k, k))
    while floor(n) >= threshold:
        n += 1
    return n


def _better(delta: float, lower_is_better: bool) -> bool:
    return delta < 0 if lower_is_better else delta > 0


def _decide(c: Comparison, va: Arm, vb: Arm, an: Analysis, corpus_differs: bool) -> None:
    if c.primary is None:
        return
    p, d = c.primary.pvalue, c.delta
    direction = ("lower" if d.estimate < 0 else "higher") + f" {an.metric}"
    effect = (f"{va.variant} has {direction} by {abs(d.estimate):.4g} "
              f"({an.confidence:.0%} CI of the difference {d.low:.4g} to {d.high:.4g})")
    test = f"{c.primary.name} p={p:.3g}, Holm-adjusted {c.p_adjusted:.3g}"
    rob = c.robustness
    if rob is not None and not math.isnan(rob.pvalue) and not math.isnan(rob.min_p):
        if rob.min_p >= an.alpha:
            c.notes.append(f"the {rob.name} (p={rob.pvalue:.3g}) cannot go below p={rob.min_p:.3g} at this n, "
                           f"so it cannot confirm at alpha={an.alpha}; the verdict rests on the t-test")
        elif rob.pvalue >= an.alpha and c.p_adjusted < an.alpha:
            c.notes.append(f"caution: the {rob.name} does not confirm (p={rob.pvalue:.3g} although it could reach "
                           f"{rob.min_p:.3g}): look at the per-seed values for outliers")
        elif rob.pvalue <= rob.min_p * (1 + 1e-9):
            holm_floor = rob.min_p * len(an.comparisons)
            c.notes.append(f"the {rob.name} p={rob.pvalue:.3g} is the smallest p it can reach at this n" + (
                f"; Holm over {len(an.comparisons)} comparisons would lift it to {min(1.0, holm_floor):.3g}, "
                f"above alpha, which is why it cannot be the driving test" if holm_floor >= an.alpha else ""))
    if c.p_adjusted < an.alpha and d.estimate != 0:
        c.verdict = "better" if _better(d.estimate, an.lower_is_better) else "worse"
        c.reason = f"{effect}; {test} < {an.alpha}"
        if c.verdict == "better" and va.lost > vb.lost:
            c.verdict = "inconclusive"
            c.reason = (f"better on its usable seeds, but it lost {va.lost} of {va.planned} seeds (failed or "
                        f"diverged) against {vb.lost} of {vb.planned} for {vb.variant}: the survivors are a "
                        f"biased sample; {test}")
    elif c.primary.exact is not None:        # zero spread: only the exact test applies, and its floor binds
        c.verdict = "inconclusive"
        k = _seeds_to_beat_floor(c.design, an.alpha / len(an.comparisons))
        c.reason = (f"{effect}; {test} >= {an.alpha}; the seeds show no spread, so the t-test is undefined and only "
                    f"the {c.primary.name} applies: it cannot go below p={c.primary.min_p:.3g} at this n; "
                    f"{k} seeds per arm could decide")
    else:
        c.verdict = "inconclusive"
        needed = (f"the observed difference would need about {c.seeds_needed} seeds per arm"
                  if c.seeds_needed else "no finite number of seeds detects a zero difference")
        c.reason = (f"{effect}; {test} >= {an.alpha}; at this n only differences of at least {c.mde:.3g} are "
                    f"detected with 80% power, {needed} (fix n before running more: adding seeds until p < alpha "
                    f"inflates false positives)")
    if corpus_differs:
        c.verdict = "inconclusive"
        c.reason = f"the arms were evaluated on different corpora (corpus_hash differs); {c.reason}"
    if va.lost > vb.lost:
        c.notes.append(f"{va.variant} lost {va.lost} of {va.planned} seeds (failed or diverged) vs {vb.lost}")


def analyze(runs: pd.DataFrame, metric: str, lower_is_better: bool, comparisons: list[tuple[str, str]],
            alpha: float = 0.05, min_seeds: int = 3, n_resamples: int = 10_000, seed: int = 0,
            confidence: float = 0.95) -> Analysis:
    """Arms for every variant in `runs`, and one Comparison per (variant, baseline) pair, Holm over the family."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha}: accepted values are between 0 and 1, e.g. 0.05")
    if min_seeds < 2:
        raise ValueError(f"min_seeds={min_seeds}: a t-test needs at least 2 seeds per arm")
    column = f"final_{metric}"
    an = Analysis(metric, lower_is_better, alpha, min_seeds, n_resamples, seed, confidence, {}, [])
    groups = {v: g for v, g in runs.groupby("variant", sort=False)} if len(runs) else {}
    for variant, rows in groups.items():
        an.arms[variant] = _arm(variant, rows, column, n_resamples, seed, confidence)
    for variant, baseline in comparisons:
        for name in (variant, baseline):
            if name not in an.arms:
                raise ValueError(f"comparison {variant} vs {baseline}: no runs of variant {name!r} "
                                 f"(variants present: {', '.join(an.arms) or 'none'})")
        c = Comparison(variant, baseline)
        _compare(c, an.arms[variant], an.arms[baseline], groups[variant], groups[baseline], an, len(comparisons))
        an.comparisons.append(c)
    raw = [c.primary.pvalue if c.primary is not None else 1.0 for c in an.comparisons]
    for c, p_adj in zip(an.comparisons, stats.holm(raw) if raw else []):
        c.p_adjusted = float(p_adj) if c.primary is not None else math.nan
        env_notes, corpus_differs = _environment_notes(pd.concat([groups[c.variant], groups[c.baseline]]))
        c.notes.extend(env_notes)
        _decide(c, an.arms[c.variant], an.arms[c.baseline], an, corpus_differs)
    return an
