"""Metric direction (class 3 of the checks across runs): the decision metric's own curve moves against its
declared direction in most runs (a metric declared higher-is-better that falls as the model trains), or its name
reads the other way (a loss declared higher-is-better) and the experiment did not confirm it. Better and worse
would be swapped.

    metric_direction(ev)   # [Finding] for the whole sweep

At plan time the name rule refuses the sweep (sweeper.config.integrity.check_direction); here it catches sweeps
planned without it (a Hydra multirun, --higher-is-better at report time) and metrics whose name says nothing.
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import shown, usable
from sweeper.config.integrity import implied_direction

MIN_POINTS = 3            # a curve with fewer points has no direction worth reading
MOVED = 1e-3              # relative change between the first and last quarter that counts as moving


def _ends(ev: SweepEvidence):
    """Per usable run that logged the decision metric at >= MIN_POINTS steps: mean of its first and last quarter."""
    c = ev.curves
    if not len(c):
        return None
    c = c[(c["metric"] == ev.experiment.metric) & c["run_id"].isin(ev.runs.loc[usable(ev), "run_id"])]
    c = c[np.isfinite(c["value"].to_numpy(dtype=float))]
    if not len(c):
        return None
    n = c.groupby("run_id", sort=False)["value"].transform("size").to_numpy()
    rank = c.groupby("run_id", sort=False).cumcount().to_numpy()
    quarter = np.maximum(1, n // 4)
    keep = n >= MIN_POINTS
    head = c[keep & (rank < quarter)].groupby("run_id", sort=False)["value"].mean()
    tail = c[keep & (rank >= n - quarter)].groupby("run_id", sort=False)["value"].mean()
    return head, tail.loc[head.index]


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
    ends = _ends(ev)
    if ends is None or len(ends[0]) < 2:
        return []
    head, tail = (x.to_numpy(dtype=float) for x in ends)
    moved = np.abs(tail - head) > MOVED * np.maximum(np.maximum(np.abs(head), np.abs(tail)), 1e-12)
    against = moved & ((tail > head) if exp.lower_is_better else (tail < head))
    if against.sum() < 2 or against.sum() <= len(head) / 2:
        return []
    return [Finding(
        "metric_direction", (),
        f"{exp.metric} is declared {declared}-is-better, but its logged curve "
        f"{'rises' if exp.lower_is_better else 'falls'} over training in {int(against.sum())} of {len(head)} runs "
        f"(median {shown(float(np.median(head)))} at the start, {shown(float(np.median(tail)))} at the end)",
        f"the training moves {exp.metric} against its declared direction, so better and worse would be swapped: "
        f"fix experiment.lower_is_better, or silence metric_direction with the reason if the training does not "
        f"optimise {exp.metric}",
        Effect.INVALID)]
