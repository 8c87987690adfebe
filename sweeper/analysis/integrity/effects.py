"""What the findings of the checks across runs do to the verdicts: every comparison a finding concerns gets the
finding's effect as its verdict (invalid, not comparable, mixed code, no baseline), the check named in the reason,
and what the numbers alone would say kept beside it (Comparison.numbers_say), as the health rule does.

    skip = untested(findings, comparisons)     # {(variant, baseline): why}: no test runs on those (copies of one
                                               # run, no baseline): verdict.analyze(..., untested=skip)
    apply(findings, analysis)                  # after verdict.analyze: each concerned comparison's verdict
    drop = copies(findings)                    # run_ids the test counts once (copies of a run of their own arm):
                                               # left out of the runs verdict.analyze tests

A silenced finding, or a warning, changes no verdict; a warning that names arms is named beside the verdict of
their comparisons (Comparison.integrity_warnings, and its cause at the end of the verdict's reason). Several
findings on one comparison: the strongest effect (Effect's order) is the verdict, and every check is named.
"""
from __future__ import annotations

from sweeper.analysis.integrity.finding import Effect, Finding

ORDER = list(Effect)               # strongest first


def _active(findings: list[Finding], variant: str, baseline: str) -> list[Finding]:
    return [f for f in findings if f.active and f.concerns(variant, baseline)]


def untested(findings: list[Finding], comparisons: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The comparisons on which no test is run, with the reason (the findings' checks and evidence)."""
    out = {}
    for variant, baseline in comparisons:
        why = [f for f in _active(findings, variant, baseline) if f.untested]
        if why:
            out[(variant, baseline)] = "; ".join(f"{f.check}: {f.evidence}" for f in why) + ": no test is run"
    return out


def copies(findings: list[Finding]) -> set[str]:
    """The run_ids that copy an earlier run of their own arm (seeds_no_effect, not silenced): no test counts a
    copy as a seed of its own."""
    return {r for f in findings if f.silenced is None for r in f.copies}


def _warnings(findings: list[Finding], variant: str, baseline: str) -> list[Finding]:
    """Warnings (not silenced) about the arms of this comparison by name: named beside its verdict."""
    return [f for f in findings if f.silenced is None and f.effect is Effect.WARN and f.variants
            and f.concerns(variant, baseline)]


def apply(findings: list[Finding], analysis) -> None:
    """Set the verdict of every comparison of `analysis` (a verdict.Analysis) that an active finding concerns;
    name beside it the warnings about its arms (the verdict stands)."""
    for c in analysis.comparisons:
        for f in findings:
            if f.silenced is None and f.copies and f.concerns(c.variant, c.baseline):
                c.notes.append(f"{f.check}: {f.evidence}; the test counts each distinct run once")
        warned = _warnings(findings, c.variant, c.baseline)
        if warned:
            c.integrity_warnings = list(dict.fromkeys(f.check for f in warned))
            c.reason += "; warning: " + "; ".join(f"{f.check}: {f.message.split('; ')[0]}" for f in warned)
        active = sorted(_active(findings, c.variant, c.baseline), key=lambda f: ORDER.index(f.effect))
        if not active:
            continue
        effect = active[0].effect
        health_invalid = c.verdict == "invalid" and bool(c.invalid_checks)
        numbers = c.numbers_say if health_invalid else (c.verdict if c.primary is not None else "")
        c.integrity_checks = list(dict.fromkeys(f.check for f in active))
        causes = "; ".join(f"{f.check}: {f.message.split('; ')[0]} [{f.evidence}]" for f in active)   # the cause;
        #                                                                         the fix: the findings' own lines
        tail = (f"the numbers alone would say {numbers}: {c.reason}" if numbers else
                "no test is run" if c.reason.endswith("no test is run") else f"no verdict from the numbers: {c.reason}")
        c.numbers_say = numbers
        c.reason = f"{causes}; {tail}"
        if not (health_invalid and ORDER.index(Effect.INVALID) < ORDER.index(effect)):
            c.verdict = effect.value
