"""Metric direction (class 3 of the checks across runs), decided by the runs' own curves, never by the metric's name
alone: better and worse would be swapped if the declared direction is wrong.

    metric_direction(ev)   # [Finding] for the whole sweep
    read_directions(ev)    # per run: "inverted", "overfits", "agrees" or "flat" (and the objective it used)

A run's decision-metric curve that moves against the declared direction over training (a trend, rank correlation
with the step >= TREND, or a move of MOVE of its size, first quarter to last) is read against the run's own
training objective (a series of the run that is not an evaluation, whose name says which way is better: a loss, a
reward): early in training, while the objective improves, the metric improves too; whichever way the metric then
moved with the objective is its better direction. A metric that worsens while the objective improves, after
moving with it, is overfitting: healthy, never an inverted direction; so is one whose name reads the declared way
(a validation loss that rises from the first evaluation while the training loss falls: the same curves as an
inverted accuracy, told apart only by the name). Without an objective, the metric's own first
half decides (against the declaration from the start: inverted), unless its name reads the declared way.
Inverted in 2 of 3 runs (at least 2): invalid. A name that reads the other way with no curve to decide: a warning
(at plan time too, sweeper.config.integrity.check_direction).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.graph import curve_index
from sweeper.analysis.integrity.numbers.series import kind
from sweeper.analysis.integrity.runs import MetricCurves, shown, usable
from sweeper.config.integrity import implied_direction

MIN_POINTS = 4            # a curve with fewer points has no direction worth reading
TREND = 0.4               # Spearman correlation of the value with the step that counts as a trend, or
MOVE = 0.5                # a relative change from the first quarter to the last that does on its own
MOST = 2 / 3              # share of the runs (at least 2) whose curve is inverted
EARLY = 3                 # points at least in the early window (its first half)


def _trends(m: MetricCurves):
    """Per run of m: the Spearman correlation of its value with the step, and the means of its first and last
    quarter."""
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


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy())[0, 1])


def objective(ev: SweepEvidence) -> str | None:
    """The training objective the runs logged: a non-evaluation series whose name says which way is better,
    the one most runs logged (a name with train or loss in it first)."""
    counts = curve_index(ev).runs_per_metric()
    names = [n for n in counts if n != ev.experiment.metric and kind(n) == "train" and implied_direction(n)]
    if not names:
        return None
    return max(names, key=lambda n: (counts[n], "train" in n.lower(), "loss" in n.lower()))


def rows_of(ev: SweepEvidence, run_ids) -> np.ndarray:
    return pd.Index(ev.runs["run_id"]).get_indexer(list(run_ids))


def read_directions(ev: SweepEvidence) -> tuple[dict[str, str], str | None]:
    """run_id -> "inverted" | "overfits" | "agrees" | "flat" for every usable run with >= MIN_POINTS points of the
    decision metric, and the objective series used (None: none logged)."""
    exp = ev.experiment
    m = MetricCurves(ev, MIN_POINTS)
    goal = objective(ev)
    if not len(m):
        return {}, goal
    rho, head, tail = _trends(m)
    sign = 1 if exp.lower_is_better else -1                    # against: rising for a lower-is-better metric
    moved = np.abs(tail - head) >= MOVE * np.maximum(np.abs(head), np.abs(tail))
    against = ((sign * rho >= TREND) | moved) & (sign * (tail - head) > 0)
    withit = ((-sign * rho >= TREND) | moved) & (sign * (tail - head) < 0)
    out = {str(r): ("agrees" if w else "flat") for r, w in zip(m.ids, withit)}
    if not against.any():
        return out, goal
    steps = m.step
    goal_curves = None
    if goal:
        ci = curve_index(ev)
        mine = np.flatnonzero((ci.code == ci.names.index(goal)) & np.isin(ci.row, rows_of(ev, m.ids[against])))
        goal_curves = pd.DataFrame({"run_id": ev.runs["run_id"].to_numpy()[ci.row[mine]], "step": ci.step[mine],
                                    "value": ci.value[mine]})
    by_run = goal_curves.groupby("run_id", sort=False) if goal_curves is not None and len(goal_curves) else None
    goal_lower = implied_direction(goal) == "lower" if goal else None
    name_agrees = implied_direction(exp.metric) == ("lower" if exp.lower_is_better else "higher")
    for g in np.flatnonzero(against):
        s, e = m.start[g], m.start[g] + m.n[g]
        x, y = steps[s:e], m.value[s:e]
        early = slice(0, max(EARLY, len(y) // 2))
        verdict = None
        if by_run is not None and m.ids[g] in by_run.groups:
            o = by_run.get_group(m.ids[g]).sort_values("step")
            ox, oy = o["step"].to_numpy(dtype=float), o["value"].to_numpy(dtype=float)
            keep = np.isfinite(oy)
            inside = (x[early] >= ox[keep].min()) & (x[early] <= ox[keep].max()) if keep.sum() >= 2 else None
            if inside is not None and inside.sum() >= EARLY:
                together = _spearman(y[early][inside], np.interp(x[early][inside], ox[keep], oy[keep]))
                if abs(together) >= TREND:
                    metric_lower = goal_lower if together > 0 else not goal_lower
                    inverted = metric_lower != exp.lower_is_better and not name_agrees
                    verdict = "inverted" if inverted else "overfits"
        if verdict is None:
            early_against = sign * _spearman(x[early], y[early]) >= TREND
            verdict = "inverted" if early_against and not name_agrees else "overfits"
        out[str(m.ids[g])] = verdict
    return out, goal


def metric_direction(ev: SweepEvidence) -> list[Finding]:
    exp = ev.experiment
    declared = "lower" if exp.lower_is_better else "higher"
    read, goal = read_directions(ev)
    kinds = pd.Series(list(read.values()), dtype=object)
    inverted, agrees = int((kinds == "inverted").sum()), int((kinds == "agrees").sum())
    if inverted >= 2 and inverted >= MOST * len(read):
        m = MetricCurves(ev, MIN_POINTS)
        rho, head, tail = _trends(m)
        return [Finding(
            "metric_direction", (),
            f"{exp.metric} is declared {declared}-is-better, but its logged curve "
            f"{'rises' if exp.lower_is_better else 'falls'} over training in {inverted} of {len(read)} runs "
            f"(median {shown(float(np.median(head)))} in the first quarter, {shown(float(np.median(tail)))} in the "
            f"last; median rank correlation with the step {float(np.median(rho)):+.2f}"
            + (f"; it moves with the training objective {goal} from the start" if goal else "") + ")",
            f"the training moves {exp.metric} against its declared direction, so better and worse would be swapped: "
            f"fix experiment.lower_is_better, or silence metric_direction with the reason if the training does not "
            f"optimise {exp.metric}", Effect.INVALID)]
    implied = implied_direction(exp.metric)
    if implied is not None and implied != declared and not exp.confirm_direction and agrees < 2:
        return [Finding(
            "metric_direction", (),
            f"{exp.metric} is declared {declared}-is-better; its name reads {implied}-is-better, and no curve "
            f"decides ({len(read)} run(s) logged it at >= {MIN_POINTS} steps, {agrees} moving the declared way)",
            f"better and worse are swapped if the direction is wrong: fix experiment.lower_is_better (or "
            f"--higher-is-better), or set experiment.confirm_direction=true if {declared} really is better",
            Effect.WARN)]
    return []


def metric_direction_coverage(ev: SweepEvidence) -> Coverage:
    read, goal = read_directions(ev)
    if not read:
        return Coverage("metric_direction", f"{int(usable(ev).sum())} usable run(s), none logged "
                                            f"{ev.experiment.metric} at >= {MIN_POINTS} steps: the name alone, "
                                            f"not checked", False)
    counts = pd.Series(list(read.values())).value_counts()
    parts = [f"{int(counts.get(k, 0))} {what}" for k, what in (
        ("agrees", "move the declared way"), ("flat", "show no trend"),
        ("overfits", f"worsen late while {goal or 'training'} improves: overfitting, not an inverted direction"),
        ("inverted", "move against it from the start")) if counts.get(k, 0)]
    return Coverage("metric_direction", f"{len(read)} run(s) logged {ev.experiment.metric} at >= {MIN_POINTS} steps"
                                        f" (objective: {goal or 'none logged'}): " + "; ".join(parts), True)
