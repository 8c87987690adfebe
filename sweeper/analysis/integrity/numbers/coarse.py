"""Metric resolution (check coarse_metric): the decision metric's finals sit on a grid (an accuracy on 20 examples
moves in steps of 0.05) whose step is large against the seeds' own spread, so ties decide, and no number of seeds
resolves a difference below one step. Such a sweep must never be promised "about 16 seeds per arm would be
needed".

    coarse_metric(ev)          # [Finding] (a warning on every arm) naming the grid, its step and the distinct values
    unpromise(findings, an)    # after the verdicts: an inconclusive comparison on a coarse metric gets no seeds
                               # estimate, the grid named instead

The grid's step: the float gcd of the gaps between the distinct finals (each distinct run once: copies are
seeds_no_effect's). Coarse: step >= STEP_OF_SPREAD x the pooled within-arm sd (or every arm constant while arms
differ). Ties are not required: with 4 seeds an arm, a grid of step 0.6 sd leaves 5 distinct values over 8 runs
(a loss printed to one decimal, an accuracy on 6 examples), yet neighbouring values tie as often as they differ.
Where seeds of one arm already tie (at least TIED_SHARE of the runs repeat a value of their own arm), a step of
STEP_WITH_TIES x the sd is enough: the ties are the grid biting (an accuracy on 20 examples, step 0.05 against a
seed sd of 0.11, one arm's seeds on 2 values); a continuous metric never ties, a fine grid rarely, and not with a
step that large. Ties across arms are no such evidence (two close arms meet on the grid).
The seed sd needs at least 2 arms with 2 or more distinct usable runs each (one arm's 3 seeds against a lone run
of the other judge nothing: that comparison is insufficient anyway).
An accuracy on 1,000 examples (step 0.001, spread 0.01), a loss printed to 4 decimals, are not coarse.
Torch-free.
"""
from __future__ import annotations

import math

import numpy as np

from sweeper.analysis import scaling
from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.graph import run_graph
from sweeper.analysis.integrity.runs import metric_column, shown, usable

STEP_OF_SPREAD = 0.5       # a step at least half the seed sd: neighbouring values tie most of the time
STEP_WITH_TIES = 0.25      # a quarter of the sd, when the runs already tie:
TIED_SHARE = 0.25          # ... at least this share of the runs repeat a value of their own arm
MIN_RUNS = 4               # distinct usable runs, over at least 2 arms


def grid_step(values: np.ndarray) -> float:
    """The largest step s with every value on k*s + c (to 1e-6 of the range); 0.0 for one value."""
    v = np.unique(np.asarray(values, dtype=float))
    if len(v) < 2:
        return 0.0
    tol = 1e-6 * float(v[-1] - v[0])
    step = 0.0
    for gap in np.diff(v):
        a, b = max(step, float(gap)), min(step, float(gap))
        while b > tol:
            a, b = b, a % b
            if a - b <= tol:            # a remainder within rounding of the divisor: it divides
                b = 0.0
        step = a
    return step


def _arms(ev: SweepEvidence) -> dict[str, np.ndarray]:
    """Each arm's usable finals, one per distinct run (copies of one run counted once)."""
    g = run_graph(ev)
    ok = usable(ev).to_numpy()
    values = ev.runs[metric_column(ev)].to_numpy(dtype=float) if ok.any() else np.zeros(len(ev.runs))
    out = {}
    for variant, where in ev.runs.groupby("variant", sort=False).indices.items():
        rows = [int(i) for i in where if ok[i]]
        out[str(variant)] = values[g.representatives(rows)].astype(float)
    return out


