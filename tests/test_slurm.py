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
import subprocess
import time

import pytest
import yaml

from tests.helpers.commands import run_sweeper
from tests.helpers.local_pool import wait_for
from tests.helpers.slurm_cluster import preempt, require_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


require_cluster()

from sweeper.backends.progress import Progress  # noqa: E402
from sweeper.backends.slurm import backend as slurm  # noqa: E402  (after the check: submitit needs srun)
from sweeper.run.files.manifest import read_manifest  # noqa: E402
from tests.helpers.slurm_jobs import (  # noqa: E402
    FAST,
    ONE_VARIANT,
    final_state_hash,
    job_of,
    logged_step,
    metric_lines,
    planned,
    release_requeued,
    sacct_history,
    scontrol_job,
    status,
    task_spans,
)

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
    preempt(job)
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
