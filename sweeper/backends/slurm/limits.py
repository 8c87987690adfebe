"""How many runs the Slurm cluster takes now, and in which arrays: its MaxArraySize and MaxJobCount.

    limits = cluster_limits()                       # scontrol show config: MaxArraySize, MaxJobCount
    sizes, at_once = split_arrays(1200, limits, jobs_in_controller(), array_parallelism=256)
    # MaxArraySize=1001, MaxJobCount=10000, 0 queued -> sizes [1001, 199], at_once [214, 42]

Slurm's rules (slurm.conf(5)): an array's indices run 0..MaxArraySize-1, so one array holds at most
MaxArraySize tasks; the controller holds at most MaxJobCount jobs in memory, every task of an array counting as
one job and ended jobs counting until MinJobAge has passed, and a submission that would reach the limit is
refused. launcher.array_parallelism is the sweep's limit on runs at once: split among its arrays in proportion to
their sizes (each at least 1), so the sweep never runs more at once than one array would have.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass

DEFAULT_MAX_ARRAY_SIZE = 1001    # Slurm's defaults, used where the configuration does not say
DEFAULT_MAX_JOB_COUNT = 10000


@dataclass(frozen=True)
class ClusterLimits:
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_job_count: int = DEFAULT_MAX_JOB_COUNT

    def describe(self) -> str:
        return f"MaxArraySize={self.max_array_size}, MaxJobCount={self.max_job_count}"


def parse_config(text: str) -> ClusterLimits:
    """The limits from `scontrol show config` output ("MaxArraySize            = 1001" lines)."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("MaxArraySize", "MaxJobCount") and value.strip().isdigit():
            found[key.strip()] = int(value.strip())
    return ClusterLimits(found.get("MaxArraySize", DEFAULT_MAX_ARRAY_SIZE),
                         found.get("MaxJobCount", DEFAULT_MAX_JOB_COUNT))


def cluster_limits() -> ClusterLimits:
    """The running controller's limits (Slurm's defaults where scontrol does not answer: sbatch still judges)."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ClusterLimits()
    return parse_config(out.stdout) if out.returncode == 0 else ClusterLimits()


def jobs_in_controller() -> int:
    """Jobs the controller holds now, every user's, each array task one, ended ones too (what MaxJobCount counts)."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%i"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.strip()) if out.returncode == 0 else 0


def room(limits: ClusterLimits, in_controller: int) -> int:
    """Jobs that may be submitted now: a submission reaching MaxJobCount is refused, so one less than the gap."""
    return max(0, limits.max_job_count - 1 - in_controller)


def split_arrays(n_runs: int, limits: ClusterLimits, in_controller: int,
                 array_parallelism: int) -> tuple[list[int], list[int]]:
    """(array sizes, runs at once per array) for the first runs of n_runs that fit now: as few arrays as the
    limits allow, each at most MaxArraySize, all together at most room(); [] when nothing fits yet."""
    if n_runs < 0 or limits.max_array_size < 1 or array_parallelism < 1:
        raise ValueError(f"split_arrays({n_runs}, {limits}, ..., {array_parallelism}): counts must be positive")
    fits = min(n_runs, room(limits, in_controller))
    sizes = [min(limits.max_array_size, fits - start) for start in range(0, fits, limits.max_array_size)]
    return sizes, share(array_parallelism, sizes)


def share(at_once: int, sizes: list[int]) -> list[int]:
    """at_once split among arrays in proportion to their sizes (largest remainders), each at least 1 and at
    most its size; the total is min(at_once, sum(sizes)) unless there are more arrays than at_once."""
    total = sum(sizes)
    if total == 0:
        return [1 for _ in sizes]
    budget = min(at_once, total)
    exact = [budget * s / total for s in sizes]
    parts = [max(1, min(s, int(e))) for s, e in zip(sizes, exact)]
    order = sorted(range(len(sizes)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in order:
        if sum(parts) >= budget:
            break
        if parts[i] < sizes[i]:
            parts[i] += 1
    return parts
