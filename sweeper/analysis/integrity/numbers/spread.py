"""No spread to compare (class 8 of the checks across runs): every usable run of every arm at one value (a
saturated metric such as accuracy 1.0 everywhere, or one computed on the wrong tensor). No test can tell arms apart
on a metric that does not move.

    no_spread(ev)          # [Finding] when the sweep's usable finals of the decision metric are all one value
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import close, metric_column, shown, usable
from sweeper.config.integrity import implied_direction


def _bound(value: float, metric: str) -> str:
    """Why the value is where it is: the bound of a rate-like metric, or nothing known."""
    if implied_direction(metric) == "higher" and value in (1.0, 100.0):
        return " (the metric's upper bound)"
    if value == 0.0:
        return " (zero: the metric's lower bound)" if implied_direction(metric) == "lower" else " (zero)"
    return ""


def no_spread(ev: SweepEvidence) -> list[Finding]:
    ok = usable(ev)
    rows = ev.runs[ok]
    if len(rows) < 2 or rows["variant"].nunique() < 2:
        return []
    values = rows[metric_column(ev)].to_numpy(dtype=float)
    if not close(values, np.full_like(values, values[0])):
        return []
    metric = ev.experiment.metric
    return [Finding(
        "no_spread", (),
        f"{len(rows)} usable runs of {rows['variant'].nunique()} arms: final {metric} {shown(values[0])} in every "
        f"one{_bound(float(values[0]), metric)}",
        f"{metric} has no spread across seeds or arms (saturated, or computed on the wrong tensor): no comparison "
        f"can tell the arms apart; evaluate on harder or more data, or decide on a metric with room "
        f"(experiment.metric)",
        Effect.INVALID)]


def no_spread_coverage(ev: SweepEvidence) -> Coverage:
    rows = ev.runs[usable(ev)]
    if len(rows) < 2 or rows["variant"].nunique() < 2:
        return Coverage("no_spread", "fewer than 2 usable runs over 2 arms: not checked", False)
    values = rows[metric_column(ev)].to_numpy(dtype=float)
    return Coverage("no_spread", f"{len(rows)} usable finals of {ev.experiment.metric} over "
                                 f"{rows['variant'].nunique()} arms, {len(np.unique(values))} distinct", True)
