"""Checks a sweep can run before any seed launches (after the plan is written, under the sweep lock).

    check_preflight_options(sweep)            # plan time: modes known, the hooks they need are set (UsageError)
    plan_to_launch, refusal = run_preflights(plan, progress)

- `sweeper.audit=true`: the resume audit on the baseline variant's first seed (sweeper.audit); a divergence
  refuses the sweep. It audits the built-in trainer only (task.entry=sweeper.train:main).
- `sweeper.baseline_first=true` (the default, whenever the task has a preflight hook): the baseline's preflight
  runs first; a failing baseline stops the sweep before any run launches (no ablation on a broken baseline).
- `sweeper.preflight=warn|stop`: the task's preflight hook (task.preflight: module:function, called with a run
  config, returning a sweeper.health.HealthReport) once per variant; with `stop` a failing variant's seeds are
  not launched and are marked failed.
"""
from __future__ import annotations

import dataclasses
import time

from sweeper.config.sweep import load_hook
from sweeper.errors import UsageError
from sweeper.execute.audit import AUDITED_ENTRY, sweep_audit
from sweeper.run.files.rundir import KEEP, Status


def check_preflight_options(sweep) -> None:
    """At plan time: sweeper.preflight and sweeper.audit are usable with this sweep's task."""
    mode = sweep.sweeper.preflight
    if mode != "off" and not sweep.task.preflight:
        raise UsageError(f"sweeper.preflight={mode} needs the task's preflight hook: set task.preflight="
                         f"module:function (a run config -> sweeper.health.HealthReport), or use sweeper.preflight=off")
    if sweep.sweeper.audit and sweep.task.entry != AUDITED_ENTRY:
        raise UsageError(f"sweeper.audit=true audits the built-in trainer only (task.entry={AUDITED_ENTRY}); this "
                         f"sweep runs {sweep.task.name}: drop sweeper.audit, and check your own resume with "
                         f"an interrupted run instead")


def _check(plan, variant: str, hook, progress) -> tuple[str, str, str]:
    """The task's preflight hook on one variant's first seed: (pass | warn | fail, failing checks, details). Its
    report goes to SWEEP_DIR/preflight/<variant>.json. A hook that crashes or does not return a HealthReport fails."""
    t0 = time.monotonic()
    cfg = plan.sweep.variant_configs[variant]
    try:
        report = hook({**cfg, "seed": plan.seeds_of(variant)[0] if plan.seeds_of(variant) else plan.seeds[0]})
        if not all(hasattr(report, a) for a in ("verdict", "failures", "warnings", "write")):
            raise TypeError(f"returned {type(report).__name__}, not a sweeper.health.HealthReport")
    except Exception as e:  # noqa: BLE001 - the user's hook: its failure is this variant's preflight result
        progress.log(
            f"preflight {variant}: FAIL (task.preflight={plan.task.preflight} {type(e).__name__}: {e})".splitlines()[0]
        )
        raised = f"task.preflight raised {type(e).__name__}"
        return "fail", raised, f"{raised}: {e}".splitlines()[0]
    report.write(plan.sweep_dir / "preflight" / f"{variant}.json")
    progress.log(f"preflight {variant}: {report.verdict.upper()} ({time.monotonic() - t0:.1f}s)")
    for check in report.failures + report.warnings:
        progress.log(f"  {check.status.upper()} {check.name}: {check.message}")
    details = "; ".join(f"{c.name}: {c.message}".splitlines()[0] for c in report.failures)
    return report.verdict, "; ".join(c.name for c in report.failures), details


def baseline_first(plan) -> bool:
    """Whether the baseline's preflight gates the sweep: sweeper.baseline_first, a preflight hook, a baseline,
    and runs of another variant left to launch (a finished sweep, or one variant alone, is not held up)."""
    exp = plan.experiment
    if not plan.sweep.sweeper.baseline_first or not plan.task.preflight or not exp.baseline:
        return False
    if exp.baseline not in plan.sweep.variant_configs:
        return False
    return any(r.variant != exp.baseline and r.rundir.outcome() not in KEEP for r in plan.runs)


def baseline_refusal(plan, failed: str) -> str:
    b = plan.experiment.baseline
    return (
        f"the baseline {b} failed its health preflight ({failed}): no variant was launched (an ablation "
        f"against a broken baseline measures nothing); see {plan.sweep_dir / 'preflight' / (b + '.json')}, "
        f"fix the baseline and run the same command again, or launch anyway with sweeper.baseline_first=false"
    )


def health_preflight(plan, progress):
    """The task's preflight hook before any seed launches: (the plan left to launch, why the sweep must not start).

    The baseline goes first (sweeper.baseline_first, default true, whenever the task has a preflight hook):
    if it fails, nothing is launched and the refusal names the failing checks. Then, with sweeper.preflight=
    warn|stop, every other variant (first seed); with `stop` a failing variant's runs are not launched: they are
    marked failed (they count against the variant in the report).
    """
    mode = plan.sweep.sweeper.preflight
    hook = load_hook(plan.task, "preflight")
    variants = list(plan.sweep.variant_configs)
    if baseline_first(plan):
        verdict, _, details = _check(plan, plan.experiment.baseline, hook, progress)
        if verdict == "fail":
            return plan, baseline_refusal(plan, details)
        variants.remove(plan.experiment.baseline)
    if mode == "off":
        return plan, None
    stopped = {}
    for variant in variants:
        verdict, failed, _ = _check(plan, variant, hook, progress)
        if verdict == "fail" and mode == "stop":
            stopped[variant] = failed
    for run in plan.runs:
        if run.variant in stopped and run.rundir.outcome() not in KEEP:
            run.rundir.update_status(
                Status.FAILED,
                exit_code=None,
                ended=time.time(),
                error=f"not launched: sweep preflight failed ({stopped[run.variant]}); see "
                f"preflight/{run.variant}.json, or run with sweeper.preflight=warn",
            )
    if stopped:
        progress.log(f"preflight stopped variant(s) {', '.join(stopped)}: their seeds are not launched")
    return dataclasses.replace(plan, runs=[r for r in plan.runs if r.variant not in stopped]), None


def run_preflights(plan, progress):
    """The optional checks before any seed launches: (the plan left to launch, why the sweep must not start)."""
    if plan.sweep.sweeper.audit:
        refusal = sweep_audit(plan, log=progress.log)
        if refusal:
            return plan, refusal
    if plan.sweep.sweeper.preflight != "off" or baseline_first(plan):
        return health_preflight(plan, progress)
    return plan, None
