"""Checks a sweep can run before any seed launches (after the plan is written, under the sweep lock).

    check_preflight_options(sweep)            # plan time: modes known, the hooks they need are set (UsageError)
    plan_to_launch, refusal = run_preflights(plan, progress, lambda: backend.preflight_place(conf, plan))

- `sweeper.audit=true`: the resume audit on the baseline variant's first seed (sweeper.audit); a divergence
  refuses the sweep. It audits the built-in trainer only (task.entry=sweeper.train:main).
- `sweeper.baseline_first=true` (the default, whenever the task has a preflight hook): the baseline's preflight
  runs first; a failing baseline stops the sweep before any run launches (no ablation on a broken baseline).
- `sweeper.preflight=warn|stop`: the task's preflight hook (task.preflight: module:function, called with a run
  config, returning a sweeper.health.HealthReport) once per variant; with `stop` a failing variant's seeds are
  not launched and are marked failed.

A health preflight runs in a child process placed as a run is (sweeper.execute.preflight_child: a slot's threads
and cores, OMP_WAIT_POLICY=PASSIVE; never in the sweeper's own process with every core's OpenMP threads spinning),
shown as the sweep's phase in the live view and in piped output, and its verdict is kept with what it depended on
(sweeper.execute.preflight_cache): resuming or extending the same config does not run it again.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from sweeper.errors import UsageError
from sweeper.execute import preflight_cache
from sweeper.execute.audit import check_auditable, sweep_audit
from sweeper.health.result import HealthReport
from sweeper.run.files.atomic import atomic_write_json
from sweeper.run.files.status_values import KEEP, Status

Place = Callable[[], "tuple[dict, tuple[int, ...]]"]   # the backend's preflight_place for this sweep: (env, cores)


def check_preflight_options(sweep) -> None:
    """At plan time: sweeper.preflight and sweeper.audit are usable with this sweep's task."""
    mode = sweep.sweeper.preflight
    if mode != "off" and not sweep.task.preflight:
        raise UsageError(f"sweeper.preflight={mode} needs the task's preflight hook: set task.preflight="
                         f"module:function (a run config -> sweeper.health.HealthReport), or use sweeper.preflight=off")
    if sweep.sweeper.audit:
        check_auditable(sweep.task, "sweeper.audit=true")


def _check(plan, variant: str, place: Place, progress, started=None) -> tuple[str, str, str]:
    """The task's preflight hook on one variant's first seed: (pass | warn | fail, failing checks, details).

    A verdict stored for the same inputs and unchanged code is used as it is (sweeper.execute.preflight_cache);
    else the hook runs in a child process placed as a run is (place(): a slot's environment and cores) while the
    live view shows it as the sweep's phase. Its report goes to SWEEP_DIR/preflight/<variant>.json. A hook that
    crashes or does not return a HealthReport fails."""
    cfg = plan.sweep.variant_configs[variant]
    config = {**cfg, "seed": plan.seeds_of(variant)[0] if plan.seeds_of(variant) else plan.seeds[0]}
    env, cores = place()
    inputs = preflight_cache.preflight_inputs(plan.task.preflight, config, env)
    hit = preflight_cache.cached(plan.sweep_dir, variant, inputs)
    if hit is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(hit["at"]))
        progress.log(f"preflight {variant}: {hit['verdict'].upper()} (kept from {when}: same config and code; "
                     f"not run again)")
        return hit["verdict"], hit["failed"], hit["details"]
    t0 = time.monotonic()
    threads = env.get("OMP_NUM_THREADS", "?")
    where = f"cores {','.join(map(str, cores))}, " if cores else ""
    progress.log(f"preflight {variant}: running ({where}{threads} thread(s), "
                 f"OMP_WAIT_POLICY={env.get('OMP_WAIT_POLICY')}, its own process)")
    progress.phase(f"preflight {variant}")
    try:
        result, log = _run_child(plan, variant, config, env, cores, started)
    finally:
        progress.phase(None)
    if result is None and getattr(started, "stopped", False):
        return "fail", "stopped", "stopped with the sweep (Ctrl-C / SIGTERM)"   # not a verdict: nothing said
    if result is None or result.get("error"):
        why = result["error"] if result else f"its process ended without a result ({log})"
        progress.log(f"preflight {variant}: FAIL (task.preflight={plan.task.preflight} {why})".splitlines()[0])
        raised = f"task.preflight raised {why.split(':')[0]}" if result else "task.preflight crashed"
        return "fail", raised, f"{raised}: {why}".splitlines()[0]
    report = HealthReport.read(plan.sweep_dir / "preflight" / f"{variant}.json")
    progress.log(f"preflight {variant}: {report.verdict.upper()} ({time.monotonic() - t0:.1f}s)")
    for check in report.failures + report.warnings:
        progress.log(f"  {check.status.upper()} {check.name}: {check.message}")
    details = "; ".join(f"{c.name}: {c.message}".splitlines()[0] for c in report.failures)
    outcome = (report.verdict, "; ".join(c.name for c in report.failures), details)
    preflight_cache.store(plan.sweep_dir, variant, inputs, result["files"], outcome, result["wall_s"])
    return outcome


