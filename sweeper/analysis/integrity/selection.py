"""The final is a selection (class 6 of the checks across runs): the reported final equals the best of the run's
logged evaluations and is better than the last one, in most runs of an arm: the best over N evaluations, not the
last. Max-over-training inflates results, and its bias grows with the number of evaluations.

    selected_final(ev)     # [Finding] naming the arms whose finals are selections
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import ATOL, RTOL, metric_column, shown, usable


def per_run(ev: SweepEvidence):
    """min, max, last and count of each usable run's logged decision metric (runs that logged >= 2 points)."""
    metric = ev.experiment.metric
    c = ev.curves
    if not len(c):
        return None
    c = c[c["metric"] == metric]
    ok = usable(ev)
    c = c[c["run_id"].isin(ev.runs.loc[ok, "run_id"])]
    if not len(c):
        return None
    stats = c.groupby("run_id", sort=False)["value"].agg(["min", "max", "last", "first", "count"])
    return stats[stats["count"] >= 2]


def selected_final(ev: SweepEvidence) -> list[Finding]:
    stats = per_run(ev)
    if stats is None or not len(stats):
        return []
    lower = ev.experiment.lower_is_better
    runs = ev.runs.set_index("run_id").loc[stats.index]
    final = runs[metric_column(ev)].to_numpy(dtype=float)
    best = stats["min" if lower else "max"].to_numpy(dtype=float)
    last = stats["last"].to_numpy(dtype=float)
    tol = RTOL * np.maximum(np.abs(best), np.abs(last)) + ATOL
    selected = np.isclose(final, best, rtol=RTOL, atol=ATOL) & (np.abs(best - last) > tol)
    flagged, examples = [], []
    for variant in dict.fromkeys(runs["variant"]):
        mine = (runs["variant"] == variant).to_numpy()
        k = int(selected[mine].sum())
        if k >= 2 and k > mine.sum() / 2:
            flagged.append((str(variant), k, int(mine.sum())))
            i = int(np.flatnonzero(selected & mine)[0])
            examples.append(f"{variant}/seed_{runs['seed'].iloc[i]}: final {shown(final[i])}, last "
                            f"{shown(last[i])}, best of {int(stats['count'].iloc[i])}")
    if not flagged:
        return []
    counts = "; ".join(f"{v}: {k} of {n} runs" for v, k, n in flagged)
    return [Finding(
        "selected_final", tuple(v for v, _, _ in flagged),
        f"final {ev.experiment.metric} equals the best logged evaluation and beats the last one in {counts} "
        f"(e.g. {examples[0]})",
        "the reported final is the best over the run's evaluations, not the last: max-over-training inflates "
        "results, the more so the more evaluations; report the last evaluation as the final (or evaluate a "
        "checkpoint chosen on separate validation data, and say so)",
        Effect.INVALID)]
