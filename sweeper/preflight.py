"""Checks a sweep can run before any seed launches (after the plan is written, under the sweep lock).

    plan_to_launch, refusal = run_preflights(plan, progress)

- `sweeper.audit=true`: the resume audit on the baseline variant's first seed (sweeper.audit); a divergence
  refuses the sweep.
- `sweeper.preflight=warn|stop`: the health checks once per variant; with `stop` a failing variant's seeds are
  not launched and are marked failed.
"""
from __future__ import annotations

from sweeper.errors import UsageError

PREFLIGHT_MODES = ("off", "warn", "stop")


def check_preflight_mode(mode) -> None:
    if mode not in PREFLIGHT_MODES and mode is not False:   # `sweeper.preflight=false` reads as off
        raise UsageError(f"sweeper.preflight={mode!r}: accepted values are {', '.join(PREFLIGHT_MODES)}")


def health_preflight(plan, progress):
    """sweeper.preflight=warn|stop: health checks once per variant (first seed) before any seed launches.

    Reports go to SWEEP_DIR/preflight/<variant>.json. With `stop`, a failing variant's runs are not launched:
    they are marked failed (they count against the variant in the report). Returns the plan left to launch.
    """
    import dataclasses
    import time

    from sweeper.health import preflight_run_config
    from train.atomic import atomic_write_json, read_json

    mode = plan.sweep.sweeper.get("preflight") or "off"
    stopped = {}
    for variant, cfg in plan.sweep.variant_configs.items():
        t0 = time.time()
        report = preflight_run_config({**cfg, "seed": plan.seeds[0]})
        report.write(plan.sweep_dir / "preflight" / f"{variant}.json")
        progress.log(f"preflight {variant}: {report.verdict.upper()} ({time.time() - t0:.1f}s)")
        for check in report.failures + report.warnings:
            progress.log(f"  {check.status.upper()} {check.name}: {check.message}")
        if report.verdict == "fail" and mode == "stop":
            stopped[variant] = "; ".join(c.name for c in report.failures)
    for run in plan.runs:
        if run.variant in stopped:
            status = read_json(run.run_dir / "status.json", {}) or {}
            if status.get("status") != "finished":
                status.update(status="failed", exit_code=None, ended=time.time(),
                              error=f"not launched: sweep preflight failed ({stopped[run.variant]}); see "
                                    f"preflight/{run.variant}.json, or run with sweeper.preflight=warn")
                atomic_write_json(run.run_dir / "status.json", status)
    if stopped:
        progress.log(f"preflight stopped variant(s) {', '.join(stopped)}: their seeds are not launched")
    return dataclasses.replace(plan, runs=[r for r in plan.runs if r.variant not in stopped])


def run_preflights(plan, progress):
    """The optional checks before any seed launches: (the plan left to launch, why the sweep must not start)."""
    if plan.sweep.sweeper.get("audit"):
        from sweeper.audit import preflight_audit
        from train.audit import AuditError

        try:
            report = preflight_audit(plan, log=progress.log)
        except AuditError as e:
            return plan, f"resume audit failed: {e}"
        if not report.identical:
            return plan, f"resume audit diverged; not launching (audit runs kept in {plan.sweep_dir / 'audit'})"
    if (plan.sweep.sweeper.get("preflight") or "off") != "off":
        return health_preflight(plan, progress), None
    return plan, None
