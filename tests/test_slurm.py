"""The Slurm backend against a real cluster: `bash tests/slurm/cluster.sh up`, then
`python -m pytest -q tests/test_slurm.py` (skipped with the reason when no cluster answers; set
SWEEPER_REQUIRE_SLURM=1 to make that a failure, as CI does).

Array submission with per-task GPUs and threads, one failed task beside finished siblings, submit-and-exit
then adopt/skip on the next launch, cancel -> interrupted -> resumed, and preemption -> checkpoint -> requeue ->
a resumed run bitwise equal to one that was never interrupted.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from test_slurm_task import checkpoint_digest

from tests.helpers.commands import run_sweeper
from tests.helpers.local_pool import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cluster_problem() -> str | None:
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


_PROBLEM = _cluster_problem()
if _PROBLEM:
    _PROBLEM = f"no Slurm cluster ({_PROBLEM}); start one with `bash tests/slurm/cluster.sh up`"
    if os.environ.get("SWEEPER_REQUIRE_SLURM") == "1":
        raise RuntimeError(f"SWEEPER_REQUIRE_SLURM=1 but {_PROBLEM}")
    pytest.skip(_PROBLEM, allow_module_level=True)

from sweeper.backends.slurm import backend as slurm  # noqa: E402  (after the skip: submitit needs srun)
from sweeper.cli.sweep import prepare  # noqa: E402
from sweeper.plan.make import write_plan  # noqa: E402
from sweeper.report.live import Progress  # noqa: E402
from sweeper.run.files.manifest import read_manifest  # noqa: E402

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


# -- tests --------------------------------------------------------------------------------------------------

def test_array_gives_each_run_its_gpu_and_threads_and_a_failure_spares_siblings(tmp_path, tiny):
    plan, cfg = planned(tmp_path, tiny, "seeds=0-1", "~experiment.variants.rope_frozen_qk",
                        "launcher.cpus_per_task=2", "launcher.gpus_per_node=1", "launcher.array_parallelism=3",
                        "launcher.partition=gpu", "launcher.account=sweeper", "launcher.qos=high",
                        "launcher.mem_gb=1", "launcher.timeout_min=30", "+launcher.additional_parameters.comment=t1")
    assert len(plan.runs) == 4
    broken = next(r for r in plan.runs if r.variant == "nope" and r.seed == 1)
    config = yaml.safe_load((broken.run_dir / "config.yaml").read_text())
    config["train"]["lr"] = -1.0             # a deterministic error in the run itself (exit 2, status failed)
    (broken.run_dir / "config.yaml").write_text(yaml.safe_dump(config))

    results = slurm.launch(plan, cfg, Progress(total=len(plan.runs)))

    assert results == {r.run_id: ("failed" if r is broken else "finished") for r in plan.runs}
    record = slurm.read_record(plan.sweep_dir)
    assert len(record["arrays"]) == 1
    jobs = [record["jobs"][r.run_id]["job_id"] for r in plan.runs]
    array = record["arrays"][0]["array_job_id"]
    assert sorted(jobs) == sorted(f"{array}_{i}" for i in range(4))   # one array, one task per run
    assert "train.lr" in status(broken)["error"]
    states = {j: sacct_history(j)[-1] for j in jobs}
    assert states == {job_of(plan, r): ("FAILED" if r is broken else "COMPLETED") for r in plan.runs}

    info = scontrol_job(jobs[0])
    assert (info["Partition"], info["Account"], info["QOS"], info["Comment"], info["TimeLimit"]) == (
        "gpu", "sweeper", "high", "t1", "00:30:00")
    assert info["ArrayTaskThrottle"] == "3"
    assert "cpu=2" in info["TRES"] and "gres/gpu=1" in info["TRES"] and info["MinMemoryNode"] == "1G"

    spans = []
    for run in plan.runs:
        if run is broken:
            continue
        env = run.rundir.read_env()
        assert env["cuda_visible_devices"] in {"0", "1", "2", "3"}      # exactly one GPU, Slurm's choice
        assert env["env"]["OMP_NUM_THREADS"] == "2" and env["env"]["MKL_NUM_THREADS"] == "2"
        assert env["torch_num_threads"] == 2                              # set before torch was imported
        assert env["slurm_job_id"] is not None
        s = status(run)
        spans.append((s["started"], s["ended"], env["cuda_visible_devices"], run.label))
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, f"no two runs ran at the same time: {spans}"
    tasks = task_spans(array)                 # all 4 tasks, the failed one too (Slurm's start/end times)
    most_at_once = max(sum(1 for b in tasks if b[0] <= a[0] < b[1]) for a in tasks)
    assert len(tasks) == 4 and 2 <= most_at_once <= 3, f"array_parallelism=3 but {most_at_once} ran at once: {tasks}"
    for a, b in overlapping:
        assert a[2] != b[2], f"{a[3]} and {b[3]} ran at the same time on GPU {a[2]}"


def test_submit_and_exit_then_adopt_then_skip_from_the_sweep_dir(tmp_path, tiny):
    sweep_dir = tmp_path / "sweep"
    argv = ["+experiment=rope", "seeds=0", f"sweeper.dir={sweep_dir}", "sweeper.report=false", *tiny, *FAST]
    t0 = time.time()
    first = run_sweeper(*argv, "launcher.wait=false", timeout=120)
    assert first.returncode == 0, first.stderr
    assert "submitted" in first.stdout and time.time() - t0 < 60
    record = json.loads((sweep_dir / "slurm.json").read_text())
    assert len(record["jobs"]) == 3 and len(record["arrays"]) == 1

    second = run_sweeper(*argv, timeout=300)     # same command, waiting: adopts the queued jobs, submits nothing
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("adopt") + second.stdout.count("skip") == 3, second.stdout
    assert len(json.loads((sweep_dir / "slurm.json").read_text())["arrays"]) == 1
    manifest = read_manifest(sweep_dir)
    for entry in manifest.runs:
        assert manifest.run_dir(sweep_dir, entry).read_status().status == "finished"

    report = run_sweeper(str(sweep_dir), "--no-plots", module="sweeper.report")   # from the sweep dir alone
    assert report.returncode == 0 and (sweep_dir / "report.md").exists(), report.stdout + report.stderr

    third = run_sweeper(str(sweep_dir), "sweeper.report=false", module="sweeper.resume")   # nothing to do
    assert third.returncode == 0 and third.stdout.count("skip") == 3, third.stdout + third.stderr
    assert len(json.loads((sweep_dir / "slurm.json").read_text())["arrays"]) == 1

    shown = run_sweeper("status", str(sweep_dir), module="sweeper.slurm")
    assert shown.returncode == 0 and shown.stdout.count("COMPLETED") == 3 and shown.stdout.count("finished") == 3


def test_cancel_interrupts_one_run_and_the_next_launch_resumes_only_it(tmp_path, tiny):
    plan, cfg = planned(tmp_path, tiny, "seeds=0-1", *ONE_VARIANT, "train.steps=300", "train.ckpt_interval=0",
                        "launcher.wait=false")
    victim, sibling = plan.runs
    slurm.launch(plan, cfg, Progress(total=2))
    wait_for(lambda: logged_step(victim) >= 10, 120, "the run to log step 10")
    subprocess.run(["scancel", job_of(plan, victim)], check=True)
    wait_for(lambda: all(s in slurm.ENDED for s in slurm.job_states(
        {job_of(plan, victim), job_of(plan, sibling)}).values()), 180, "both jobs to end")

    assert status(victim)["status"] == "interrupted", status(victim)
    assert list((victim.run_dir / "ckpt").glob("step_*.pt")), "no checkpoint saved on cancel"
    assert status(sibling)["status"] == "finished"
    assert sacct_history(job_of(plan, victim))[-1] == "CANCELLED"
    sibling_ended = status(sibling)["ended"]

    again = slurm.launch(plan, dataclasses.replace(cfg, wait=True), Progress(total=2))
    assert again == {victim.run_id: "finished", sibling.run_id: "finished"}
    record = slurm.read_record(plan.sweep_dir)
    assert [a["runs"] for a in record["arrays"]] == [2, 1]                # only the cancelled run resubmitted
    assert status(sibling)["ended"] == sibling_ended
    summary = victim.rundir.read_summary()
    assert summary.extra["resumed_from"] and summary.steps == 300
    nothing = run_sweeper("cancel", str(plan.sweep_dir), module="sweeper.slurm")
    assert nothing.returncode == 0 and "no live job" in nothing.stdout


def test_preemption_checkpoints_requeues_and_resumes_bitwise_equal(tmp_path, tiny):
    common = ["seeds=0", *ONE_VARIANT, "train.steps=300", "train.ckpt_interval=0", "launcher.wait=false"]
    plan, cfg = planned(tmp_path, tiny, *common, name="preempted")
    ref_plan, ref_cfg = planned(tmp_path, tiny, *common, name="reference")
    (run,), (ref,) = plan.runs, ref_plan.runs
    slurm.launch(plan, cfg, Progress(total=1))
    slurm.launch(ref_plan, ref_cfg, Progress(total=1))
    job = job_of(plan, run)
    wait_for(lambda: logged_step(run) >= 10, 120, "the run to log step 10")
    # what a preemption looks like to the job (submitit's own test hook does the same): SIGTERM, then USR2
    subprocess.run(["scancel", "--signal=TERM", job], check=True)
    time.sleep(0.3)
    subprocess.run(["scancel", "--signal=USR2", job], check=True)
    release_requeued(job)
    wait_for(lambda: all(s in slurm.ENDED for s in slurm.job_states(
        {job, job_of(ref_plan, ref)}).values()), 180, "both runs to end")

    assert sacct_history(job) == ["REQUEUED", "COMPLETED"]
    assert status(run)["status"] == status(ref)["status"] == "finished"
    log = run.rundir.log_path.read_text()
    assert "restart 1" in log and "resumed from" in log, log[-2000:]
    summary = run.rundir.read_summary()
    stopped_at = int(summary.extra["resumed_from"].split("_")[1].split(".")[0])
    assert 0 < stopped_at < 300                           # resumed mid-run from the preemption checkpoint
    assert ref.rundir.read_summary().extra.get("resumed_from") is None
    assert metric_lines(run) == metric_lines(ref)
    assert final_state_hash(run) == final_state_hash(ref)
