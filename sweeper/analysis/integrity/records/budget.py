"""Compute budget (class 5 of the checks across runs): arms that differ in training budget compare the change
together with the compute. Named as a confound; where the logged curves allow, the arms are also compared at
the common budget: the decision metric at the largest step every run of both arms logged.

    budget_confound(ev)    # [Finding] per variant whose compute ledger differs from the baseline's
    budget_confound_coverage(ev)    # what evidence it had (COVERAGE)

The evidence, strongest first: the compute ledger every run recorded (examples, tokens, optimizer steps consumed:
the summary's `used` block, sweeper.run.usage), compared by the arms' medians, whatever key moved it (a batch
size, examples per step, a wall-clock limit, early stopping): the data consumed (examples, tokens) first, optimizer
steps only where no run counted its data (accumulating 4 micro-batches a step over the same examples is the change
under test, not more budget); where a ledger was recorded it decides alone; else the runs' own last steps. Arms within
TOLERANCE of each other are the same budget. Only where no run recorded a ledger do budget-named keys in the
variant's changes (steps/epochs/tokens/time) decide, a hint kept from the plan.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

import sweeper.analysis.verdict as verdict
from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import arm_values, metric_column, shown, usable, what_changes
from sweeper.config.variants.config_diff import Change

BUDGET = re.compile(r"^(max_|num_|n_|total_|train_|training_)*(steps|iters|iterations|epochs|epoch|tokens|timesteps|"
                    r"updates|time_limit|time|budget|samples|minutes|hours|steps_per_epoch)(_s|_min|_h)?$")
NOT_TRAINING = re.compile(r"(^|_)(eval|evaluation|val|valid|validation|test|log|logging|warmup|ckpt|checkpoint|"
                          r"save|print|decay|schedule|sampler|sampling|generate|generation)(_|$)")
RATIO = 1.25               # arms' medians (ledger, last steps) this far apart: not the same budget
TOLERANCE = RATIO           # the stated tolerance (docs/sweep-integrity.md)
LEDGER = (("examples", "examples"), ("tokens", "tokens"), ("steps", "optimizer steps"))


def budget_key(key: str) -> bool:
    """train.steps, max_epochs, total_timesteps, optim.max_iters: yes; warmup_steps, eval.steps, lr_decay_steps: no."""
    parts = key.lower().split(".")
    return bool(BUDGET.match(parts[-1])) and not any(NOT_TRAINING.search(p) for p in parts)


def last_steps(ev: SweepEvidence) -> dict[str, np.ndarray]:
    """Per variant, the last step of each usable run: its summary's steps, else the last step it logged."""
    ok = usable(ev).to_numpy()
    steps = pd.to_numeric(ev.runs["steps"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(steps[ok]).any() and len(ev.curves):
        logged = ev.curves.groupby("run_id", sort=False)["step"].max()
        steps = np.where(np.isnan(steps), ev.runs["run_id"].map(logged).to_numpy(dtype=float), steps)
    keep = ok & np.isfinite(steps)
    groups = ev.runs.groupby("variant", sort=False).indices
    return {str(v): steps[[i for i in idx if keep[i]]] for v, idx in groups.items()}


def common_budget(ev: SweepEvidence, variant: str) -> str:
    """The variant vs the baseline at the largest step every usable run of both logged the decision metric."""
    baseline, metric = ev.experiment.baseline, ev.experiment.metric
    ok = usable(ev) & ev.runs["variant"].isin([variant, baseline])
    ids = ev.runs.loc[ok, "run_id"]
    c = ev.metric_curves
    c = c[c["run_id"].isin(ids)] if len(c) else c
    if not len(c) or c["run_id"].nunique() < len(ids):
        return f"the curves do not allow a comparison at the common budget (not every run logged {metric})"
    steps = set.intersection(*(set(g) for _, g in c.groupby("run_id")["step"]))
    if not steps:
        return f"the curves do not allow a comparison at the common budget (no step every run logged {metric} at)"
    step = max(steps)
    at = c[c["step"] == step].set_index("run_id")["value"]
    rows = ev.runs[ok].copy()
    rows[metric_column(ev)] = rows["run_id"].map(at).to_numpy(dtype=float)
    an = verdict.analyze(rows, metric, ev.experiment.lower_is_better, [(variant, baseline)],
                         ev.options, design=ev.experiment.design)     # decided as the report decides
    cmp = an.comparisons[0]
    arms = "; ".join(f"{a.variant} {shown(a.summary['mean'])}" for a in (an.arms[variant], an.arms[baseline]))
    if cmp.decision_ci is None or cmp.delta is None:
        return f"at the common budget (step {step}, the largest step every run logged): {arms}: {cmp.verdict}"
    ci = cmp.decision_ci
    return (f"at the common budget (step {step}, the largest step every run logged {metric} at): {arms}; "
            f"difference {shown(cmp.delta.estimate)}, {ci.confidence:.0%} interval {shown(ci.low)} to "
            f"{shown(ci.high)}, {cmp.primary.name} p={cmp.primary.pvalue:.3g} (this one comparison): {cmp.verdict}")


def ledger(ev: SweepEvidence, variant: str) -> dict[str, np.ndarray]:
    """quantity -> the values every usable run of the variant recorded (only quantities all of them recorded)."""
    out = {}
    for name, _ in LEDGER:
        column = f"used_{name}"
        rows = arm_values(ev, column, variant)
        if len(rows):
            values = pd.to_numeric(rows, errors="coerce").to_numpy(dtype=float)
            if np.isfinite(values).all():
                out[name] = values
    return out


def _ledger_why(ev: SweepEvidence, variant: str) -> tuple[bool, str | None]:
    """(whether both arms have a ledger quantity in common, why they differ or None). The data consumed decides
    (examples, tokens): arms that saw the same data within TOLERANCE had the same budget, whatever their optimizer
    steps (a larger effective batch by accumulation takes fewer steps over the same examples: that is the change
    itself). Optimizer steps decide only where no run of both arms counted its data."""
    mine, base = ledger(ev, variant), ledger(ev, ev.experiment.baseline)
    common = [(n, label) for n, label in LEDGER if n in mine and n in base]
    data = [c for c in common if c[0] != "steps"]
    for name, label in data or common:
        a, b = float(np.median(mine[name])), float(np.median(base[name]))
        if (a > 0 or b > 0) and (min(a, b) <= 0 or max(a, b) / min(a, b) >= TOLERANCE):
            return True, (f"the runs' compute ledger differs: {variant} consumed {a:g} {label} (median of "
                          f"{len(mine[name])} runs), {ev.experiment.baseline} {b:g} (tolerance: "
                          f"{TOLERANCE:g}x)")
    return bool(common), None


def _why(ev: SweepEvidence, variant: str, changes: list[Change], steps: dict[str, np.ndarray]) -> str | None:
    has_ledger, why = _ledger_why(ev, variant)
    if why:
        return why
    if has_ledger:              # what the runs consumed decides: keys and last steps are weaker evidence
        return None
    keys = [c for c in changes if budget_key(c.key)]
    if keys:                    # the plan-time hint, where no run recorded what it consumed
        return f"{variant} changes the training budget: " + what_changes(ev, variant, keys)
    mine, base = steps.get(variant, np.zeros(0)), steps.get(ev.experiment.baseline, np.zeros(0))
    if not mine.size or not base.size:
        return None
    a, b = float(np.median(mine)), float(np.median(base))
    if min(a, b) <= 0 or max(a, b) / min(a, b) < TOLERANCE:
        return None
    spread = lambda x: f"{int(x.min())}" if x.min() == x.max() else f"{int(x.min())} to {int(x.max())}"  # noqa: E731
    return (f"the config sets no different budget, but the runs' own last steps differ: {variant} stopped at step "
            f"{spread(mine)} (median {a:g}), {ev.experiment.baseline} at {spread(base)} (median {b:g})")


def budget_confound(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    if not baseline:
        return []
    out, steps = [], last_steps(ev)
    for variant in dict.fromkeys(ev.runs["variant"]):
        if variant == baseline:
            continue
        why = _why(ev, str(variant), ev.changes.get(variant, []), steps)
        if why is None:
            continue
        out.append(Finding(
            "budget_confound", (str(variant),), f"{why}; {common_budget(ev, str(variant))}",
            f"{variant} and {baseline} differ in training budget, so the comparison measures the change and the "
            f"compute together: give both arms the same budget (steps, epochs, tokens, time), compare at the common "
            f"budget shown here, or silence budget_confound with the reason (a compute-scaling study)",
            Effect.NOT_COMPARABLE))
    return out


def budget_confound_coverage(ev: SweepEvidence) -> Coverage:
    ok = usable(ev)
    columns = [f"used_{n}" for n, _ in LEDGER if f"used_{n}" in ev.runs]
    recorded = int(ev.runs.loc[ok, columns].notna().any(axis=1).sum()) if columns else 0
    n = int(ok.sum())
    if recorded:
        return Coverage("budget_confound", f"{recorded} of {n} runs recorded a compute ledger (examples, tokens or "
                                           f"optimizer steps consumed); the rest: their last steps", True)
    steps = int(pd.to_numeric(ev.runs.loc[ok, "steps"], errors="coerce").notna().sum()) if n else 0
    return Coverage("budget_confound", f"no run recorded a compute ledger: budget-named keys and {steps} of {n} "
                                       f"runs' last steps only", steps > 0)
