"""Several concerns in one variant: a variant whose changed keys touch more than one concern (model, optimizer,
data, evaluation, budget, other: sweeper.config.variants.concerns), directly or through a group swap (`model=big`
that also sets `optim.lr`), and that is not a declared bundle (experiment.bundles). Its result cannot say which change
mattered. Evidence: each variant's config changes against the baseline (the runs' config.yaml) and the declared
change that made each key (the manifest).

    several_concerns(ev)            # [Finding] per such variant: a warning beside its verdict
    several_concerns_coverage(ev)   # Coverage: how many variants had their config changes to read
"""
from __future__ import annotations

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.config.variants.concerns import by_concern, describe_concerns


def _compared(ev: SweepEvidence) -> list[str]:
    """The variants compared with the baseline that may change things at once (not the baseline, controls or
    declared bundles)."""
    exp = ev.experiment
    skip = {exp.baseline, *exp.controls, *exp.bundles}
    present = list(dict.fromkeys(ev.runs["variant"])) if len(ev.runs) else []
    return [v for v in present if v not in skip]


def several_concerns(ev: SweepEvidence) -> list[Finding]:
    out = []
    for variant in _compared(ev):
        changes = ev.changes.get(variant)
        if not changes:
            continue
        found = by_concern([c.key for c in changes], ev.declared.get(variant, []))
        if len(found) < 2:
            continue
        out.append(Finding(
            "several_concerns", (variant,), describe_concerns(found),
            f"variant {variant} changes {len(found)} concerns at once ({', '.join(found)}): its result cannot say "
            f"which one mattered; split it into one variant per concern, or declare the bundle with "
            f"experiment.bundles=[{variant}]", Effect.WARN))
    return out


def several_concerns_coverage(ev: SweepEvidence) -> Coverage:
    compared = _compared(ev)
    read = [v for v in compared if ev.changes.get(v) is not None]
    bundles = [v for v in ev.experiment.bundles if v in set(ev.runs["variant"] if len(ev.runs) else ())]
    tail = f"; {len(bundles)} declared bundle(s) not judged" if bundles else ""
    if not compared:
        return Coverage("several_concerns", "no variant besides the baseline, controls and bundles: nothing to judge"
                        + tail, True)
    if not read:
        return Coverage("several_concerns", f"no config changes could be read for {len(compared)} variant(s) "
                        f"(their runs' config.yaml): not checked" + tail, False)
    missing = len(compared) - len(read)
    return Coverage("several_concerns", f"config changes of {len(read)} of {len(compared)} variant(s) attributed to "
                    f"concerns" + (f" ({missing} unreadable: not checked)" if missing else "") + tail, True)
