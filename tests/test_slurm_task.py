"""The Slurm backend's parts that need no cluster: launcher config checks, sbatch option mapping, the task's
environment, and RunTask's stop/checkpoint/requeue path driven by real signals to real processes.

    python -m pytest -q tests/test_slurm_task.py
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.backends.slurm.backend import sbatch_options
from sweeper.backends.slurm.schema import SlurmLauncherConf
from sweeper.backends.slurm.task import task_cpus, task_env
from sweeper.errors import UsageError
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from tests.helpers.checkpoints import checkpoint_digest, state_digest  # noqa: F401
from tests.helpers.commands import ROOT, run_sweeper

DEFAULTS = dataclasses.asdict(SlurmLauncherConf())  # the schema (sweeper.backends.slurm.schema) is the one definition


def test_the_schema_defaults_are_valid():
    cfg = SlurmLauncherConf.from_dict(DEFAULTS)
    assert (cfg.timeout_min, cfg.cpus_per_task, cfg.gpus_per_node, cfg.wait) == (60, 4, 1, True)


@pytest.mark.parametrize(
    "key, value, says",
    [
        ("nodes", 2, "unknown config key 'launcher.nodes'; keys of launcher (slurm) are"),
        ("cpus_per_task", 0, "launcher.cpus_per_task=0: must be a positive integer"),
        ("gpus_per_node", -1, "launcher.gpus_per_node=-1: must be a non-negative integer"),
        ("timeout_min", "1h", "launcher.timeout_min='1h': must be a positive integer"),
        ("wait", "maybe", "launcher.wait='maybe': expected a boolean (true or false)"),
        ("mem_gb", 0, "launcher.mem_gb=0: must be a positive number of GB"),
        ("additional_parameters", ["x"], "launcher.additional_parameters=['x']: must be a mapping"),
        ("setup", "module load cuda", "launcher.setup='module load cuda': must be a list of shell lines"),
        ("signal_delay_s", 3600, "launcher.signal_delay_s=3600 must be shorter than launcher.timeout_min=60"),
    ],
)
def test_bad_launcher_values_are_one_line_errors_naming_the_key(key, value, says):
    with pytest.raises(UsageError) as e:
        SlurmLauncherConf.from_dict({**DEFAULTS, key: value})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_cli_refuses_a_bad_slurm_value_before_anything_is_written(tmp_path):
    r = run_sweeper("+experiment=rope", "launcher=slurm", "launcher.cpus_per_task=0", f"sweeper.dir={tmp_path}/s")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "sweeper: error: launcher.cpus_per_task=0: must be a positive integer or null"
    ]
    assert not (tmp_path / "s").exists()


def test_sbatch_options_follow_hydra_submitit_names():
    cfg = SlurmLauncherConf.from_dict(
        {
            **DEFAULTS,
            "partition": "gpu",
            "account": "lab",
            "qos": "high",
            "mem_gb": 1.5,
            "gpus_per_node": 0,
            "gres": "gpu:a100:1",
            "timeout_min": 90,
            "additional_parameters": {"mail_type": "END", "requeue": True},
        }
    )
    assert sbatch_options(cfg) == {
        "partition": "gpu",
        "account": "lab",
        "qos": "high",
        "time": 90,
        "cpus-per-task": 4,
        "gres": "gpu:a100:1",
        "mem": "1536M",
        "mail-type": "END",
        "requeue": True,
    }
    assert cfg.use_gpus
    assert not SlurmLauncherConf.from_dict({**DEFAULTS, "gpus_per_node": 0}).use_gpus


def test_task_threads_come_from_the_slurm_cpu_allocation():
    assert task_cpus({"SLURM_CPUS_PER_TASK": "3", "SLURM_JOB_CPUS_PER_NODE": "8"}) == 3
    assert task_cpus({"SLURM_JOB_CPUS_PER_NODE": "4(x2)"}) == 4
    assert task_cpus({}) == len(os.sched_getaffinity(0))
    env = task_env({"SLURM_CPUS_PER_TASK": "3", "CUDA_VISIBLE_DEVICES": "2", "PYTHONPATH": "/x"}, "/proj", True)
    assert [env[v] for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")] == ["3", "3", "3"]
    assert env["CUDA_VISIBLE_DEVICES"] == "2" and env["PYTHONPATH"] == "/proj" + os.pathsep + "/x"
    assert task_env({"CUDA_VISIBLE_DEVICES": "0,1"}, "/proj", use_gpus=False)["CUDA_VISIBLE_DEVICES"] == ""


# -- RunTask with real processes and signals (what submitit does in a job, without Slurm) --------------------

# Plays submitit's part: the pickled task is called; USR2 -> task.checkpoint() -> the DelayedSubmission is
# pickled for the requeue.
TASK_SCRIPT = """
import os, signal, sys
import cloudpickle
task, out = cloudpickle.load(open(sys.argv[1], "rb")), sys.argv[2]
def on_usr2(signum, frame):
    with open(out, "wb") as f:
        cloudpickle.dump(task.checkpoint(), f)
    os._exit(3)
