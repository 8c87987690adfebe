"""Executing a plan, the one path of every sweep: lock -> write -> repair -> preflight -> launch.

    statuses = execute_sweep(plan, backend, conf, argv, state)   # a fixed sweep (python -m sweeper, sweeper.resume)
    with sweep_lock(plan.sweep_dir):                             # an adaptive sweep, look by look:
        statuses = launch_plan(plan, backend, conf, argv, progress, state, preflight=first_look)

What follows a sweep (its report, the exit status) is sweeper.execute.end (run_to_end). A UsageError raised here
is bad input (another sweeper holds the dir, the dir holds another plan, the backend refuses the launch);
PreflightRefused says a preflight refused the launch. Ctrl-C / SIGTERM propagate as KeyboardInterrupt: the
command's boundary prints `interrupted` (sweeper.cli.boundary).
"""
from __future__ import annotations

from sweeper.backends.progress import Progress
from sweeper.errors import UsageError
from sweeper.execute.preflight import baseline_first, run_preflights
from sweeper.execute.preflight_gate import PreflightGate, discard_beside
from sweeper.execute.probe import run_probe
from sweeper.plan.links import check_no_links
from sweeper.plan.lock import sweep_lock
from sweeper.plan.make import Plan, keep_recorded_launch, repair_stale, write_plan
from sweeper.run.files.status_values import KEEP
from sweeper.store.link import link_reused
from sweeper.store.lookup import reused_line


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
    check_no_links(plan.sweep_dir, [run.run_dir for run in plan.runs])    # never written through a link
    write_plan(plan, argv)                       # whole or not at all: Ctrl-C waits for it
    state["sweep_dir"] = plan.sweep_dir
    if plan.reused:                              # sweeper.store: earlier sweeps' runs, their files brought here
        brought = link_reused(plan)
        progress.log(f"{reused_line(plan)}: {len(plan.runs) - len(plan.reused)} to train"
                     if brought else f"{len(plan.reused)} reused run(s) already here")
    stale = repair_stale(plan)
    if stale:
        progress.log(f"repaired {len(stale)} run(s) left `running` by a killed sweeper (now interrupted, "
                     f"resumable): {', '.join(stale)}")
    place = lambda: backend.preflight_place(conf, plan)      # noqa: E731 - where a health preflight runs
    if preflight and _beside_the_baseline(plan, backend):
        return _launch_gated(plan, backend, conf, progress, PreflightGate.start(plan, progress, place))
    if preflight:
        plan, refusal = run_preflights(plan, progress, place)
        if refusal:
            raise PreflightRefused(refusal)
    return backend.launch(plan, conf, progress)


def _beside_the_baseline(plan: Plan, backend) -> bool:
    """Whether the health preflight runs beside the baseline's seeds (sweeper.execute.preflight_gate): the
    baseline gates the sweep (sweeper.baseline_first), no resume audit goes first, and the backend's launch
    takes a gate (the local pool)."""
    return backend.gates_preflight and not plan.sweep.sweeper.audit and baseline_first(plan)


def _launch_gated(plan: Plan, backend, conf, progress: Progress, gate: PreflightGate) -> dict[str, str] | None:
    """backend.launch with the preflight running beside it; PreflightRefused when the baseline failed it (the
    pool then stopped: no variant started, the baseline's seeds that ran beside it discarded)."""
    beside = [r for r in plan.runs if r.variant == gate.baseline and r.rundir.outcome() not in KEEP]
    try:
        statuses = backend.launch(plan, conf, progress, gate=gate)
    except UsageError:
        gate.close(stop=gate.refusal is None)      # the pool stopped for the preflight's refusal, or another reason
        if gate.refusal:
            raise _refused(gate.refusal, plan, beside, progress) from None
        raise
    except BaseException:
        gate.close(stop=True)
        raise
    gate.close()
    if gate.refusal:
        raise _refused(gate.refusal, plan, beside, progress)
    return statuses


def _refused(refusal: str, plan: Plan, beside: list, progress: Progress) -> PreflightRefused:
    discarded = discard_beside(plan, beside)
    if discarded:
        progress.log(f"discarded {len(discarded)} baseline run(s) that ran beside its failing preflight (they run "
                     f"again, from scratch, on the next launch): {', '.join(discarded)}")
    return PreflightRefused(refusal)


def execute_sweep(plan: Plan, backend, conf, argv: list[str], state: dict) -> dict[str, str] | None:
    """A fixed sweep: lock the sweep dir, launch the plan; run_id -> final status (None: submitted without
    waiting, launcher.wait=false). PreflightRefused says why it did not launch."""
    with sweep_lock(plan.sweep_dir):
        progress = Progress(total=len(plan.runs), metric=plan.experiment.metric, baseline=plan.experiment.baseline,
                            controls=tuple(plan.experiment.controls))
        progress.log(f"sweep dir {plan.sweep_dir}: {len(plan.runs)} runs "
                     f"({len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds)")
        for note in plan.notes:
            progress.log(f"note: {note}")
        with progress.ticking():     # the clock and counters move while the preflight or a warm start blocks
            statuses = launch_plan(plan, backend, conf, argv, progress, state)
        if statuses is not None and plan.sweep.sweeper.determinism_probe:
            run_probe(plan, backend, conf, statuses)
        return statuses
