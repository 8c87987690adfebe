"""Slurm at scale: a sweep larger than the cluster's MaxArraySize goes in several arrays, one record.

    SWEEPER_REQUIRE_SLURM=1 python -m pytest -q tests/test_slurm_scale.py    # needs `bash tests/slurm/cluster.sh up`

The split math (MaxArraySize, MaxJobCount, jobs already in the controller, array_parallelism shared) needs no
cluster; the 1,200-run sweep runs against the real one (MaxArraySize=1001, its default). Its jobs are submitted
held (sbatch --hold) so the shared 2-core cluster runs only the tasks the test releases: the last task of each
array, which must run its own run (the seed it reports is the seed its record names). The rest are cancelled.
"""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from sweeper.backends.slurm.limits import ClusterLimits, parse_config, room, share, split_arrays
from tests.helpers.local_pool import run, user_project, wait_for
from tests.helpers.slurm_cluster import cluster_problem

TINY_TASK = """
import sweeper
run = sweeper.init()
run.finish(val_loss=float(run.config["seed"]))
"""


# -- the split math (no cluster) ----------------------------------------------------------------------------

@pytest.mark.parametrize("n, limits, held, at_once, sizes, throttles", [
    (1200, (1001, 10000), 0, 256, [1001, 199], [214, 42]),        # the sweep on Slurm's defaults
    (1001, (1001, 10000), 0, 256, [1001], [256]),                 # exactly one full array
    (1002, (1001, 10000), 0, 8, [1001, 1], [7, 1]),               # every array runs at least one task
    (5000, (1001, 10000), 0, 4000, [1001] * 4 + [996], [801, 801, 801, 801, 796]),
    (1200, (1001, 10000), 9000, 256, [999], [256]),               # MaxJobCount: 10000 - 9000 - 1 fit now
    (1200, (1001, 10000), 9999, 256, [], []),                     # the controller is full: nothing yet
    (1200, (1001, 10000), 12000, 256, [], []),                    # over the limit (lowered while jobs stayed)
    (10, (4, 10000), 0, 3, [4, 4, 2], [1, 1, 1]),                 # more arrays than at_once: one each
    (0, (1001, 10000), 0, 256, [], []),
])
def test_split_fits_max_array_size_and_max_job_count(n, limits, held, at_once, sizes, throttles):
    got_sizes, got_throttles = split_arrays(n, ClusterLimits(*limits), held, at_once)
    assert (got_sizes, got_throttles) == (sizes, throttles)
    assert all(s <= limits[0] for s in got_sizes)                          # indices 0..MaxArraySize-1
    assert held + sum(got_sizes) < limits[1] or not got_sizes              # a submission reaching it is refused
    assert all(1 <= t <= s for t, s in zip(got_throttles, got_sizes))


def test_share_keeps_the_sweeps_limit_and_room_is_one_below_max_job_count():
    for at_once in (1, 2, 3, 7, 100, 256, 5000):
        for sizes in ([1001, 199], [1001, 1001, 1001], [5, 3], [1]):
            parts = share(at_once, sizes)
            assert sum(parts) == max(len(sizes), min(at_once, sum(sizes))), (at_once, sizes, parts)
    assert room(ClusterLimits(1001, 10000), 0) == 9999 and room(ClusterLimits(1001, 10), 10) == 0


def test_limits_are_read_from_scontrol_show_config_with_slurms_defaults():
    text = "Configuration data as of ...\nMaxArraySize            = 300\nMaxJobCount             = 50000\n"
    assert parse_config(text) == ClusterLimits(300, 50000)
    assert parse_config("MaxArraySize = 7\n") == ClusterLimits(7, 10000)
    assert parse_config("") == ClusterLimits(1001, 10000)


# -- the real cluster ---------------------------------------------------------------------------------------

def _cluster():
    problem = cluster_problem()
    if problem:
        import os

        if os.environ.get("SWEEPER_REQUIRE_SLURM") == "1":
            raise RuntimeError(f"SWEEPER_REQUIRE_SLURM=1 but {problem}")
        pytest.skip(problem)


def test_a_refused_sbatch_is_one_line_with_slurms_reason():
    _cluster()
    from submitit.core.utils import CommandFunction, FailedJobError

    from sweeper.backends.slurm.backend import refusal_fix, sbatch_refusal

    with pytest.raises(FailedJobError) as e:      # what submitit raises for a real refused array
        CommandFunction(["sbatch", "--array=0-1500", "--wrap=true"], verbose=False)()
    reason = sbatch_refusal(e.value)
    assert reason == "Batch job submission failed: Invalid job array specification"
    assert "MaxArraySize=1001" in refusal_fix(reason, ClusterLimits(1001, 10000))


