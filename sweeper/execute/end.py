"""The end of a sweep: execute the plan, then its report (unless sweeper.report=false), the sweep dir line and the
exit status.

    code = run_to_end(plan, backend, conf, argv, state)     # python -m sweeper, python -m sweeper.resume
    code = finish(sweep_dir, plan.sweep.sweeper, statuses)   # the adaptive driver, after its last look

Exit status of a sweep: 0 when every run finished (or diverged: an outcome, flagged in the report), 1 when a run
failed or was left unfinished (or a preflight refused the launch), 2 bad input (a UsageError from execution).
"""
from __future__ import annotations

import sys
from pathlib import Path

from sweeper.config.schema import SweeperConf
from sweeper.execute.launch import PreflightRefused, execute_sweep
from sweeper.pasted import pasted
from sweeper.plan.make import Plan
from sweeper.plan.sweep_dir_shown import gitignore_note, shown
from sweeper.run.files.status_values import KEEP


def run_to_end(plan: Plan, backend, conf, argv: list[str], state: dict) -> int:
    """A fixed sweep from its plan to its exit status."""
    try:
        statuses = execute_sweep(plan, backend, conf, argv, state)
    except PreflightRefused as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 1
    if statuses is None:   # submitted without waiting (launcher.wait=false)
        print(f"submitted; report later with `{pasted('python', '-m', 'sweeper.report', plan.sweep_dir)}`")
        return 0
    return finish(plan.sweep_dir, plan.sweep.sweeper, statuses)


def finish(sweep_dir: Path, sweeper: SweeperConf, statuses: dict[str, str]) -> int:
    """The end of a sweep that waited for its runs: the report (unless sweeper.report=false), the sweep dir,
    and the exit status: 1 when a run failed or was left unfinished, or a file of the report could not be written
    (each named: a full disk, a file-size limit), else 0."""
    unwritten: list[str] = []
    if sweeper.report:
        from sweeper.report.write import report_sweep  # deferred: pandas and scipy (about 1 s), after the runs
        print(report_sweep(sweep_dir, sweeper.decision, plots=True, journal=sweeper.journal, unwritten=unwritten))
    print(f"sweep dir: {shown(sweep_dir)}")
    note = gitignore_note(sweep_dir)
    if note:
        print(note)
    if unwritten:
        print(f"sweeper: error: {len(unwritten)} file(s) of the report not written (named above); the runs and the "
              f"decision table are complete: free space or raise the limit, then "
              f"`{pasted('python', '-m', 'sweeper.report', sweep_dir)}`", file=sys.stderr)
    return 1 if unwritten or any(s not in KEEP for s in statuses.values()) else 0