signal.signal(signal.SIGUSR2, on_usr2)
print("result", task(), flush=True)
"""
RESUME_SCRIPT = """
import sys
import cloudpickle
print("result", cloudpickle.load(open(sys.argv[1], "rb")).result(), flush=True)
"""


def make_run(tmp_path: Path, tiny: list[str], name: str):
    """(plan, run) of a one-run sweep of the built-in trainer, planned and written as the CLI does."""
    from sweeper.cli.sweep import prepare
    from sweeper.plan.make import write_plan

    argv = [
        "+experiment=rope",
        "seeds=0",
        "~experiment.variants.nope",
        "~experiment.variants.rope_frozen_qk",
        f"sweeper.dir={tmp_path / name}",
        *tiny,
        "train.steps=300",
        "train.ckpt_interval=0",
    ]
    plan, _, _ = prepare(argv)
    write_plan(plan, argv)
    return plan, plan.runs[0]


def run_task(plan, run, grace_s: float, **retry):
    """The task sweeper.backends.slurm.backend submits for this run (retry: max_retries=, retry_backoff_s=)."""
    from sweeper.backends.slurm.task import RunTask
    from sweeper.config.task import python_path

    return RunTask(
        str(run.run_dir),
        plan.argv(run),
        plan.task.cwd,
        plan.run_env(run),
        python_path(plan.task),
        use_gpus=False,
        stop_grace_s=grace_s,
        **retry,
    )


def start_task(task, tmp_path: Path, out: Path) -> subprocess.Popen:
    import cloudpickle

    pickled = tmp_path / f"{Path(task.run_dir).parent.parent.parent.name}.task.pkl"
    pickled.write_bytes(cloudpickle.dumps(task))
    env = {**os.environ, "SLURM_CPUS_PER_TASK": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", TASK_SCRIPT, str(pickled), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if RunDir(run_dir).last_metrics().get("step", 0) >= step:
            return
        time.sleep(0.1)
    raise AssertionError(f"run did not reach step {step}: {proc.communicate()[0] if proc.poll() is not None else ''}")


@pytest.mark.slow
def test_checkpoint_stops_the_run_at_a_step_boundary_and_the_requeued_task_resumes_bitwise(tmp_path, tiny):
    (plan, run), (ref_plan, ref_run) = make_run(tmp_path, tiny, "preempted"), make_run(tmp_path, tiny, "reference")
    run_dir, ref_dir = run.run_dir, ref_run.run_dir
    ref = start_task(run_task(ref_plan, ref_run, 30), tmp_path, tmp_path / "unused.pkl")
    task = start_task(run_task(plan, run, 30), tmp_path, tmp_path / "requeue.pkl")
    wait_for_step(run_dir, 10, task)
    task.send_signal(signal.SIGUSR2)  # to the task only: it must stop its child itself
    out, _ = task.communicate(timeout=60)
    assert task.returncode == 3, out
    status = RunDir(run_dir).read_status()
    assert status.status == "interrupted" and "SIGUSR1" in status.error, status
    stopped = sorted((run_dir / "ckpt").glob("step_*.pt"))
    assert len(stopped) == 1 and 0 < int(stopped[0].stem.split("_")[1]) < 300

    env = {**os.environ, "SLURM_CPUS_PER_TASK": "1", "PYTHONPATH": str(ROOT)}
    resumed = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT, str(tmp_path / "requeue.pkl")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ref_out, _ = ref.communicate(timeout=180)
    assert ref.returncode == 0, ref_out
    summary = RunDir(run_dir).read_summary()
    assert summary.status == "finished" and summary.extra["resumed_from"] == stopped[0].name
    strip = lambda d: [
        {k: v for k, v in r.items() if k != "tokens_per_s"}  # noqa: E731
        for r in RunDir(d).read_metrics()[0]
    ]
    assert strip(run_dir) == strip(ref_dir)
    final = lambda d: checkpoint_digest(d / "ckpt" / "step_00000300.pt")  # noqa: E731
    assert final(run_dir) == final(ref_dir)  # model, optimizer, scheduler, sampler, RNG states


@pytest.mark.slow
def test_sigterm_alone_stops_the_run_and_the_task_ends_interrupted(tmp_path, tiny):
    plan, run = make_run(tmp_path, tiny, "cancelled")
    run_dir = run.run_dir
    task = start_task(run_task(plan, run, 1.0), tmp_path, tmp_path / "unused.pkl")
    wait_for_step(run_dir, 10, task)
    task.send_signal(signal.SIGTERM)  # scancel: no USR2 follows, Slurm would SIGKILL later
    out, _ = task.communicate(timeout=60)
    assert task.returncode != 0 and "RunInterrupted" in out, out
    status = RunDir(run_dir).read_status()
    assert status.status == "interrupted" and status.exit_code == 75
    assert list((run_dir / "ckpt").glob("step_*.pt"))


def test_a_user_task_that_exits_0_without_finishing_fails_its_slurm_task(tmp_path):
    from sweeper.cli.sweep import prepare
    from sweeper.plan.make import write_plan
    from tests.helpers.local_pool import user_project

    script = "import sys, sweeper\nrun = sweeper.init()\nrun.log(1, loss=0.5)\nsys.exit(0)\n"
    project = user_project(tmp_path / "project", script, {"a": []})
    argv = [
        "--config-dir",
        str(project / "conf"),
        "+experiment=mine",
        "seeds=0",
        f"task.cwd={project}",
        f"sweeper.dir={tmp_path / 'sweep'}",
    ]
    plan, _, _ = prepare(argv)
    write_plan(plan, argv)
    run = plan.runs[0]
    task = start_task(run_task(plan, run, 1.0), tmp_path, tmp_path / "unused.pkl")
    out, _ = task.communicate(timeout=120)
    assert task.returncode != 0 and "RunFailed" in out and "no_result: exited 0 without calling run.finish()" in out
    status = RunDir(run.run_dir).read_status()
    assert (status.status, status.error, status.exit_code, status.failure_class) == (
        "failed",
        "exited 0 without calling run.finish()",
        0,
        "no_result",
    )
    assert "=== sweeper: start in Slurm job" in RunDir(run.run_dir).log_path.read_text()


@pytest.mark.slow
def test_a_run_killed_by_sigkill_is_retried_in_its_task_by_the_pool_s_policy(tmp_path, tiny):
    """Slurm follows the local pool's retry policy: a transient failure (the run SIGKILLed, e.g. by the OOM
    killer) is retried in place, counted in the run's status, and ends bitwise equal to a run never killed."""
    from sweeper.backends.local.pool import children_of

    (plan, run), (ref_plan, ref_run) = make_run(tmp_path, tiny, "killed"), make_run(tmp_path, tiny, "reference")
    ref = start_task(run_task(ref_plan, ref_run, 5), tmp_path, tmp_path / "unused.pkl")
    task = start_task(run_task(plan, run, 5, max_retries=1, retry_backoff_s=0.2), tmp_path, tmp_path / "u2.pkl")
    wait_for_step(run.run_dir, 10, task)
    children = sorted(children_of(task.pid))                       # the task's run
    assert children
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    out, _ = task.communicate(timeout=240)
    assert task.returncode == 0, out
    assert "attempt 1 failed (signal: killed by SIGKILL); retry 1/1" in out
    ref_out, _ = ref.communicate(timeout=240)
    assert ref.returncode == 0, ref_out
    status = RunDir(run.run_dir).read_status()
    assert status.status == "finished" and status.to_dict()["attempts"] == 2
    final = lambda d: checkpoint_digest(d / "ckpt" / "step_00000300.pt")  # noqa: E731
    assert final(run.run_dir) == final(ref_run.run_dir)
    assert RunDir(run.run_dir).read_summary().final == RunDir(ref_run.run_dir).read_summary().final


