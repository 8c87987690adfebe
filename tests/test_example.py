"""The example user project (examples/mlp_widths), run as a newcomer runs it: from a copy outside this repo,
with its own conf/ (--config-dir) and its own script (task.command). Through the local pool: the decision table,
the environment each run saw, Ctrl-C then the same command again ending bitwise equal to the uninterrupted
sweep. Through the real Slurm cluster: a preempted, requeued run ending bitwise equal to the local one.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT
from tests.helpers.slurm_cluster import preempt

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "mlp_widths"
VARIANTS = ("mlp", "wide", "linear")
SEEDS = (0, 1, 2)
COMMON = ["--config-dir", "conf", "+experiment=mlp_width", f"seeds={SEEDS[0]}-{SEEDS[-1]}"]
LOCAL = ["launcher.threads_per_run=1"]     # every run one thread, however many are left (Slurm: cpus_per_task=1)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the example in a temp dir: nothing of this repo is on its path but the installed sweeper."""
    dest = tmp_path_factory.mktemp("user") / "mlp_widths"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("sweeps", "__pycache__"))
    return dest


def user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SWEEPER_RUN_DIR")}
    env["SWEEPER_PROGRESS"] = "plain"
    return env


def sweeper(project: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper", *COMMON, *args], cwd=project, env=user_env(),
                          capture_output=True, text=True, timeout=timeout)


def run_dirs(sweep_dir: Path) -> dict[tuple[str, int], Path]:
    return {(v, s): sweep_dir / "runs" / v / f"seed_{s}" for v in VARIANTS for s in SEEDS}


def result(run_dir: Path) -> tuple[dict, list[dict]]:
    """The run's final metrics and every metrics line: what must be bitwise equal after a resume."""
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return summary["final"], lines


@pytest.fixture(scope="module")
def reference(project) -> Path:
    sweep_dir = project / "sweeps" / "reference"
    proc = sweeper(project, *LOCAL, f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sweep_dir / "stdout.txt").write_text(proc.stdout)
    return sweep_dir


def test_the_example_gets_the_decision_table_with_verdicts(project, reference):
    out = (reference / "stdout.txt").read_text()
    report = (reference / "report.md").read_text()
    for variant in VARIANTS:
        assert variant in report
    assert "linear vs mlp: WORSE" in out, out[-3000:]
    assert "wide vs mlp: BETTER" in out, out[-3000:]
    assert "checks across runs" not in out and "## Checks across runs\n\nNone:" in report   # a healthy sweep: quiet
    assert (reference / "summary.csv").exists() and list((reference / "plots").glob("*.png"))
    finals = {key: result(d)[0]["val_loss"] for key, d in run_dirs(reference).items()}
    for s in SEEDS:                                   # the table's order is the runs' own numbers
        assert finals[("wide", s)] < finals[("mlp", s)] < finals[("linear", s)], finals


def test_each_run_of_the_example_saw_its_pinned_environment(project, reference):
    cores = set()
    for (variant, seed), run_dir in run_dirs(reference).items():
        env = json.loads((run_dir / "env.json").read_text())
        assert env["cwd"] == str(project)                        # the user's script ran in the user's dir
        assert env["env"]["OMP_NUM_THREADS"] == "1" and env["torch_num_threads"] == 1
        assert len(env["cpu_affinity"]) == 1
        cores.add(env["cpu_affinity"][0])
        assert env["argv"][0].endswith("train_mlp.py")
        config = (run_dir / "config.yaml").read_text()
        assert f"seed: {seed}" in config and "d_model" not in config   # the user's keys, none of the demo's
    assert len(cores) == min(2, len(os.sched_getaffinity(0)))


def test_ctrl_c_then_the_same_command_ends_bitwise_equal(project, reference):
    sweep_dir = project / "sweeps" / "interrupted"
    log = project / "interrupted.log"
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *COMMON, *LOCAL, f"sweeper.dir={sweep_dir}",
                             "sweeper.reuse=false"], cwd=project,
                            env=user_env(), stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 300
    while not list(sweep_dir.glob("runs/*/seed_*/ckpt/step_*.pt")):
        assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130, log.read_text()[-3000:]
    statuses = {k: json.loads((d / "status.json").read_text())["status"] for k, d in run_dirs(sweep_dir).items()
                if (d / "status.json").exists()}
    assert "interrupted" in statuses.values(), statuses

    again = sweeper(project, *LOCAL, f"sweeper.dir={sweep_dir}", "sweeper.reuse=false")   # the same command: the
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]       # runs resume, none reused
    resumed = [k for k, d in run_dirs(sweep_dir).items()
               if json.loads((d / "summary.json").read_text()).get("resumed_from")]
    assert resumed, "no run resumed from a checkpoint"
    for key, run_dir in run_dirs(sweep_dir).items():
        assert result(run_dir) == result(run_dirs(reference)[key]), key


def test_the_example_on_slurm_preempted_and_resumed_equals_the_local_sweep(project, reference, slurm_cluster):
    sweep_dir = project / "sweeps" / "slurm"
    slurm = ["launcher=slurm", "launcher.cpus_per_task=1", "launcher.gpus_per_node=0", "launcher.poll_s=0.5",
             f"sweeper.dir={sweep_dir}", "sweeper.reuse=false"]     # trains on Slurm, reusing nothing
    submitted = sweeper(project, *slurm, "launcher.wait=false")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    jobs = json.loads((sweep_dir / "slurm.json").read_text())["jobs"]
    deadline = time.time() + 300
    while not (victims := list(sweep_dir.glob("runs/*/seed_*/ckpt/step_*.pt"))):
        assert time.time() < deadline, "no Slurm run wrote a checkpoint"
        time.sleep(0.1)
    rel = str(victims[0].parent.parent.relative_to(sweep_dir))
    job = next(j["job_id"] for j in jobs.values() if j["run_dir"] == rel)
    preempt(job)
    deadline = time.time() + 60
    while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip() \
            != "PENDING":
        assert time.time() < deadline, f"job {job} was not requeued"
        time.sleep(0.2)
    time.sleep(2.5)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], capture_output=True)
    waited = sweeper(project, *slurm)                                     # adopts the live jobs, waits, reports
    assert waited.returncode == 0, waited.stdout[-3000:] + waited.stderr[-3000:]
    assert "linear vs mlp: WORSE" in waited.stdout
    victim = sweep_dir / rel
    assert json.loads((victim / "summary.json").read_text()).get("resumed_from"), (victim / "stdout.log").read_text()
    for key, run_dir in run_dirs(sweep_dir).items():
        assert result(run_dir) == result(run_dirs(reference)[key]), key
