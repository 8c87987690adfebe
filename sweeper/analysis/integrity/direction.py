"""Metric direction (class 3 of the checks across runs): the decision metric's own curve moves against its
declared direction in most runs (a trend, rank correlation with the step, or a large move, in 2 of 3 runs: a
metric declared higher-is-better that falls as the model trains), or its name reads the other way (a loss
declared higher-is-better) and the experiment did not confirm it. Better and worse would be swapped.

    metric_direction(ev)   # [Finding] for the whole sweep

At plan time the name rule refuses the sweep (sweeper.config.integrity.check_direction); here it catches sweeps
planned without it (a Hydra multirun, --higher-is-better at report time) and metrics whose name says nothing.
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import MetricCurves, shown
from sweeper.config.integrity import implied_direction

MIN_POINTS = 4            # a curve with fewer points has no direction worth reading
TREND = 0.4               # Spearman correlation of the value with the step that counts as a trend, or
MOVE = 0.5                # a relative change from the first quarter to the last that does on its own
MOST = 2 / 3              # share of the runs (at least 2) whose curve moves against the declared direction


def _trends(ev: SweepEvidence):
    """Per usable run that logged the decision metric at >= MIN_POINTS steps: the Spearman correlation of its value
    with the step, and the means of its first and last quarter."""
    m = MetricCurves(ev, MIN_POINTS)
    if not len(m):
        return None
    order = np.lexsort((m.value, m.group))                      # by run, then value: the value's rank in its run
    rank = np.empty(len(order))
    rank[order] = np.arange(len(order)) - np.repeat(m.start, m.n) + 1
    d = rank - (m.pos + 1)
    n = m.n.astype(float)
    rho = 1 - 6 * m.per_run(d * d) / (n * (n * n - 1))
    quarter = np.maximum(1, m.n // 4)
    head = m.per_run(m.value, m.pos < quarter[m.group]) / quarter
    tail = m.per_run(m.value, m.pos >= (m.n - quarter)[m.group]) / quarter
    return rho, head, tail


def metric_direction(ev: SweepEvidence) -> list[Finding]:
    exp = ev.experiment
    declared = "lower" if exp.lower_is_better else "higher"
    implied = implied_direction(exp.metric)
    if implied is not None and implied != declared and not exp.confirm_direction:
        return [Finding(
            "metric_direction", (),
            f"{exp.metric} is declared {declared}-is-better; its name reads {implied}-is-better",
            f"better and worse are swapped if the direction is wrong: fix experiment.lower_is_better (or "
            f"--higher-is-better), or set experiment.confirm_direction=true if {declared} really is better",
            Effect.INVALID)]
    trends = _trends(ev)
    if trends is None or len(trends[0]) < 2:
        return []
    rho, head, tail = trends
    sign = 1 if exp.lower_is_better else -1                    # against: rising for a lower-is-better metric
    moved = np.abs(tail - head) >= MOVE * np.maximum(np.abs(head), np.abs(tail))
    against = ((sign * rho >= TREND) | moved) & (sign * (tail - head) > 0)
    if against.sum() < 2 or against.sum() < MOST * len(rho):
        return []
    return [Finding(
        "metric_direction", (),
        f"{exp.metric} is declared {declared}-is-better, but its logged curve "
        f"{'rises' if exp.lower_is_better else 'falls'} over training in {int(against.sum())} of {len(rho)} runs "
        f"(median {shown(float(np.median(head)))} in the first quarter, {shown(float(np.median(tail)))} in the last; "
        f"median rank correlation with the step {float(np.median(rho)):+.2f})",
        f"the training moves {exp.metric} against its declared direction, so better and worse would be swapped: "
        f"fix experiment.lower_is_better, or silence metric_direction with the reason if the training does not "
        f"optimise {exp.metric}",
        Effect.INVALID)]