@pytest.mark.slow
def test_a_killed_run_with_no_retries_left_fails_its_task_naming_why(tmp_path, tiny):
    from sweeper.backends.local.pool import children_of

    plan, run = make_run(tmp_path, tiny, "killed_for_good")
    task = start_task(run_task(plan, run, 5, max_retries=0), tmp_path, tmp_path / "unused.pkl")
    wait_for_step(run.run_dir, 5, task)
    for pid in children_of(task.pid):
        os.kill(pid, signal.SIGKILL)
    out, _ = task.communicate(timeout=120)
    assert task.returncode != 0 and "RunFailed" in out
    status = RunDir(run.run_dir).read_status()
    assert (status.status, status.failure_class, status.error) == ("failed", "signal", "killed by SIGKILL")


def test_what_was_submitted_names_a_plain_job_or_an_array():
    from types import SimpleNamespace

    from sweeper.backends.slurm.backend import _what_was_submitted
    from sweeper.backends.slurm.schema import SlurmLauncherConf

    cfg = SlurmLauncherConf.from_dict({"array_parallelism": 8})
    job = lambda i: SimpleNamespace(job_id=i)  # noqa: E731
    assert _what_was_submitted([job("41")], cfg) == "1 run as Slurm job 41"
    assert _what_was_submitted([job("42_0"), job("42_1")], cfg) == "2 runs as Slurm job array 42 (at most 8 at once)"


