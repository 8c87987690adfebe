"""Multi-rank runs on a real Slurm cluster (`bash tests/slurm/cluster.sh up`; skipped without one): a run of 2
ranks is one array task with twice the per-rank resources (2 GPUs of the fake gres, 2 CPUs), variants of
different widths go in different arrays, both ranks run with torchrun's variables on the task's GPUs and CPUs;
preempted (SIGTERM, then USR2), the 2-rank run checkpoints on both ranks at one step, is requeued and resumes
bitwise equal to a 2-rank run that never stopped.

Run: ``python -m pytest -q tests/test_slurm_ranks.py``
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.slurm_cluster import preempt, require_cluster

require_cluster()

from sweeper.backends.progress import Progress
from tests.helpers.local_pool import wait_for
from tests.helpers.slurm_jobs import (  # noqa: E402
    final_state_hash,
    job_of,
    logged_step,
    metric_lines,
    planned,
    release_requeued,
    sacct_history,
    scontrol_job,
    slurm,
    status,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
WIDE = "+experiment.resources={nope: {ranks_per_run: 2}}"


def test_a_two_rank_run_is_one_task_with_two_ranks_resources_in_its_own_array(tmp_path, tiny):
    plan, cfg = planned(tmp_path, tiny, "seeds=0", "~experiment.variants.rope_frozen_qk", WIDE,
                        "launcher.cpus_per_task=1", "launcher.gpus_per_node=1")
    results = slurm.launch(plan, cfg, Progress(total=len(plan.runs)))
    assert set(results.values()) == {"finished"}, {r.label: status(r) for r in plan.runs}
    record = slurm.read_record(plan.sweep_dir)
    assert sorted(a["runs"] for a in record["arrays"]) == [1, 1]           # one array per width
    wide = next(r for r in plan.runs if r.variant == "nope")
    narrow = next(r for r in plan.runs if r.variant == "rope")
    tres = scontrol_job(job_of(plan, wide))["TRES"]
    assert "cpu=2" in tres and "gres/gpu=2" in tres, tres
    assert "cpu=1" in scontrol_job(job_of(plan, narrow))["TRES"]
    envs = [json.loads((wide.run_dir / name).read_text()) for name in ("env.json", "env.rank1.json")]
    assert [e["rank"]["rank"] for e in envs] == ["0", "1"] and {e["rank"]["world_size"] for e in envs} == {"2"}
    gpus = {e["cuda_visible_devices"] for e in envs}
    assert len(gpus) == 1 and len(gpus.pop().split(",")) == 2              # both of the task's GPUs, in rank order
    assert {e["torch_num_threads"] for e in envs} == {1} and {e["slurm_job_id"] for e in envs} != {None}
    assert wide.rundir.read_summary().fingerprint["world_size"] == 2


def test_preempting_a_two_rank_run_checkpoints_requeues_and_resumes_bitwise_equal(tmp_path, tiny):
    common = ["seeds=0", "~experiment.variants.rope", "~experiment.variants.rope_frozen_qk",
              "experiment.baseline=nope", "launcher.ranks_per_run=2", "train.steps=300", "train.ckpt_interval=0",
              "launcher.wait=false", "launcher.gpus_per_node=0"]
    plan, cfg = planned(tmp_path, tiny, *common, name="preempted")
    ref_plan, ref_cfg = planned(tmp_path, tiny, *common, name="reference")
    (run,), (ref,) = plan.runs, ref_plan.runs
    slurm.launch(plan, cfg, Progress(total=1))
    slurm.launch(ref_plan, ref_cfg, Progress(total=1))
    job = job_of(plan, run)
    wait_for(lambda: logged_step(run) >= 10, 180, "the 2-rank run to log step 10")
    preempt(job)
    release_requeued(job)
    wait_for(lambda: all(s in slurm.ENDED for s in slurm.job_states(
        {job, job_of(ref_plan, ref)}).values()), 300, "both runs to end")
    assert sacct_history(job) == ["REQUEUED", "COMPLETED"]
    assert status(run)["status"] == status(ref)["status"] == "finished"
    summary = run.rundir.read_summary()
    assert summary.extra.get("resumed_from") and summary.fingerprint["world_size"] == 2
    assert metric_lines(run) == metric_lines(ref)
    assert final_state_hash(run) == final_state_hash(ref)
