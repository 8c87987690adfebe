"""Executing a plan, the one path of every sweep: lock -> write -> repair -> preflight -> launch -> report.

    code = execute_sweep(plan, backend, conf, argv, state)       # a fixed sweep (python -m sweeper, sweeper.resume)
    with sweep_lock(plan.sweep_dir):                             # an adaptive sweep, look by look:
        statuses = launch_plan(plan, backend, conf, argv, progress, state, preflight=first_look)
    code = finish(sweep_dir, plan.sweep.sweeper, statuses)       # report, the sweep dir line, the exit status

Exit status of a sweep: 0 when every run finished (or diverged: an outcome, flagged in the report), 1 when a
run failed or was left unfinished (or a preflight refused the launch), 2 bad input (a UsageError raised here:
another sweeper holds the dir, the dir holds another plan, the backend refuses the launch). Ctrl-C / SIGTERM
propagate as KeyboardInterrupt: the command's boundary prints `interrupted` (sweeper.cli.boundary).
"""
from __future__ import annotations

import sys
from pathlib import Path

from sweeper.config.schema import SweeperConf
from sweeper.execute.preflight import run_preflights
from sweeper.plan.lock import sweep_lock
from sweeper.plan.make import Plan, keep_recorded_launch, repair_stale, write_plan
from sweeper.report.live import Progress
from sweeper.run.files.rundir import KEEP


class PreflightRefused(Exception):
    """A preflight (the resume audit, the baseline's health) says the sweep must not start."""


def fix_launch(plan: Plan, backend, conf) -> Plan:
    """plan.launch: the settings recorded in the sweep dir, else the backend's for the launcher config and the
    FULL plan (never the runs left)."""
    return keep_recorded_launch(plan, backend.launch_settings(conf, plan))


def launch_plan(plan: Plan, backend, conf, argv: list[str], progress: Progress, state: dict,
                preflight: bool = True) -> dict[str, str] | None:
    """Under the caller's sweep lock: write the plan, repair runs a killed sweeper left running, run the
    preflights, launch; run_id -> final status (None: submitted without waiting). PreflightRefused says why not."""
    write_plan(plan, argv)                       # whole or not at all: Ctrl-C waits for it
    state["sweep_dir"] = plan.sweep_dir
    stale = repair_stale(plan)
    if stale:
        progress.log(f"repaired {len(stale)} run(s) left `running` by a killed sweeper (now interrupted, "
                     f"resumable): {', '.join(stale)}")
    if preflight:
        plan, refusal = run_preflights(plan, progress, lambda: backend.preflight_place(conf, plan))
        if refusal:
            raise PreflightRefused(refusal)
    return backend.launch(plan, conf, progress)


def execute_sweep(plan: Plan, backend, conf, argv: list[str], state: dict) -> int:
    """A fixed sweep: lock the sweep dir, launch the plan, report; the exit status."""
    with sweep_lock(plan.sweep_dir):
        progress = Progress(total=len(plan.runs))
        progress.log(f"sweep dir {plan.sweep_dir}: {len(plan.runs)} runs "
                     f"({len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds)")
        for note in plan.notes:
            progress.log(f"note: {note}")
        try:
            with progress.ticking():     # the clock and counters move while the preflight or a warm start blocks
                statuses = launch_plan(plan, backend, conf, argv, progress, state)
        except PreflightRefused as e:
            print(f"sweeper: error: {e}", file=sys.stderr)
            return 1
    if statuses is None:   # submitted without waiting (launcher.wait=false)
        print(f"submitted; report later with `python -m sweeper.report {plan.sweep_dir}`")
        return 0
    return finish(plan.sweep_dir, plan.sweep.sweeper, statuses)


def finish(sweep_dir: Path, sweeper: SweeperConf, statuses: dict[str, str]) -> int:
    """The end of a sweep that waited for its runs: the report (unless sweeper.report=false), the sweep dir,
    and the exit status: 1 when a run failed or was left unfinished, else 0."""
    if sweeper.report:
        from sweeper.report.write import report_sweep  # deferred: pandas and scipy (about 1 s), after the runs
        print(report_sweep(sweep_dir, plots=True, journal=sweeper.journal))
    print(f"sweep dir: {sweep_dir}")
    return 1 if any(s not in KEEP for s in statuses.values()) else 0
