"""The final is a selection (class 6 of the checks across runs): the reported final equals the best of the run's
logged evaluations and is better than the last one, in most runs of an arm: the best over N evaluations, not the
last. Max-over-training inflates results, and its bias grows with the number of evaluations.

    selected_final(ev)     # [Finding] naming the arms whose finals are selections
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import ATOL, RTOL, MetricCurves, metric_column, shown


def selected_final(ev: SweepEvidence) -> list[Finding]:
    m = MetricCurves(ev, 2)
    if not len(m):
        return []
    lower = ev.experiment.lower_is_better
    at = pd.Index(ev.runs["run_id"]).get_indexer(m.ids)            # each curve's row of ev.runs
    final = ev.runs[metric_column(ev)].to_numpy(dtype=float)[at]
    variants, seeds = ev.runs["variant"].to_numpy()[at], ev.runs["seed"].to_numpy()[at]
    best = (np.minimum if lower else np.maximum).reduceat(m.value, m.start)
    last = m.value[m.start + m.n - 1]
    tol = RTOL * np.maximum(np.abs(best), np.abs(last)) + ATOL
    selected = np.isclose(final, best, rtol=RTOL, atol=ATOL) & (np.abs(best - last) > tol)
    flagged, examples = [], []
    for variant in dict.fromkeys(variants.tolist()):
        mine = variants == variant
        k = int(selected[mine].sum())
        if k >= 2 and k > mine.sum() / 2:
            flagged.append((str(variant), k, int(mine.sum())))
            i = int(np.flatnonzero(selected & mine)[0])
            examples.append(f"{variant}/seed_{seeds[i]}: final {shown(final[i])}, last "
                            f"{shown(last[i])}, best of {int(m.n[i])}")
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
