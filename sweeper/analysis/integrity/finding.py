"""One result of a check across the runs of a sweep (sweeper.analysis.integrity): what it read, the cause and the
fix in one line, and what it does to the verdict. Torch-free.

    Finding("seeds_no_effect", ("nope",), "4 seeds, final val_loss 2.31 in each, curves identical",
            "every seed of nope gave bitwise the same run: the seed never reaches the code; pass {seed} ...",
            Effect.INVALID)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


class Effect(str, Enum):
    """What a finding does to the verdicts of the comparisons it concerns (strongest first)."""
    NO_BASELINE = "no baseline"          # no usable baseline: no verdict against it at all
    INVALID = "invalid"                  # the comparison cannot test the change (copies of one run, no change)
    MIXED_CODE = "mixed code"            # runs of the comparison ran different code
    NOT_COMPARABLE = "not comparable"    # the arms differ in more than the change (evaluation data, budget)
    WARN = "warn"                        # named beside the verdict, which stands


@dataclass(frozen=True)
class Finding:
    check: str                  # the check's stable name (what `experiment.silence` keys on: config/integrity.py)
    variants: tuple[str, ...]   # the arms it concerns; () for the whole sweep
    evidence: str               # what it read, short (counts, values, keys)
    message: str                # one line: the cause and the fix
    effect: Effect
    silenced: str | None = None  # the experiment's reason, when the experiment silenced this check
    untested: bool = False       # no test runs on the comparisons it concerns (copies of one run, no baseline)
    copies: tuple[str, ...] = ()  # run_ids that copy an earlier run of their own arm: the test counts them once

    def silence(self, reason: str) -> "Finding":
        return replace(self, silenced=reason)

    @property
    def active(self) -> bool:
        """Whether it changes verdicts (not silenced, not a warning)."""
        return self.silenced is None and self.effect is not Effect.WARN

    def to_dict(self) -> dict:
        return {"check": self.check, "variants": list(self.variants), "evidence": self.evidence,
                "message": self.message, "effect": self.effect.value, "silenced": self.silenced,
                "untested": self.untested, **({"copies": list(self.copies)} if self.copies else {})}

    def concerns(self, variant: str, baseline: str) -> bool:
        """Whether the comparison variant vs baseline is one this finding is about (no arms named: every one)."""
        return not self.variants or variant in self.variants or baseline in self.variants