def _read(ev: SweepEvidence) -> tuple[float, float, int, int, int] | None:
    """(step, pooled within-arm sd, distinct values, runs, runs repeating a value of their own arm) when the sweep
    can be judged, else None."""
    arms = {v: x for v, x in _arms(ev).items() if len(x)}
    values = np.concatenate(list(arms.values())) if arms else np.zeros(0)
    k = scaling.exponent(values)        # finals near 1e308: ranges, sums and squares on values / 2^k (exact)
    arms = {v: scaling.down(x, k) for v, x in arms.items()}
    values = scaling.down(values, k)
    if sum(len(x) >= 2 for x in arms.values()) < 2 or len(values) < MIN_RUNS or np.ptp(values) == 0:
        return None
    dof = sum(len(x) - 1 for x in arms.values())
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in arms.values())
    sd = math.sqrt(ss / dof) if dof > 0 else math.nan
    tied = sum(len(x) - len(np.unique(x)) for x in arms.values())
    return scaling.up(grid_step(values), k), scaling.up(sd, k), len(np.unique(values)), len(values), tied


def coarse(step: float, sd: float, tied: int, runs: int) -> bool:
    """A grid step large against the seed sd, or a quarter of it where the grid already ties seeds of one arm (an
    accuracy on 20 examples: step 0.05 against an sd of 0.11, one arm's 4 seeds on 2 values). Ties across arms are
    no such evidence: two close arms meet on the grid."""
    if not step > 0:
        return False
    return sd == 0 or step >= STEP_OF_SPREAD * sd or (tied >= TIED_SHARE * runs and step >= STEP_WITH_TIES * sd)


def coarse_metric(ev: SweepEvidence) -> list[Finding]:
    read = _read(ev)
    if read is None:
        return []
    step, sd, distinct, runs, tied = read
    if not coarse(step, sd, tied, runs):
        return []
    metric = ev.experiment.metric
    spread = f"seed sd within arms {shown(sd)}" if sd > 0 else "no spread within any arm"
    arms = tuple(v for v, x in _arms(ev).items() if len(x))     # every arm's comparisons: named beside each verdict
    return [Finding(
        "coarse_metric", arms,
        f"final {metric} takes {distinct} distinct values over {runs} runs, on a grid of step {shown(step)} "
        f"({spread})",
        f"{metric} is too coarse for this comparison: neighbouring values tie, and no number of seeds resolves a "
        f"difference below one step ({shown(step)}); evaluate on more examples (the step of an accuracy is 1 / "
        f"examples) or decide on a finer metric (a loss)", Effect.WARN)]


def unpromise(findings: list[Finding], analysis) -> None:
    """Drop the seeds estimate of every inconclusive comparison of `analysis` (a verdict.Analysis) on a metric a
    coarse_metric finding names; say why instead."""
    coarse = [f for f in findings if f.check == "coarse_metric" and f.silenced is None]
    if not coarse or analysis.metric != analysis_metric(findings, analysis):
        return
    for c in analysis.comparisons:
        if c.verdict != "inconclusive" or not c.seeds_needed:
            continue
        promise = f"about {c.seeds_needed} seeds per arm would be needed {c.seeds_needed_basis}"
        c.reason = c.reason.replace(promise, f"no number of seeds can be promised: {coarse[0].evidence} "
                                             f"(coarse_metric)")
        c.seeds_needed = None


def analysis_metric(findings: list[Finding], analysis) -> str:
    """The metric the coarse_metric findings are about (the decision metric: its evidence names it)."""
    for f in findings:
        if f.check == "coarse_metric" and f.evidence.startswith(f"final {analysis.metric} "):
            return analysis.metric
    return ""


def coarse_metric_coverage(ev: SweepEvidence) -> Coverage:
    read = _read(ev)
    if read is None:
        return Coverage("coarse_metric", f"fewer than {MIN_RUNS} distinct usable runs, fewer than 2 arms with 2 "
                                         f"or more, or no spread: not checked", False)
    step, sd, distinct, runs, _ = read
    return Coverage("coarse_metric", f"{distinct} distinct finals over {runs} runs; grid step {shown(step)} "
                                     f"against the seed sd {shown(sd)}", True)
