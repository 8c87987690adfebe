"""A broken baseline (class 9 of the checks across runs): no usable baseline seed, so nothing can be compared with
it. Without this, every variant "wins" against a baseline that diverged in every seed, with an interval of -inf.

    broken_baseline(ev)    # [Finding] when the baseline ended runs and none of them is usable
"""
from __future__ import annotations

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import usable
from sweeper.run.files.status_values import Status

LOST = (Status.FAILED.value, Status.DIVERGED.value, Status.FINISHED.value)   # finished here: no finite metric


def broken_baseline(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    if not baseline or len(ev.experiment.variants) < 2 and ev.runs["variant"].nunique() < 2:
        return []
    mine = ev.runs["variant"] == baseline
    rows = ev.runs[mine]
    lost = rows[rows["status"].isin(LOST)]
    if not len(rows) or usable(ev)[mine].any() or not len(lost):
        return []
    counts = ", ".join(f"{n} {'finished without a finite ' + ev.experiment.metric if s == Status.FINISHED.value else s}"
                       for s, n in lost["status"].value_counts().items())
    rest = len(rows) - len(lost)
    return [Finding(
        "broken_baseline", (baseline,),
        f"{baseline}: 0 usable of {len(rows)} planned seeds ({counts}"
        + (f"; {rest} not ended" if rest else "") + ")",
        f"the baseline {baseline} has no usable seed, so no variant can be compared with it; fix the baseline first "
        f"(its runs' logs and health.json, a lower learning rate if it diverged) and run the sweep again, or "
        f"report against another variant (--baseline VARIANT)",
        Effect.NO_BASELINE, untested=True)]


def broken_baseline_coverage(ev: SweepEvidence) -> Coverage:
    baseline = ev.experiment.baseline
    if not baseline:
        return Coverage("broken_baseline", "no baseline (one variant): not checked", False)
    mine = ev.runs["variant"] == baseline
    return Coverage("broken_baseline", f"{baseline}: {int(usable(ev)[mine].sum())} usable of {int(mine.sum())} "
                                       f"planned seeds", True)
