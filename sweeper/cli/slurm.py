"""`python -m sweeper.slurm status|cancel SWEEP_DIR`: the Slurm jobs of a sweep submitted with launcher=slurm.

    python -m sweeper.slurm status SWEEP_DIR     # job state per run (and fix statuses of jobs that died)
    python -m sweeper.slurm cancel SWEEP_DIR     # scancel every job of the sweep (runs checkpoint first)
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sweeper.backends.slurm.jobs import SlurmUnavailable, cancel, status_line, sync_statuses
from sweeper.cli.boundary import run_command
from sweeper.docstrings import docstring
from sweeper.errors import UsageError
from sweeper.plan.slurm_record import RECORD, read_record
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir

USAGE = "usage: python -m sweeper.slurm status|cancel SWEEP_DIR"

def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.slurm", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + docstring(sys.modules[__name__]).split("\n\n")[1])
        return 0
    if len(argv) != 2 or argv[0] not in ("status", "cancel"):
        raise UsageError(f"{USAGE} (got: {' '.join(argv)[:80] or 'nothing'})")
    sweep_dir = Path(argv[1])
    if not (sweep_dir / RECORD).is_file():
        raise UsageError(f"{sweep_dir / RECORD} not found: not a sweep submitted with launcher=slurm")
    try:
        if argv[0] == "cancel":
            live = cancel(sweep_dir)
            print(f"cancelled {len(live)} job(s): {' '.join(live)}" if live else "no live job to cancel")
            return 0
        jobs = read_record(sweep_dir).get("jobs", {})
        for run_id, (status, state_) in sorted(sync_statuses(sweep_dir).items()):
            try:
                record = RunDir(sweep_dir / jobs[run_id]["run_dir"]).read_status().to_dict()
            except UnreadableFile as e:
                record = {"status": status, "error": str(e)}
            print(status_line(jobs[run_id]["run_dir"], jobs[run_id]["job_id"], state_, {**record, "status": status}))
    except (SlurmUnavailable, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        print(f"sweeper.slurm: error: {one_line(e)}", file=sys.stderr)
        return 1
    return 0


def one_line(e: Exception) -> str:
    """What Slurm said, on one line: its last meaningful line, without the tool's own prefixes."""
    if isinstance(e, SlurmUnavailable):
        return str(e)
    out = getattr(e, "stderr", None) or getattr(e, "output", None) or ""
    out = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
    said = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return (f"{' '.join(map(str, e.cmd))[:60]} failed ({said[-1] if said else e}); check that this machine "
            f"reaches the Slurm controller (`scontrol ping`)")