def _run_child(plan, variant: str, config: dict, env: dict, cores, started=None) -> tuple[dict | None, Path]:
    """sweeper.execute.preflight_child for one variant: (its result, or None when it died without one; its log,
    preflight/<variant>.log). Ctrl-C / SIGTERM here stops it (the KeyboardInterrupt goes on)."""
    folder = plan.sweep_dir / "preflight"
    folder.mkdir(parents=True, exist_ok=True)
    request, result, log = (folder / f"{variant}.{n}" for n in ("request.json", "result.json", "log"))
    result.unlink(missing_ok=True)
    atomic_write_json(request, {"hook": plan.task.preflight, "cwd": plan.task.cwd, "config": config,
                                "cores": list(cores), "report": str(folder / f"{variant}.json"), "result": str(result)})
    with open(log, "wb") as out, started or contextlib.nullcontext():
        proc = subprocess.Popen([sys.executable, "-m", "sweeper.execute.preflight_child", str(request)],
                                cwd=plan.task.cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        if started is not None:           # under its lock: the pool beside it never takes it for an orphan
            started(proc)
    try:
        proc.wait()
    finally:
        stop_process(proc)
    try:
        return json.loads(result.read_text()), log
    except (OSError, ValueError):
        return None, log
    finally:
        request.unlink(missing_ok=True)
        result.unlink(missing_ok=True)


def stop_process(proc: subprocess.Popen) -> None:
    """A preflight process that still runs: SIGTERM, SIGKILL after 5 s; waited for."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def health_preflight(plan, progress, place: Place, started=None):
    """The task's preflight hook before any seed launches: (the plan left to launch, why the sweep must not start).

    The baseline goes first (sweeper.baseline_first, default true, whenever the task has a preflight hook):
    if it fails, nothing is launched and the refusal names the failing checks. Then, with sweeper.preflight=
    warn|stop, every other variant (first seed); with `stop` a failing variant's runs are not launched: they are
    marked failed (they count against the variant in the report).
    """
    mode = plan.sweep.sweeper.preflight
    variants = list(plan.sweep.variant_configs)
    if baseline_first(plan):
        verdict, _, details = _check(plan, plan.experiment.baseline, place, progress, started)
        if verdict == "fail":
            return plan, baseline_refusal(plan, details)
        variants.remove(plan.experiment.baseline)
    if mode == "off":
        return plan, None
    stopped = {}
    for variant in variants:
        verdict, failed, _ = _check(plan, variant, place, progress, started)
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


def run_preflights(plan, progress, place: Place):
    """The optional checks before any seed launches: (the plan left to launch, why the sweep must not start).
    place: where a health preflight runs (Backend.preflight_place for this sweep's launcher)."""
    if plan.sweep.sweeper.audit:
        refusal = sweep_audit(plan, log=progress.log)
        if refusal:
            return plan, refusal
    if plan.sweep.sweeper.preflight != "off" or baseline_first(plan):
        return health_preflight(plan, progress, place)
    return plan, None
