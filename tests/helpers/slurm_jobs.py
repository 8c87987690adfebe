"""Helpers of the Slurm tests: plan a sweep as the CLI does, find a run's job, release a requeued job, read
accounting, digest a run's newest checkpoint. Import after tests.helpers.slurm_cluster.require_cluster().
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sweeper.backends.slurm import backend as slurm
from sweeper.cli.sweep import prepare
from sweeper.plan.make import write_plan
from tests.helpers.checkpoints import checkpoint_digest
from tests.helpers.local_pool import wait_for

ONE_VARIANT = ["~experiment.variants.nope", "~experiment.variants.rope_frozen_qk"]
FAST = ["launcher=slurm", "launcher.poll_s=0.5", "launcher.cpus_per_task=1"]


def planned(tmp_path: Path, tiny: list[str], *overrides: str, name: str = "sweep"):
    """Plan and write a sweep the way the CLI does; returns (plan, launcher config)."""
    argv = ["+experiment=rope", f"sweeper.dir={tmp_path / name}", *tiny, *FAST, *overrides]
    plan, backend, cfg = prepare(argv)
    assert isinstance(backend, slurm.SlurmBackend)
    write_plan(plan, argv)
    return plan, cfg


def job_of(plan, run) -> str:
    return slurm.read_record(plan.sweep_dir)["jobs"][run.run_id]["job_id"]


def logged_step(run) -> int:
    return run.rundir.last_metrics().get("step", 0)


def release_requeued(job_id: str) -> None:
    """Start a requeued job now instead of after Slurm's ~120 s BeginTime hold (>= 2 s after the requeue)."""
    wait_for(lambda: slurm.job_states({job_id})[job_id] == "PENDING", 60, f"job {job_id} requeued")
    time.sleep(2.5)
    for _ in range(10):
        r = subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True, text=True)
        if r.returncode == 0:
            return
        time.sleep(1)
    raise AssertionError(f"scontrol update JobId={job_id} StartTime=now failed: {r.stderr}")


def status(run) -> dict:
    return run.rundir.read_status().to_dict()


def scontrol_job(job_id: str) -> dict:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True,
                         check=True).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def sacct_history(job_id: str) -> list[str]:
    """Every state the job went through, oldest first (-D: requeued instances too)."""
    def states():
        out = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-o", "JobID,State", "-j", job_id.split("_")[0]],
                             capture_output=True, text=True).stdout
        return [line.split("|")[1].split()[0] for line in out.splitlines() if line.split("|")[0] == job_id]
    return wait_for(lambda: (s := states()) and s[-1] in slurm.ENDED and s, 30, f"accounting of {job_id}")


def task_spans(array_id: str) -> list[tuple[str, str]]:
    """(start, end) of every task of an array, from accounting (ISO times sort as strings)."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Start,End", "-j", array_id],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|")[1:3]) for line in out.splitlines() if line.strip()]


def final_state_hash(run) -> str:
    """Digest of the newest checkpoint: model, optimizer, scheduler, sampler and RNG states."""
    from sweeper.run.checkpoint import list_checkpoints

    return checkpoint_digest(list_checkpoints(run.run_dir / "ckpt")[0])


def metric_lines(run) -> list[dict]:
    return [{k: v for k, v in line.items() if k != "tokens_per_s"} for line in run.rundir.read_metrics()[0]]


