"""The plan of a fixed-seeds sweep, checked against its sweep dir: what `python -m sweeper` launches.

    plan = plan_sweep(compose_sweep(argv))    # then sweeper.execute.launch.fix_launch, the probes, the launch

In order, nothing written: make_plan (sweep.seeds x variants, refused above sweeper.max_runs before a seed list is
built), the paths it will write (before its dir is read: a file there, a name too long), reconcile (the plan
recorded in its sweep dir; more seeds only with sweeper.extend=true, then a warning line when the code changed
since the recorded runs), the paths again (the reconciled plan). Every refusal is a one-line UsageError.
"""
from __future__ import annotations

import sys

from sweeper.config.sweep import Sweep
from sweeper.plan.code_change import code_change
from sweeper.plan.make import Plan, make_plan, reconcile
from sweeper.plan.paths import check_paths


def plan_sweep(sweep: Sweep) -> Plan:
    """The reconciled plan of a sweep of fixed seeds (seeds=adaptive plans look by look: sweeper.adaptive)."""
    writable = not sweep.sweeper.dry_run
    plan = make_plan(sweep)
    check_paths(plan, writable=writable)
    plan = reconcile(plan, extend=sweep.sweeper.extend)
    if sweep.sweeper.extend:                       # onto changed code: one line, before anything starts
        changed = code_change(plan)
        if changed:
            print(f"sweeper: warning: {changed}", file=sys.stderr, flush=True)
    check_paths(plan, writable=writable)
    return plan
