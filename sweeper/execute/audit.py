"""The resume audit of a run config: is the run stopped and resumed bitwise the run that never stopped?

    report = audit_run_config(run_cfg, work_dir, steps=40, stop_at=17, mode="kill")   # sweeper.train.audit
    refusal = sweep_audit(plan, log=progress.log)     # `sweeper.audit=true`: the baseline before any seed

The audit knows the built-in trainer only (task.entry = AUDITED_ENTRY); `python -m sweeper.audit` is its command.
"""
from __future__ import annotations

from pathlib import Path

from sweeper.errors import UsageError

AUDITED_ENTRY = "sweeper.train:main"


PREFLIGHT_MAX_STEPS = 100   # the preflight audits the first steps of the baseline run only


def audit_run_config(run_cfg: dict, work_dir: str | Path, *, steps: int | None = None, stop_at: int | None = None,
                     mode: str = "stop", threads: int | None = 1, experiment: str | None = None,
                     variant: str | None = None):
    """Audit one resolved run config (what config.yaml holds) in work_dir; returns train.audit.AuditReport
    (experiment/variant name the run in it). Bad audit options raise UsageError; a crashed audit process raises
    train.audit.AuditError."""
    from sweeper.train.audit import audit_resume  # deferred: torch (about 2 s), only when an audit runs
    try:
        return audit_resume(run_cfg, work_dir, steps=steps, stop_at=stop_at, mode=mode, threads=threads,
                            experiment=experiment, variant=variant)
    except ValueError as e:
        raise UsageError(str(e)) from None


def preflight_audit(plan, log=print):
    """The sweep preflight (`sweeper.audit=true`): audit the baseline variant's first-seed run in
    SWEEP_DIR/audit over its first min(train.steps, 100) steps; logs the report and returns it. The caller
    refuses to launch when `report.identical` is False."""
    run = next(r for r in plan.runs if r.variant == plan.experiment.baseline)
    steps = min(run.total_steps or PREFLIGHT_MAX_STEPS, PREFLIGHT_MAX_STEPS)
    log(f"resume audit of {run.label} over {steps} steps (sweeper.audit=true) ...")
    report = audit_run_config(run.config, plan.sweep_dir / "audit", steps=steps, experiment=plan.experiment.name,
                              variant=run.variant)
    log(report.format())
    return report


def sweep_audit(plan, log=print) -> str | None:
    """preflight_audit for a sweep: None when the resume is bitwise identical, else why not to launch."""
    from sweeper.train.audit import AuditError  # deferred: torch (about 2 s), only when an audit runs

    try:
        report = preflight_audit(plan, log=log)
    except AuditError as e:
        return f"resume audit failed: {e}"
    if not report.identical:
        return f"resume audit diverged; not launching (audit runs kept in {plan.sweep_dir / 'audit'})"
    return None
