"""Is a local Slurm cluster up (`bash tests/slurm/cluster.sh up`)? And a preemption of one of its jobs.
Slurm test modules start with

    require_cluster()          # module level: skip with the reason, or fail under SWEEPER_REQUIRE_SLURM=1 (CI)

before they import tests.helpers.slurm_jobs (submitit and the backend need srun).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest


def cluster_problem() -> str | None:
    for tool in ("sinfo", "sbatch", "squeue", "sacct", "scontrol", "srun"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed: {e}"
    if out.returncode != 0:
        return f"sinfo failed: {' '.join(out.stderr.split())[:200]}"
    if not {"idle", "mixed", "allocated"} & set(out.stdout.split()):
        return f"no usable Slurm node (sinfo: {out.stdout.split() or 'none'})"
    if subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True, timeout=20).returncode != 0:
        return "sacct fails: Slurm accounting (slurmdbd) is not running"
    return None



def require_cluster() -> None:
    """Skip the calling test module without a cluster; with SWEEPER_REQUIRE_SLURM=1 (CI) that is an error."""
    problem = cluster_problem()
    if problem:
        problem = f"no Slurm cluster ({problem}); start one with `bash tests/slurm/cluster.sh up`"
        if os.environ.get("SWEEPER_REQUIRE_SLURM") == "1":
            raise RuntimeError(f"SWEEPER_REQUIRE_SLURM=1 but {problem}")
        pytest.skip(problem, allow_module_level=True)


def preempt(job_id: str) -> None:
    """A preemption as the job sees it (submitit's own test hook does the same): SIGTERM, then USR2."""
    subprocess.run(["scancel", "--signal=TERM", job_id], check=True)
    time.sleep(0.3)
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