def test_slurm_status_lines_say_why_a_run_did_not_finish(tmp_path):
    from sweeper.backends.slurm.jobs import settle, status_line

    rd = RunDir(tmp_path / "runs" / "a" / "seed_0")
    rd.path.mkdir(parents=True)
    rd.update_status("running", run_id="a-s0")
    record = settle(rd.path, "77_1", "OUT_OF_MEMORY")
    assert (record["status"], record["failure_class"], record["slurm_state"]) == (
        "failed",
        "out_of_memory",
        "OUT_OF_MEMORY",
    )
    line = status_line("runs/a/seed_0", "77_1", "OUT_OF_MEMORY", record)
    assert line.split()[:4] == ["runs/a/seed_0", "77_1", "OUT_OF_MEMORY", "failed"]
    assert "out_of_memory: Slurm job 77_1 ended OUT_OF_MEMORY before the run did (Slurm log: sacct -j 77_1" in line
    assert status_line("runs/b/seed_0", "78", "COMPLETED", {"status": "finished", "error": None}).endswith("finished")


@pytest.mark.parametrize(
    "content, says",
    [
        ('{"jobs": {"a": {"job_id": "1_0"', "not readable JSON"),
        ("[1, 2]", "not a Slurm record"),
        ('{"jobs": {"a": {"job_id": 5, "run_dir": "runs/a/seed_0"}}}', "not a Slurm record"),
        ('{"jobs": {"a": {"job_id": "5", "run_dir": "../../etc"}}}', "leaves the sweep dir"),
    ],
)
def test_a_damaged_slurm_record_is_named_never_taken_for_no_jobs(tmp_path, content, says):
    from sweeper.cli.slurm import main
    from sweeper.plan.slurm_record import read_record

    (tmp_path / "slurm.json").write_text(content)
    with pytest.raises(UnreadableFile, match=says) as info:
        read_record(tmp_path)
    assert "slurm.json" in str(info.value) and "scancel" in str(info.value)
    assert main(["status", str(tmp_path)]) == 2
