"""Slurm job states of a sweep's runs: ask squeue/sacct, settle the runs whose jobs ended, cancel live jobs.

    known = sync_statuses(sweep_dir)         # run_id -> (run status, Slurm state); ended jobs settled
    cancel(sweep_dir)                        # scancel every live job of the sweep (runs checkpoint first)
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sweeper.backends.failures import EXCEPTION, LOST_NODE, OOM, SIGNAL
from sweeper.plan.slurm_record import read_record
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import TERMINAL, Status

# Slurm job states after which a job will not run again (everything else: still queued, running or requeued)
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE", "UNKNOWN")


RESUMABLE = ("CANCELLED", "PREEMPTED", "NODE_FAIL", "TIMEOUT")   # the run ends interrupted, not failed


# The failure class (sweeper.backends.failures) of a job that ended failed before its run could record why
JOB_END_CLASSES = {"OUT_OF_MEMORY": OOM, "NODE_FAIL": LOST_NODE, "BOOT_FAIL": LOST_NODE, "DEADLINE": SIGNAL,
                   "FAILED": EXCEPTION, "UNKNOWN": EXCEPTION}


class SlurmUnavailable(RuntimeError):
    """squeue did not answer: job states are unknown (nothing is settled or resubmitted on a guess)."""


def unreachable(said: str) -> str:
    """One line for a squeue that did not answer (a machine that reaches no controller prints several lines of
    DNS SRV and config errors): the last thing it said, and what to do."""
    lines = [ln.strip().removeprefix("squeue: error: ").removeprefix("squeue: ") for ln in said.splitlines()
             if ln.strip()]
    return (f"squeue did not answer ({lines[-1][:160] if lines else 'no output'}): the job states are unknown, "
            f"nothing was changed; run this on a machine of the cluster (a login node) or check `scontrol ping`")


def job_states(job_ids: set[str]) -> dict[str, str]:
    """Slurm state of each job id ("12_3" or "12"): squeue (controller memory, no lag), else sacct."""
    if not job_ids:
        return {}
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        q = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%T"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SlurmUnavailable(unreachable(str(e))) from None
    if q.returncode != 0 and "Invalid job id" not in q.stderr:   # ids unknown to the controller: ask sacct
        raise SlurmUnavailable(unreachable(q.stderr or f"exit status {q.returncode}"))
    states = {}
    for line in q.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        states[jid] = state
    for jid in job_ids - set(states):   # tasks never split off their array (a queued array cancelled: "12" only)
        array, _, task = jid.partition("_")
        if task and array in states:
            states[jid] = states[array]
    missing = job_ids - set(states)
    if missing:   # gone from the controller (MinJobAge): ask accounting
        cmd = ["sacct", "-X", "-n", "-P", "-o", "JobID,State"]
        for a in sorted({j.split("_")[0] for j in missing}):
            cmd += ["-j", a]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            jid, _, state = line.strip().partition("|")
            for one in expand_task_ids(jid):   # "12_[0-999%214]": tasks of an array that never started
                if one in missing:
                    states[one] = state.split()[0] if state else "UNKNOWN"   # "CANCELLED by 0" -> "CANCELLED"
    return {j: states.get(j, "UNKNOWN") for j in job_ids}


def expand_task_ids(job_id: str) -> list[str]:
    """Slurm's compact array ids as one id per task: "12_[0-2,5%4]" -> 12_0, 12_1, 12_2, 12_5; others as given."""
    array, sep, rest = job_id.partition("_[")
    if not sep or not rest.endswith("]"):
        return [job_id]
    out = []
    for part in rest[:-1].split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return [job_id]
        out += [f"{array}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def settle(run_dir: Path, job_id: str, state: str) -> dict:
    """The final status of a run whose job ended: its own, or one written here when the task could not."""
    rd = RunDir(run_dir)
    if rd.outcome() in TERMINAL:
        return rd.read_status().to_dict()
    kind = Status.INTERRUPTED if state in RESUMABLE else Status.FAILED
    error = f"Slurm job {job_id} ended {state} before the run did" + (
        "; it resumes from its last checkpoint on the next launch" if kind is Status.INTERRUPTED
        else f" (Slurm log: sacct -j {job_id}; run log: {rd.log_path})")
    extra = {"failure_class": JOB_END_CLASSES.get(state, EXCEPTION)} if kind is Status.FAILED else {}
    return rd.update_status(kind, ended=time.time(), error=error, slurm_state=state, **extra).to_dict()


def status_line(run_dir: str, job_id: str, state: str | None, record: dict) -> str:
    """One line of `python -m sweeper.slurm status`: where, which job, its Slurm state, the run's status and,
    for a run that did not finish, why (the failure class and error its status records)."""
    status = record.get("status", "?")
    line = f"{run_dir:<32} {job_id:<12} {state or '?':<12} {status}"
    if status not in (Status.FINISHED.value, Status.PENDING.value, Status.RUNNING.value) and record.get("error"):
        kind = f"{record['failure_class']}: " if record.get("failure_class") else ""
        line += f"  {kind}{record['error']}"
    return line


def sync_statuses(sweep_dir: Path) -> dict[str, tuple[str, str | None]]:
    """run_id -> (run status, Slurm state of its job); ended jobs leave no run running or pending."""
    sweep_dir = Path(sweep_dir)
    jobs = read_record(sweep_dir).get("jobs", {})
    states = job_states({j["job_id"] for j in jobs.values()})
    out = {}
    for run_id, j in jobs.items():
        state = states.get(j["job_id"])
        run_dir = sweep_dir / j["run_dir"]
        if state in ENDED:
            status = settle(run_dir, j["job_id"], state)["status"]
        else:
            status = RunDir(run_dir).outcome().value
        out[run_id] = (status, state)
    return out


def cancel(sweep_dir: Path) -> list[str]:
    """scancel every live job of the sweep (each run checkpoints and ends interrupted)."""
    known = sync_statuses(sweep_dir)
    jobs = read_record(sweep_dir).get("jobs", {})
    live = sorted(jobs[r]["job_id"] for r, (_, state) in known.items() if state is not None and state not in ENDED)
    if live:
        subprocess.run(["scancel", *live], check=True, timeout=60)
    return live
