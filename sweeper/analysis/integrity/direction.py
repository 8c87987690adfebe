"""Metric direction (class 3 of the checks across runs): the decision metric's own curve moves against its
declared direction in most runs (a clear trend, rank correlation with the step, in 3 of 4 runs: a metric declared
higher-is-better that falls as the model trains), or its name reads the other way (a loss declared
higher-is-better) and the experiment did not confirm it. Better and worse would be swapped.

    metric_direction(ev)   # [Finding] for the whole sweep

At plan time the name rule refuses the sweep (sweeper.config.integrity.check_direction); here it catches sweeps
planned without it (a Hydra multirun, --higher-is-better at report time) and metrics whose name says nothing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import shown, usable
from sweeper.config.integrity import implied_direction

MIN_POINTS = 4            # a curve with fewer points has no direction worth reading
TREND = 0.5               # Spearman correlation of the value with the step that counts as a trend
MOST = 0.75               # share of the runs (at least 2) whose curve trends against the declared direction


def _trends(ev: SweepEvidence):
    """Per usable run that logged the decision metric at >= MIN_POINTS steps: the Spearman correlation of its value
    with the step, and the means of its first and last quarter."""
    c = ev.curves
    if not len(c):
        return None
    c = c[(c["metric"] == ev.experiment.metric) & c["run_id"].isin(ev.runs.loc[usable(ev), "run_id"])]
    c = c[np.isfinite(c["value"].to_numpy(dtype=float))]
    by = c.groupby("run_id", sort=False)
    n = by["value"].transform("size").to_numpy()
    c = c[n >= MIN_POINTS]
    if not len(c):
        return None
    by = c.groupby("run_id", sort=False)
    n = by["value"].transform("size").to_numpy(dtype=float)
    d = by["value"].rank().to_numpy() - (by.cumcount().to_numpy() + 1)       # curves are sorted by step
    rho = 1 - 6 * pd.Series(d * d, index=c.index).groupby(c["run_id"], sort=False).sum() / \
        pd.Series(n * (n * n - 1), index=c.index).groupby(c["run_id"], sort=False).first()
    rank, quarter = by.cumcount().to_numpy(), np.maximum(1, n // 4)
    head = c[rank < quarter].groupby("run_id", sort=False)["value"].mean()
    tail = c[rank >= n - quarter].groupby("run_id", sort=False)["value"].mean()
    return rho, head.loc[rho.index], tail.loc[rho.index]


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
    rho, head, tail = (x.to_numpy(dtype=float) for x in trends)
    sign = 1 if exp.lower_is_better else -1                    # against: rising for a lower-is-better metric
    against = (sign * rho >= TREND) & (sign * (tail - head) > 0)
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