@pytest.mark.slurm
@pytest.mark.slow
def test_a_sweep_larger_than_max_array_size_is_split_recorded_adopted_and_cancelled(tmp_path):
    _cluster()
    from sweeper.backends.slurm.limits import cluster_limits

    assert cluster_limits().max_array_size == 1001, "this test assumes the default MaxArraySize"
    project = user_project(tmp_path / "project", TINY_TASK, {"a": [], "b": ["lr=0.2"], "c": ["lr=0.3"]}, "lr: 0.1")
    d = tmp_path / "sweep"
    argv = ["--config-dir", "conf", "+experiment=mine", "seeds=0-399", f"sweeper.dir={d}", "sweeper.report=false",
            "sweeper.max_runs=2000", "launcher=slurm", "launcher.wait=false", "launcher.cpus_per_task=1",
            "launcher.gpus_per_node=0", "launcher.poll_s=0.5", "+launcher.additional_parameters.hold=true"]
    t0 = time.time()
    first = run(argv, cwd=project, timeout=600)
    submit_s = time.time() - t0
    arrays = []
    try:
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        assert "Invalid job array" not in first.stdout + first.stderr
        record = json.loads((d / "slurm.json").read_text())
        arrays = [a["array_job_id"] for a in record["arrays"]]
        assert [(a["runs"], a["at_once"]) for a in record["arrays"]] == [(1001, 214), (199, 42)]
        jobs = record["jobs"]
        assert len(jobs) == 1200 and len({j["job_id"] for j in jobs.values()}) == 1200
        assert sorted(j["job_id"] for j in jobs.values()) == sorted(
            [f"{arrays[0]}_{i}" for i in range(1001)] + [f"{arrays[1]}_{i}" for i in range(199)])
        assert f"submitted 1001 runs as Slurm job array {arrays[0]} (at most 214 at once); 199 runs as Slurm " \
               f"job array {arrays[1]} (at most 42 at once)" in first.stdout
        queued = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i|%T"], capture_output=True,
                                text=True, check=True).stdout.split()
        assert len(queued) == 1200 and {q.split("|")[1] for q in queued} == {"PENDING"}
        for array, size in zip(arrays, (1001, 199)):
            info = subprocess.run(["scontrol", "-o", "show", "job", f"{array}_{size - 1}"], capture_output=True,
                                  text=True, check=True).stdout
            assert f"ArrayTaskThrottle={214 if size == 1001 else 42}" in info

        last = [f"{arrays[0]}_1000", f"{arrays[1]}_198"]          # the last task of each array runs its own run
        subprocess.run(["scontrol", "release", *last], check=True, capture_output=True)
        by_job = {j["job_id"]: j["run_dir"] for j in jobs.values()}
        for job in last:
            summary = d / by_job[job]
            wait_for(lambda: _finished(summary), 240, f"job {job} to finish its run")
            seed = int(by_job[job].rsplit("seed_", 1)[1])
            assert _val_loss(summary) == float(seed), (job, by_job[job])

        again = run(argv, cwd=project, timeout=600)                # the same command: adopts, submits nothing
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert again.stdout.count("adopt ") == 1198 and again.stdout.count("skip") == 2, again.stdout[-2000:]
        assert len(json.loads((d / "slurm.json").read_text())["arrays"]) == 2

        shown = run(["status", str(d)], module="sweeper.slurm", timeout=300)
        lines = shown.stdout.splitlines()
        assert shown.returncode == 0 and len(lines) == 1200 and sum("finished" in x for x in lines) == 2, shown.stderr

        cancelled = run(["cancel", str(d)], module="sweeper.slurm", timeout=300)
        assert cancelled.returncode == 0 and cancelled.stdout.startswith("cancelled 1198 job(s)"), cancelled.stderr
        wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", ",".join(arrays), "-t", "PD,R"],
                                            capture_output=True, text=True).stdout.strip(), 120, "the arrays to end")
        shown = run(["status", str(d)], module="sweeper.slurm", timeout=300)
        after = shown.stdout.splitlines()
        assert sum("interrupted" in x for x in after) == 1198 and sum("finished" in x for x in after) == 2, \
            shown.stdout[:1500] + shown.stderr[-1500:]
        print(f"1200-run sweep: planned and submitted in {submit_s:.1f}s; adopted again in "
              f"{time.time() - t0 - submit_s:.1f}s (status, cancel included)")
    finally:
        if arrays:
            subprocess.run(["scancel", *arrays], capture_output=True)


def _finished(run_dir) -> bool:
    from sweeper.run.files.rundir import RunDir

    return RunDir(run_dir).outcome().value == "finished"


def _val_loss(run_dir) -> float:
    from sweeper.run.files.rundir import RunDir

    return RunDir(run_dir).read_summary().final["val_loss"]


def test_compact_array_ids_expand_to_one_id_per_task():
    from sweeper.backends.slurm.jobs import expand_task_ids

    assert expand_task_ids("253_[0-999%214]") == [f"253_{i}" for i in range(1000)]
    assert expand_task_ids("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert expand_task_ids("12_[7]") == ["12_7"]
    assert expand_task_ids("12_3") == ["12_3"] and expand_task_ids("12") == ["12"]
    assert expand_task_ids("12_[x-1]") == ["12_[x-1]"]
