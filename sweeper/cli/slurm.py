"""`python -m sweeper.slurm status|cancel SWEEP_DIR`: the Slurm jobs of a sweep submitted with launcher=slurm.

    python -m sweeper.slurm status SWEEP_DIR     # job state per run (and fix statuses of jobs that died)
    python -m sweeper.slurm cancel SWEEP_DIR     # scancel every job of the sweep (runs checkpoint first)
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sweeper.backends.slurm.jobs import SlurmUnavailable, cancel, status_line, sync_statuses
from sweeper.plan.slurm_record import RECORD, read_record
from sweeper.run.rundir import RunDir, UnreadableFile

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("status", "cancel"):
        print("usage: python -m sweeper.slurm status|cancel SWEEP_DIR", file=sys.stderr)
        return 2
    sweep_dir = Path(argv[1])
    if not (sweep_dir / RECORD).exists():
        print(f"sweeper.slurm: error: {sweep_dir / RECORD} not found: not a sweep submitted with launcher=slurm",
              file=sys.stderr)
        return 2
    try:
        if argv[0] == "cancel":
            live = cancel(sweep_dir)
            print(f"cancelled {len(live)} job(s): {' '.join(live)}" if live else "no live job to cancel")
            return 0
        jobs = read_record(sweep_dir).get("jobs", {})
        for run_id, (status, state) in sorted(sync_statuses(sweep_dir).items()):
            try:
                record = RunDir(sweep_dir / jobs[run_id]["run_dir"]).read_status().to_dict()
            except UnreadableFile as e:
                record = {"status": status, "error": str(e)}
            print(status_line(jobs[run_id]["run_dir"], jobs[run_id]["job_id"], state, {**record, "status": status}))
    except UnreadableFile as e:
        print(f"sweeper.slurm: error: {e}", file=sys.stderr)
        return 2
    except (SlurmUnavailable, subprocess.CalledProcessError) as e:
        print(f"sweeper.slurm: error: {e}", file=sys.stderr)
        return 1
    return 0
