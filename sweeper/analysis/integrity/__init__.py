"""Checks across the runs of a sweep: the bugs only a sweep can see (seeds or a change with no effect, the metric's
direction, arms evaluated on different data or trained for different budgets, a selected final, nondeterminism,
no spread, a broken baseline, mixed code, runs that share files). Every report runs them; reads files only.

    findings = check_sweep(SweepEvidence(sweep_dir, experiment, runs, curves, changes))

Each check is a function `(SweepEvidence) -> list[Finding]` in a module of numbers/ (it reads what the runs
measured) or records/ (how they ran), listed in CHECKS; its
__name__ is the name its findings carry, listed in sweeper.config.integrity.CHECK_NAMES (the keys that
experiment.silence accepts at plan time). sweeper.analysis.analyze runs them on every report and applies their
effects (sweeper.analysis.integrity.effects); docs/sweep-integrity.md lists them for users.
"""
from __future__ import annotations

from collections.abc import Callable

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding

Check = Callable[[SweepEvidence], list[Finding]]
CHECKS: list[Check] = []          # every check, in the order its findings are shown
COVERAGE: dict[str, Callable[[SweepEvidence], Coverage]] = {}   # check name -> what evidence it had (coverage.py)


def check_sweep(ev: SweepEvidence, silence: dict[str, str] | None = None) -> list[Finding]:
    """Every check's findings; a check the experiment silenced (check name -> reason) is kept, marked silenced."""
    silence = silence or {}
    found = [f for check in CHECKS for f in _run(check, ev)]
    return [f.silence(silence[f.check]) if f.check in silence else f for f in found]


def sweep_coverage(ev: SweepEvidence) -> list[Coverage]:
    """What evidence each check had on this sweep, in CHECKS order (a check with no coverage function: none)."""
    out = []
    for check in CHECKS:
        cover = COVERAGE.get(check.__name__)
        if cover is None:
            continue
        try:
            out.append(cover(ev))
        except Exception as e:  # noqa: BLE001 - a coverage bug must not cost the user the report
            out.append(Coverage(check.__name__, f"could not say: {type(e).__name__}", False))
    return out


def _run(check: Check, ev: SweepEvidence) -> list[Finding]:
    """A check's findings; a check that breaks on data it did not expect is a warning, never a lost report."""
    try:
        return check(ev)
    except Exception as e:  # noqa: BLE001 - one check's bug must not cost the user the report
        return [Finding(check.__name__, (), f"the check could not run: {type(e).__name__}: {e}".splitlines()[0],
                        "a bug in sweeper's check, not in the sweep: the verdicts stand without it; please report it",
                        Effect.WARN)]


# -- registration: each check in the order its findings are shown --------------------------------------------------
from sweeper.analysis.integrity.numbers.baseline import broken_baseline, broken_baseline_coverage  # noqa: E402  (the checks import the types above)
from sweeper.analysis.integrity.numbers.coarse import coarse_metric, coarse_metric_coverage  # noqa: E402
from sweeper.analysis.integrity.numbers.copies import (  # noqa: E402
    change_no_effect,
    change_no_effect_coverage,
    seeds_no_effect,
    seeds_no_effect_coverage,
)
from sweeper.analysis.integrity.numbers.determinism import nondeterminism, nondeterminism_coverage  # noqa: E402
from sweeper.analysis.integrity.numbers.direction import metric_direction, metric_direction_coverage  # noqa: E402
from sweeper.analysis.integrity.numbers.selection import selected_final, selected_final_coverage  # noqa: E402
from sweeper.analysis.integrity.numbers.series import eval_is_train, eval_is_train_coverage  # noqa: E402
from sweeper.analysis.integrity.numbers.spread import no_spread, no_spread_coverage  # noqa: E402
from sweeper.analysis.integrity.records.budget import budget_confound, budget_confound_coverage  # noqa: E402
from sweeper.analysis.integrity.records.concerns import several_concerns, several_concerns_coverage  # noqa: E402
from sweeper.analysis.integrity.records.evaluation import (  # noqa: E402
    evaluation_identity,
    evaluation_identity_coverage,
    evaluation_varies_with_seed,
    evaluation_varies_with_seed_coverage,
)
from sweeper.analysis.integrity.records.isolation import (  # noqa: E402
    isolation_coverage,
    shared_checkpoint,
    writes_outside_run_dir,
)
from sweeper.analysis.integrity.records.provenance import mixed_code, mixed_code_coverage  # noqa: E402
from sweeper.analysis.integrity.records.shared_state import shared_state  # noqa: E402
from sweeper.analysis.integrity.records.subset import train_subset, train_subset_coverage  # noqa: E402
from sweeper.analysis.integrity.records.usage import (  # noqa: E402
    generator_unused,
    generator_unused_coverage,
    key_never_read,
    key_never_read_coverage,
)

CHECKS += [broken_baseline, metric_direction, seeds_no_effect, change_no_effect, eval_is_train, evaluation_identity,
           budget_confound, mixed_code, shared_checkpoint, selected_final, no_spread, coarse_metric, nondeterminism,
           evaluation_varies_with_seed, writes_outside_run_dir, key_never_read, generator_unused, train_subset,
           shared_state, several_concerns]
COVERAGE.update(seeds_no_effect=seeds_no_effect_coverage, change_no_effect=change_no_effect_coverage,
                eval_is_train=eval_is_train_coverage, metric_direction=metric_direction_coverage,
                coarse_metric=coarse_metric_coverage, selected_final=selected_final_coverage,
                no_spread=no_spread_coverage, broken_baseline=broken_baseline_coverage,
                nondeterminism=nondeterminism_coverage)
COVERAGE.update(budget_confound=budget_confound_coverage, evaluation_identity=evaluation_identity_coverage,
                evaluation_varies_with_seed=evaluation_varies_with_seed_coverage,
                key_never_read=key_never_read_coverage, generator_unused=generator_unused_coverage,
                train_subset=train_subset_coverage, several_concerns=several_concerns_coverage,
                mixed_code=mixed_code_coverage)
COVERAGE.update({name: isolation_coverage(name) for name in ("shared_checkpoint", "writes_outside_run_dir",
                                                             "shared_state")})

__all__ = ["CHECKS", "COVERAGE", "Check", "Coverage", "Effect", "Finding", "SweepEvidence", "check_sweep",
           "sweep_coverage"]
