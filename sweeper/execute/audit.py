"""The resume audit of a run config: is the run stopped and resumed bitwise the run that never stopped?

    report = audit_run_config(task, run_cfg, work_dir, steps=40, stop_at=17, mode="kill")   # the task's audit hook
    refusal = sweep_audit(plan, log=progress.log)     # `sweeper.audit=true`: the baseline before any seed

The audit is the task's hook `task.audit` (module:function; the built-in trainer's is sweeper.train.audit:
audit_resume): called with the run config, a work dir and the options below, it returns a report with
`.identical` and `.format()`, raises ValueError for bad options and anything else when an audit run failed.
`python -m sweeper.audit` is its command.
"""
from __future__ import annotations

from pathlib import Path

from sweeper.config.sweep import load_hook
from sweeper.config.task import TaskSpec
from sweeper.errors import UsageError

PREFLIGHT_MAX_STEPS = 100   # the preflight audits the first steps of the baseline run only


class AuditFailed(Exception):
    """An audit run failed (not a divergence): the message says how."""


def check_auditable(task: TaskSpec, what: str) -> None:
    """UsageError when the task has no audit hook (`what` names the command or key that asked for it)."""
    if not task.audit:
        raise UsageError(f"{what} needs the task's resume audit hook: set task.audit=module:function (the built-in "
                         f"trainer has one); this sweep runs {task.name}, which has none: check your own resume "
                         f"with an interrupted run instead")


def audit_run_config(task: TaskSpec, run_cfg: dict, work_dir: str | Path, *, steps: int | None = None,
                     stop_at: int | None = None, mode: str = "stop", threads: int | None = 1,
                     experiment: str | None = None, variant: str | None = None):
    """Audit one resolved run config (what config.yaml holds) in work_dir with the task's audit hook; returns its
    report (experiment/variant name the run in it). Bad audit options raise UsageError; a failed audit run raises
    AuditFailed."""
    check_auditable(task, "the resume audit")
    hook = load_hook(task, "audit")
    try:
        return hook(run_cfg, work_dir, steps=steps, stop_at=stop_at, mode=mode, threads=threads,
                    experiment=experiment, variant=variant)
    except ValueError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - the hook's contract: anything but ValueError is a failed audit run
        raise AuditFailed(f"{type(e).__name__}: {e}") from None


def preflight_audit(plan, log=print):
    """The sweep preflight (`sweeper.audit=true`): audit the baseline variant's first-seed run in
    SWEEP_DIR/audit over its first min(train.steps, 100) steps; logs the report and returns it. The caller
    refuses to launch when `report.identical` is False."""
    run = next(r for r in plan.runs if r.variant == plan.experiment.baseline)
    steps = min(run.total_steps or PREFLIGHT_MAX_STEPS, PREFLIGHT_MAX_STEPS)
    log(f"resume audit of {run.label} over {steps} steps (sweeper.audit=true) ...")
    report = audit_run_config(plan.task, run.config, plan.sweep_dir / "audit", steps=steps,
                              experiment=plan.experiment.name, variant=run.variant)
    log(report.format())
    return report


def sweep_audit(plan, log=print) -> str | None:
    """preflight_audit for a sweep: None when the resume is bitwise identical, else why not to launch."""
    try:
        report = preflight_audit(plan, log=log)
    except AuditFailed as e:
        return f"resume audit failed: {e}"
    if not report.identical:
        return f"resume audit diverged; not launching (audit runs kept in {plan.sweep_dir / 'audit'})"
    return None
