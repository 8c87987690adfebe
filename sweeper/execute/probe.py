"""The determinism probe (sweeper.determinism_probe=true): after the sweep's runs, the first finished baseline
seed runs again in its own dir inside the sweep dir (sweeper.plan.probe), through the sweep's backend; the report
compares it with the original bitwise (sweeper.analysis.integrity.numbers.determinism).

    run_probe(plan, backend, conf, statuses)     # after launch_plan, under the sweep lock

The probe is not a run of the plan: the manifest does not list it, so no table, test or verdict counts it, and
its outcome does not change the sweep's exit status.
"""
from __future__ import annotations

import dataclasses

from sweeper.backends.progress import Progress
from sweeper.plan.make import Plan, RunSpec
from sweeper.plan.probe import probe_dir
from sweeper.run.files.status_values import Status


def probe_run(plan: Plan, statuses: dict[str, str]) -> RunSpec | None:
    """The rerun of the first baseline seed that finished (its config, its own dir); None when none finished."""
    for run in plan.runs:
        if run.variant == plan.experiment.baseline and statuses.get(run.run_id) == Status.FINISHED.value:
            return dataclasses.replace(run, run_id=f"{run.run_id}~probe",
                                       run_dir=probe_dir(plan.sweep_dir, run.variant, run.seed))
    return None


def write_probe(plan: Plan, run: RunSpec) -> None:
    """The probe's frozen config and pending status (as write_plan does for a planned run)."""
    rd = run.rundir
    rd.path.mkdir(parents=True, exist_ok=True)
    if not rd.config_path.exists():
        rd.write_config(run.config)
    if not rd.status_path.exists():
        rd.update_status(Status.PENDING, run_id=run.run_id, experiment=plan.experiment.name, variant=run.variant,
                         seed=run.seed)


def run_probe(plan: Plan, backend, conf, statuses: dict[str, str]) -> None:
    """Run the probe (one line says which run it repeats, or why there is none)."""
    progress = Progress(total=1)
    spec = probe_run(plan, statuses)
    if spec is None:
        progress.log("determinism probe: no baseline seed finished, nothing to run again")
        return
    write_probe(plan, spec)
    progress.log(f"determinism probe: {spec.label} again in {spec.run_dir}")
    backend.launch(dataclasses.replace(plan, runs=[spec]), conf, progress)
