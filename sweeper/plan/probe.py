"""The determinism probe (sweeper.determinism_probe=true): one baseline seed run again, in its own dir inside the
sweep dir, after the baseline ran; the report compares it with the original bitwise
(sweeper.analysis.integrity.determinism). Torch-free.

    spec = probe_run(plan, statuses)       # a RunSpec in SWEEP_DIR/probe/<baseline>/seed_<k>, or None
    probe_dirs(sweep_dir)                  # [(variant, seed, RunDir)] of the probes that ran

The probe is not a run of the plan: the manifest does not list it, so no table, test or verdict counts it.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from sweeper.plan.make import Plan, RunSpec
from sweeper.run.files.rundir import RunDir, Status

PROBE = "probe"                   # SWEEP_DIR/probe/<variant>/seed_<k>
_SEED = re.compile(r"^seed_(\d+)$")


def probe_run(plan: Plan, statuses: dict[str, str]) -> RunSpec | None:
    """The rerun of the first baseline seed that finished (its config, its own dir); None when none finished."""
    for run in plan.runs:
        if run.variant == plan.experiment.baseline and statuses.get(run.run_id) == Status.FINISHED.value:
            return dataclasses.replace(run, run_id=f"{run.run_id}~probe",
                                       run_dir=Path(plan.sweep_dir) / PROBE / run.variant / f"seed_{run.seed}")
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


def probe_dirs(sweep_dir: str | Path) -> list[tuple[str, int, RunDir]]:
    """(variant, seed, run dir) of every probe in the sweep dir; a link is never followed out of it."""
    root = Path(sweep_dir) / PROBE
    if not root.is_dir() or root.is_symlink():
        return []
    found = []
    for variant_dir in sorted(root.iterdir()):
        if variant_dir.is_symlink() or not variant_dir.is_dir():
            continue
        for seed_dir in sorted(variant_dir.iterdir()):
            m = _SEED.match(seed_dir.name)
            if m and seed_dir.is_dir() and not seed_dir.is_symlink():
                found.append((variant_dir.name, int(m.group(1)), RunDir(seed_dir)))
    return found
