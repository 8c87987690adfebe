"""The final is a selection (class 6 of the checks across runs), in most runs of an arm (at least 2): the best
over N evaluations, not the last. Max-over-training inflates results, and its bias grows with the number of
evaluations. Two kinds of evidence, each against the run's own curve of the decision metric:
- the final equals a logged evaluation that is the best from there to the end of the curve, and beats the last
  one: selected over logged points (the best of the whole curve, a restored best checkpoint; or, when the curve
  reaches the run's last step, the best of a trailing window: "the best of the last 5 evaluations");
- the final is better than every logged point, and the curve reaches the run's last step (the summary's steps):
  selected over evaluations that were never logged (an inner loop that keeps its best, a checkpoint picked on
  the validation score).
A final that is itself the curve's last record (a command's final line carrying the last step, beside the
evaluation logged at that step) is the final's own record, not an evaluation: left out of the curve it is
compared with.

    selected_final(ev)     # [Finding] naming the arms whose finals are selections

The second kind needs every telling run of the arm to be a selection (at least MIN_BEYOND of them, one at least
beyond the logged points): a run tells when its curve reaches the last step and its final differs from its last
logged point (a final equal to the last point, the best being last, fits a selection and an honest run alike). A
final evaluated on other data than the logged curve (a full validation set after a subset) beats the best logged
point in about half the runs, a selection in every telling one. A trailing-window best needs the curve to reach
the last step: a final evaluated after the last logged point may tie an earlier point of a coarse metric by chance.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import ATOL, RTOL, MetricCurves, metric_column, shown

MIN_BEYOND = 3             # runs of an arm whose curve reaches the last step, for the second kind of evidence


def _overwritten(ev: SweepEvidence, ids, steps: np.ndarray) -> np.ndarray:
    """Per run: the decision metric's value logged earlier at its curve's last step, then overwritten by a later
    record at that step (a command's final line repeating the last step); NaN where none."""
    out = np.full(len(ids), np.nan)
    rows = [r for r in ev.curves.attrs.get("overwritten", ()) if r[4] == ev.experiment.metric]
    if rows:
        where = {str(i): k for k, i in enumerate(ids)}
        for run_id, _, _, step, _, value in rows:                   # in logging order: the latest one stays
            k = where.get(str(run_id))
            if k is not None and step == steps[k] and np.isfinite(value):
                out[k] = float(value)
    return out


def selected_final(ev: SweepEvidence) -> list[Finding]:
    m = MetricCurves(ev, 2)
    if not len(m):
        return []
    lower = ev.experiment.lower_is_better
    at = pd.Index(ev.runs["run_id"]).get_indexer(m.ids)            # each curve's row of ev.runs
    final = ev.runs[metric_column(ev)].to_numpy(dtype=float)[at]
    variants, seeds = ev.runs["variant"].to_numpy()[at], ev.runs["seed"].to_numpy()[at]
    end = m.start + m.n - 1
    value = m.value.copy()
    earlier = _overwritten(ev, m.ids, m.step[end])                # the evaluation the final's own record hid
    own = np.isfinite(earlier) & np.isclose(m.value[end], final, rtol=RTOL, atol=ATOL)
    value[end[own]] = earlier[own]
    best = (np.minimum if lower else np.maximum).reduceat(value, m.start)
    last_at, n_evals = end, m.n
    last = value[last_at]
    tol = RTOL * np.maximum(np.abs(best), np.abs(last)) + ATOL
    steps = pd.to_numeric(ev.runs["steps"], errors="coerce").to_numpy(dtype=float)[at] if "steps" in ev.runs \
        else np.full(len(at), np.nan)
    reaches = m.step[last_at] >= steps                            # NaN steps: unknown, never reaches
    beats_last = (last - final > tol) if lower else (final - last > tol)
    logged = np.isclose(final, best, rtol=RTOL, atol=ATOL) & (np.abs(best - last) > tol)
    # the best of a trailing window: the final equals a logged point that is the best from there on
    rev = pd.Series(value[::-1])
    tail_best = (rev.groupby(m.group[::-1]).cummin() if lower else rev.groupby(m.group[::-1]).cummax()).to_numpy()[::-1]
    hit = np.isclose(value, final[m.group], rtol=RTOL, atol=ATOL) & np.isclose(tail_best, final[m.group], rtol=RTOL,
                                                                                   atol=ATOL)
    hit &= np.arange(len(value)) < last_at[m.group]
    window = reaches & beats_last & (np.bincount(m.group, weights=hit, minlength=len(m)) > 0)
    logged |= window
    margin = RTOL * np.maximum(np.abs(final), np.abs(best)) + ATOL
    beyond = reaches & ((best - final > margin) if lower else (final - best > margin))
    selected = logged | beyond
    # a final equal to the last point is what an honest run reports and what a selection gives when the best was
    # last: no evidence either way; the runs that tell (final != last) must all be selections
    telling = reaches & ~np.isclose(final, last, rtol=RTOL, atol=ATOL)
    flagged, examples = [], []
    for variant in dict.fromkeys(variants.tolist()):
        mine = variants == variant
        k, tell = int(logged[mine].sum()), mine & telling
        every_beyond = int(tell.sum()) >= MIN_BEYOND and bool(selected[tell].all()) and bool(beyond[tell].any())
        if k >= 2 and k > mine.sum() / 2 or every_beyond:
            count = int(selected[mine].sum())
            flagged.append((str(variant), count, int(mine.sum())))
            i = int(np.flatnonzero(selected & mine)[0])
            examples.append(f"{variant}/seed_{seeds[i]}: final {shown(final[i])}, last "
                            f"{shown(last[i])}, best of {int(n_evals[i])} {shown(best[i])}"
                            + (" (the final beats every logged point; the curve reaches the last step)"
                               if beyond[i] else ""))
    if not flagged:
        return []
    counts = "; ".join(f"{v}: {k} of {n} runs" for v, k, n in flagged)
    return [Finding(
        "selected_final", tuple(v for v, _, _ in flagged),
        f"final {ev.experiment.metric} equals the best logged evaluation (of the curve, or of its last "
        f"evaluations) or beats every logged one, and beats the last one, in {counts} (e.g. {examples[0]})",
        "the reported final is the best over the run's evaluations (logged or not), not the last: "
        "max-over-training inflates results, the more so the more evaluations; report the last evaluation as the "
        "final (or evaluate a checkpoint chosen on separate validation data, and say so)",
        Effect.INVALID)]


def selected_final_coverage(ev: SweepEvidence) -> Coverage:
    m = MetricCurves(ev, 2)
    if not len(m):
        return Coverage("selected_final", f"no usable run logged {ev.experiment.metric} at 2 steps or more: not "
                                          f"checked", False)
    at = pd.Index(ev.runs["run_id"]).get_indexer(m.ids)
    steps = pd.to_numeric(ev.runs["steps"], errors="coerce").to_numpy(dtype=float)[at] if "steps" in ev.runs \
        else np.full(len(at), np.nan)
    reach = int((m.step[m.start + m.n - 1] >= steps).sum())
    return Coverage("selected_final", f"{len(m)} run(s) with a curve of {ev.experiment.metric} (median "
                                      f"{int(np.median(m.n))} points), {reach} reaching the run's last step",
                    True)
