"""Metric direction (class 3 of the checks across runs), decided by the runs' own curves, never by the metric's name
alone: better and worse would be swapped if the declared direction is wrong.

    metric_direction(ev)   # [Finding] for the whole sweep
    read_directions(ev)    # per run: "inverted", "overfits", "agrees" or "flat" (and the objective it used)

The run's own training objective decides (a series of the run that is not an evaluation, whose name says which
way is better: a loss, a reward): the increments of the decision metric and of the objective, step to step, are
correlated (uncentred, so the largest moves of training weigh most). Training moves the objective most early,
while the model learns what it will generalise, and the metric moves with it; overfitting comes late, in the
small moves of an objective that has nearly converged. So |correlation| >= JOINT, with the objective improving
over the run, says which way the metric improves: with the objective (correlation > 0), the objective's
direction; against it, the other. A metric that then worsens while the objective improves is overfitting
(healthy); a metric whose improvement runs against the declared direction is inverted, whatever its overall trend
(an agreement that jumps from 0.51 to 0.65 in the first evaluation and sags to 0.62 later has no trend at all).
A name that reads the declared way is never called inverted (a validation loss that rises from the first
evaluation while the training loss falls has the same curves as an inverted accuracy, told apart only by the
name). Without an objective (or with no joint move), a run whose curve moves against the declared direction over
training (rank correlation with the step >= TREND, or a move of MOVE of its size, first quarter to last) is
read on its own first half (against the declaration from the start: inverted), unless its name reads the
declared way. Inverted in 2 of 3 runs (at least 2): invalid. A name that reads the other way with no curve to
decide: a warning (at plan time too, sweeper.config.integrity.check_direction).
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
EARLY = 3                 # points at least in the early window (its first half), and shared with the objective
LATE = 0.25               # a run that ends this share of its range off its best, the objective improving: overfits
JOINT = 0.5               # |correlation| of the metric's and the objective's increments that decides the direction


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


def joint_moves(ev: SweepEvidence, m: MetricCurves, goal: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Per run of m: the uncentred correlation of its metric's increments with the objective's (interpolated at
    the metric's steps, inside the objective's logged range; NaN: fewer than EARLY shared points), and whether the
    objective improved from the first shared point to the last. Vectorised over runs (1,000s of runs)."""
    r, improved = np.full(len(m), np.nan), np.zeros(len(m), dtype=bool)
    if not goal or not len(m):
        return r, improved
    ci = curve_index(ev)
    sel = (ci.code == ci.names.index(goal)) & (ci.row >= 0) & np.isfinite(ci.value) & np.isfinite(ci.step)
    orow, ostep, oval = ci.row[sel], ci.step[sel], ci.value[sel]
    if not len(orow):
        return r, improved
    at = rows_of(ev, m.ids)[m.group]                                  # each metric point's row of ev.runs
    lo, span = min(ostep.min(), m.step.min()), max(ostep.max(), m.step.max()) - min(ostep.min(), m.step.min()) + 1
    okey = orow * span + (ostep - lo)                                 # one axis for every run, runs apart
    order = np.argsort(okey, kind="stable")
    okey, oval = okey[order], oval[order]
    first, last = np.full(len(ev.runs), np.inf), np.full(len(ev.runs), -np.inf)
    np.minimum.at(first, orow, ostep)
    np.maximum.at(last, orow, ostep)
    inside = (at >= 0) & (m.step >= first[at]) & (m.step <= last[at])
    g = np.interp(at * span + (m.step - lo), okey, oval)              # the objective at the metric's steps
    pair = inside[1:] & inside[:-1] & (m.group[1:] == m.group[:-1])   # consecutive shared points of one run
    dm, dg, grp = np.diff(m.value)[pair], np.diff(g)[pair], m.group[1:][pair]
    cross = np.bincount(grp, weights=dm * dg, minlength=len(m))
    norm = np.sqrt(np.bincount(grp, weights=dm * dm, minlength=len(m)) * np.bincount(grp, weights=dg * dg,
                                                                                      minlength=len(m)))
    shared = np.bincount(m.group[inside], minlength=len(m))
    ok = (shared >= EARLY) & (norm > 0)
    r[ok] = cross[ok] / norm[ok]
    idx = np.flatnonzero(inside)
    head = np.full(len(m), np.nan)
    tail = np.full(len(m), np.nan)
    head[m.group[idx][::-1]] = g[idx][::-1]                           # first shared point of each run
    tail[m.group[idx]] = g[idx]                                       # last shared point of each run
    improved = (tail < head) if implied_direction(goal) == "lower" else (tail > head)
    return r, improved & ok


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
    name_agrees = implied_direction(exp.metric) == ("lower" if exp.lower_is_better else "higher")
    r, improved = joint_moves(ev, m, goal)
    decided = improved & (np.abs(r) >= JOINT)                  # the objective says which way the metric improves
    goal_lower = implied_direction(goal) == "lower" if goal else True
    metric_lower = np.where(r > 0, goal_lower, not goal_lower)
    inverted = decided & (metric_lower != exp.lower_is_better) & (not name_agrees)
    lo, hi = np.minimum.reduceat(m.value, m.start), np.maximum.reduceat(m.value, m.start)
    last = m.value[m.start + m.n - 1]
    gave_back = (last - lo if exp.lower_is_better else hi - last) >= LATE * (hi - lo)   # ends off its best
    verdict = np.where(against | (decided & gave_back & (hi > lo)), "overfits",
                       np.where(withit | decided, "agrees", "flat")).astype(object)
    verdict[inverted] = "inverted"
    for g in np.flatnonzero(against & ~decided):               # no joint move: the metric's own first half
        s, e = m.start[g], m.start[g] + m.n[g]
        x, y = m.step[s:e], m.value[s:e]
        early = slice(0, max(EARLY, len(y) // 2))
        early_against = sign * _spearman(x[early], y[early]) >= TREND
        verdict[g] = "inverted" if early_against and not name_agrees else "overfits"
    return {str(i): str(v) for i, v in zip(m.ids, verdict)}, goal


def metric_direction(ev: SweepEvidence) -> list[Finding]:
    exp = ev.experiment
    declared = "lower" if exp.lower_is_better else "higher"
    read, goal = read_directions(ev)
    kinds = pd.Series(list(read.values()), dtype=object)
    inverted, agrees = int((kinds == "inverted").sum()), int((kinds == "agrees").sum())
    if inverted >= 2 and inverted >= MOST * len(read):
        m = MetricCurves(ev, MIN_POINTS)
        rho, head, tail = _trends(m)
        r, improved = joint_moves(ev, m, goal)
        joint = r[improved & (np.abs(r) >= JOINT) & np.array([read.get(str(i)) == "inverted" for i in m.ids])]
        return [Finding(
            "metric_direction", (),
            f"{exp.metric} is declared {declared}-is-better, but training "
            f"{'raises' if exp.lower_is_better else 'lowers'} it in {inverted} of {len(read)} runs"
            + (f" ({len(joint)} as the training objective {goal} improves: median correlation of their step-to-step "
               f"moves {float(np.median(joint)):+.2f})" if len(joint) else "")
            + f"; median {shown(float(np.median(head)))} in the first quarter, {shown(float(np.median(tail)))} in "
            f"the last, rank correlation with the step {float(np.median(rho)):+.2f}",
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
        ("inverted", "improve the other way (with the objective, or from the start)")) if counts.get(k, 0)]
    return Coverage("metric_direction", f"{len(read)} run(s) logged {ev.experiment.metric} at >= {MIN_POINTS} steps"
                                        f" (objective: {goal or 'none logged'}): " + "; ".join(parts), True)
