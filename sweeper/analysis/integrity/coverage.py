"""What evidence each check across runs had on this sweep, so that a report never implies that a check passed
when it could not run ("evaluation_identity: 8 runs recorded no fingerprint and no size: not checked").

    COVERAGE["evaluation_identity"] = evaluation_identity_coverage   # (SweepEvidence) -> Coverage
    lines = sweep_coverage(ev)                                       # every registered check, in CHECKS order

Each check module defines its coverage function beside the check and registers it in
sweeper.analysis.integrity.COVERAGE under the check's name. Torch-free.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Coverage:
    check: str          # the check's name (as its findings carry it)
    evidence: str       # what it had, short: "8 of 8 runs recorded an evaluation fingerprint"
    checked: bool       # False: the check could not run on this sweep (the evidence line says why)

    def to_dict(self) -> dict:
        return {"check": self.check, "evidence": self.evidence, "checked": self.checked}
