"""Checks across the runs of a sweep: the bugs only a sweep can see (seeds or a change with no effect, the metric's
direction, arms evaluated on different data or trained for different budgets, a selected final, nondeterminism,
no spread, a broken baseline, mixed code, runs that share files). Every report runs them; reads files only.

    findings = check_sweep(SweepEvidence(sweep_dir, experiment, runs, curves, changes))

Each check is a function `(SweepEvidence) -> list[Finding]` in a module of this package, listed in CHECKS.
"""
from __future__ import annotations

from collections.abc import Callable

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding

Check = Callable[[SweepEvidence], list[Finding]]
CHECKS: list[Check] = []          # every check, in the order its findings are shown


def check_sweep(ev: SweepEvidence, silence: dict[str, str] | None = None) -> list[Finding]:
    """Every check's findings; a check the experiment silenced (check name -> reason) is kept, marked silenced."""
    silence = silence or {}
    found = [f for check in CHECKS for f in check(ev)]
    return [f.silence(silence[f.check]) if f.check in silence else f for f in found]


# the checks, module by module (each module: one class of issue 37)
from sweeper.analysis.integrity import determinism, evaluation, isolation, provenance  # noqa: E402 - after CHECKS

CHECKS += [evaluation.check_evaluation, determinism.check_determinism, provenance.check_code,
           isolation.check_isolation]

__all__ = ["CHECKS", "Check", "Effect", "Finding", "SweepEvidence", "check_sweep"]
