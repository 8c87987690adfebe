"""The environment each run gets, as the runs themselves recorded it in env.json: one device per run from an
explicit device list, disjoint CPU core sets, thread counts that add up to the cores; runs per device > 1,
max parallel runs, CPU-only, and one-line errors for bad launcher settings."""
import json
import os
import subprocess
import sys

import pytest

from sweeper.backends.local.pool import job_processes
from sweeper.backends.local.schema import LocalLauncherConf
from sweeper.backends.local.slots import make_slots
from sweeper.errors import UsageError
from tests.helpers.commands import ROOT
from tests.helpers.local_pool import child_env, run, run_dir, status, sweep_args, user_project

CORES = sorted(os.sched_getaffinity(0))


def envs(d, runs):
    return {r: json.loads((run_dir(d, *r) / "env.json").read_text()) for r in runs}


def overlap(a, b):
    return a["started"] < b["ended"] and b["started"] < a["ended"]


@pytest.mark.slow
@pytest.mark.skipif(len(CORES) < 2, reason="needs 2 CPU cores")
def test_fake_gpus_one_device_per_run_disjoint_cores_threads_sum_to_cores(tmp_path):
    d = tmp_path / "sweep"
    # Two fake GPUs, 3 and 5: the child just records CUDA_VISIBLE_DEVICES (torch finds no GPU and uses the CPU).
    proc = run(sweep_args(d, "launcher.devices=[5,3]", steps=10, seeds="0-1"),
               env=child_env({"CUDA_VISIBLE_DEVICES": "3,5"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [(v, s) for v in ("rope", "nope") for s in (0, 1)]
    recorded = envs(d, runs)
    slots = {}
    for r, env in recorded.items():
        assert env["cuda_visible_devices"] in ("3", "5"), env      # exactly one device, from the list
        threads = int(env["env"]["OMP_NUM_THREADS"])
        assert env["torch_num_threads"] == threads == int(env["env"]["MKL_NUM_THREADS"])
        assert env["env"]["OMP_WAIT_POLICY"] == "PASSIVE"
        slots.setdefault(env["cuda_visible_devices"], set()).add((tuple(env["cpu_affinity"]), threads))
    # Each device is one slot with one fixed core set; the slots' core sets are disjoint and cover the cores.
    assert all(len(s) == 1 for s in slots.values()), slots
    (cores5, t5), = slots["5"]
    (cores3, t3), = slots["3"]
    assert not set(cores5) & set(cores3) and sorted(cores5 + cores3) == CORES
    assert t5 + t3 == len(CORES) and t5 == t3
    statuses = {r: status(d, *r) for r in runs}
    for a in runs:   # never two runs on one device at once (runs_per_device=1)
        for b in runs:
            if a < b and recorded[a]["cuda_visible_devices"] == recorded[b]["cuda_visible_devices"]:
                assert not overlap(statuses[a], statuses[b]), (a, b)


@pytest.mark.slow
def test_two_runs_per_device_share_it_at_once(tmp_path):
    d = tmp_path / "sweep"
    proc = run(sweep_args(d, "launcher.runs_per_device=2", steps=100),
               env=child_env({"CUDA_VISIBLE_DEVICES": "7"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = envs(d, [("rope", 0), ("nope", 0)])
    assert {e["cuda_visible_devices"] for e in recorded.values()} == {"7"}
    assert overlap(status(d, "rope"), status(d, "nope"))
    if len(CORES) >= 2:
        a, b = (set(e["cpu_affinity"]) for e in recorded.values())
        assert not a & b


@pytest.mark.slow
def test_max_parallel_one_and_cpu_only(tmp_path):
    d = tmp_path / "sweep"
    proc = run(sweep_args(d, "launcher.max_parallel=1", "launcher.cpu_only=true", steps=10),
               env=child_env({"CUDA_VISIBLE_DEVICES": "3,5"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = envs(d, [("rope", 0), ("nope", 0)])
    for env in recorded.values():
        assert env["cuda_visible_devices"] == ""                           # CPU-only hides the GPUs
        assert env["cpu_affinity"] == CORES and env["torch_num_threads"] == len(CORES)
    assert not overlap(status(d, "rope"), status(d, "nope"))


# -- slot arithmetic (no processes) -------------------------------------------------------------------------

def test_slots_alternate_devices_and_split_cores_evenly():
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    cfg = LocalLauncherConf(devices=[1, 3], runs_per_device=2, cores=None)
    slots = make_slots(cfg, 10, env)
    assert [s.gpu for s in slots] == ["1", "3", "1", "3"]
    assert [s.gpu for s in make_slots(LocalLauncherConf(devices=[1, 3], runs_per_device=2, max_parallel=2), 10, env)] \
        == ["1", "3"]
    assert len(make_slots(cfg, 1, env)) == 1                    # never more slots than runs
    cpu = make_slots(LocalLauncherConf(cpu_only=True), 10, env)
    assert all(s.gpu is None for s in cpu) and len(cpu) == len(CORES)
    assert cpu[0].child_env({})["CUDA_VISIBLE_DEVICES"] == ""
    if len(CORES) >= 2:
        two = make_slots(LocalLauncherConf(cores=CORES[:2], threads_per_run=2), 10, environ={})
        assert len(two) == 1 and two[0].threads == 2 and two[0].cores == tuple(CORES[:2])


def test_uneven_core_split_keeps_equal_threads():
    two = make_slots(LocalLauncherConf(max_parallel=2), 10, environ={}, cores=[0, 1, 2, 3, 4])   # 5 cores, 2 slots
    assert [s.cores for s in two] == [(0, 1), (2, 3, 4)] and [s.threads for s in two] == [2, 2]


@pytest.mark.parametrize("override, message", [
    ("launcher.devices=[9]", "launcher.devices=['9']: device(s) ['9'] are not visible"),
    ("launcher.runs_per_device=0", "launcher.runs_per_device=0: must be a positive integer"),
    ("launcher.max_retries=-1", "launcher.max_retries=-1: must be an integer >= 0"),
    ("launcher.grace_s=soon", "launcher.grace_s='soon': must be a number of seconds >= 0"),
    ("launcher.cores=[999]", "launcher.cores=[999]: core(s) [999] are not available"),
])
def test_bad_launcher_settings_are_one_line_errors(tmp_path, override, message):
    proc = run(sweep_args(tmp_path / "s", override), env=child_env({"CUDA_VISIBLE_DEVICES": "3,5"}))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


def test_launcher_config_accepts_a_comma_list():
    assert LocalLauncherConf.from_dict({"devices": "3,5"}).devices == ["3", "5"]
    with pytest.raises(UsageError, match="unknown config key 'launcher.gpus'"):
        LocalLauncherConf.from_dict({"gpus": 2})


SEEN_TASK = """
import json, os
import sweeper
run = sweeper.init()
with open(os.path.join(os.environ["SWEEPER_RUN_DIR"], "seen.json"), "w") as f:
    json.dump({"cwd": os.getcwd(), "pythonpath": os.environ["PYTHONPATH"].split(os.pathsep),
               "run_dir": os.environ["SWEEPER_RUN_DIR"], "job": os.environ.get("SWEEPER_JOB")}, f)
run.finish(val_loss=1.0)
"""


def test_a_user_task_starts_in_its_cwd_with_it_first_on_pythonpath(tmp_path):
    project = user_project(tmp_path / "project", SEEN_TASK, {"a": []})
    d = tmp_path / "sweep"
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={d}", "sweeper.report=false"],
               env=child_env({"PYTHONPATH": "/inherited"}), cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rd = run_dir(d, "a")
    seen = json.loads((rd / "seen.json").read_text())
    assert seen["cwd"] == str(project.resolve()) and seen["run_dir"] == str(rd) == seen["job"]
    # the project, then exactly what the sweeper inherited (here the test's own ROOT): nothing added of ours
    assert seen["pythonpath"] == [str(project.resolve()), str(ROOT), "/inherited"]


def test_leftovers_are_found_by_the_job_marker_in_their_environment_never_by_their_arguments(tmp_path):
    marker = str(tmp_path / "runs" / "a" / "seed_0")
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    by_env = subprocess.Popen(sleep, env={**os.environ, "SWEEPER_JOB": marker})
    by_arg = subprocess.Popen(sleep + [marker])                  # a user's own process naming the run dir
    other = subprocess.Popen(sleep, env={**os.environ, "SWEEPER_JOB": marker + "x"})
    try:
        assert job_processes(marker) == [by_env.pid]
    finally:
        for p in (by_env, by_arg, other):
            p.kill()
            p.wait()
