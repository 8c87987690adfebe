"""The decision options: what decides a verdict (alpha, min_seeds, resamples, RNG seed), typed once, defaults once.

    python -m sweeper +experiment=rope sweeper.decision.alpha=0.01        # the sweep's report and adaptive looks
    python -m sweeper.report SWEEP_DIR --alpha 0.01 --min-seeds 4         # a report's flags (unset: the sweep's own)
    options = DecisionOptions(n_resamples=2000)                           # in code: the rest are the defaults below
    options = from_flags({"alpha": 1.5}, {"alpha": "--alpha"})            # UsageError: --alpha 1.5: accepted ...

The one place these defaults are stated (tests/test_decision_options.py checks that no other module states one).
The value enters in two places and is checked there once: the sweep's `sweeper.decision:` block (SweeperConf,
checked by sweeper.config.fields.build; the manifest records it when it is not the default) and the report's flags
(from_flags, kept as ReportFlags: a later report of the same sweep decides by the flags given, else by what the
sweep recorded, else by these defaults, so re-reporting a sweep gives its own verdicts). From there it is passed
as this type to sweeper.report.write, sweeper.analysis (analyze_sweep, analyze_pair, verdict.analyze) and the
adaptive driver.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from sweeper.errors import UsageError
from sweeper.field_rules import finite, rule


@dataclass
class DecisionOptions:
    """sweeper.decision.*: the decision rule's settings (sweeper.analysis.verdict). Treat as read-only: not frozen
    only because Hydra merges config values into the schema node."""
    alpha: float = rule(0.05, must="accepted values are between 0 and 1, e.g. 0.05",
                        ok=lambda v: 0 < v < 1)          # the family-wise error rate (Holm over the comparisons)
    min_seeds: int = rule(3, must="must be an integer >= 2 (a t-test needs at least 2 seeds per arm)",
                          ok=lambda v: v >= 2)           # usable seeds per arm below which a comparison is insufficient
    n_resamples: int = rule(10_000, must="must be an integer >= 100, e.g. 10000",
                            ok=lambda v: v >= 100)       # bootstrap / Monte Carlo resamples
    seed: int = 0                                        # RNG seed of every resampling step
    confidence: float = rule(0.95, must="accepted values are between 0 and 1, e.g. 0.95",
                             ok=lambda v: 0 < v < 1)     # the level of each arm's bootstrap interval of its mean


def from_flags(values: dict[str, Any], flags: dict[str, str]) -> DecisionOptions:
    """The options with the given values (None: the default above), each checked by its field's rule; a bad
    value is a UsageError naming its flag (flags: field name -> flag, e.g. {"n_resamples": "--resamples"})."""
    given = {k: v for k, v in values.items() if v is not None}
    rules = {f.name: f.metadata for f in fields(DecisionOptions)}
    for key, value in given.items():
        ok = rules[key].get("ok")
        if not finite(value) or (ok is not None and not ok(value)):
            must = rules[key].get("must", "must be a finite number")
            raise UsageError(f"{flags.get(key, key)} {value}: {must}")
    return DecisionOptions(**given)


@dataclass(frozen=True)
class ReportFlags:
    """The decision flags a report was given, each checked by from_flags: {field: value}. The report decides by
    these, else by what the sweep recorded (its manifest's `decision`), else by the defaults (`over`)."""
    given: tuple[tuple[str, Any], ...]

    @classmethod
    def parse(cls, values: dict[str, Any], flags: dict[str, str]) -> "ReportFlags":
        """The flags given (None: not given), checked now: a bad one is a UsageError naming it."""
        from_flags(values, flags)
        return cls(tuple((k, v) for k, v in values.items() if v is not None))

    def over(self, recorded: Any, where: str) -> DecisionOptions:
        """The options for a sweep whose manifest recorded `recorded` (its sweeper.decision as a mapping; None or
        {}: the defaults); a recorded value out of range is a UsageError naming it as `where`.KEY."""
        names = {f.name for f in fields(DecisionOptions)}
        base = {k: v for k, v in recorded.items() if k in names} if isinstance(recorded, dict) else {}
        return dataclasses.replace(from_flags(base, {k: f"{where}.{k}" for k in base}), **dict(self.given))
