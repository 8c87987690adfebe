"""Zero glue (issue 31): an unmodified argparse script swept as it is, from a fresh project folder that also has a
train.py of its own (no main guard: it prints and exits 3), a train/ package and a kernels/ folder, none of which
sweeper may import. Arguments in (task.args, {key} placeholders, {out_dir}), metrics out (a file the script
writes, JSON lines on stdout), Ctrl-C and a restart from scratch, fail fast on a metric typo, warm starts.

    python -m pytest -q tests/test_zero_glue.py
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

from sweeper.run.files.usage import REPORTED
from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow
EXAMPLE = ROOT / "examples" / "plain_script"
TRAP = "print('USER CODE RAN: {what}', flush=True)\nraise SystemExit(3)\n"
FAST = ["launcher.threads_per_run=1"]


def user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SWEEPER_RUN_DIR")}
    env["SWEEPER_PROGRESS"] = "plain"
    return env


def sweeper(project: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", *args], cwd=project,
                          env=user_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of examples/plain_script plus the user's own train.py, train/ and kernels/ (each exits 3 if run)."""
    dest = tmp_path_factory.mktemp("user") / "proj"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("sweeps", "__pycache__"))
    (dest / "train.py").write_text(TRAP.format(what="train.py"))
    (dest / "train").mkdir()
    (dest / "train" / "__init__.py").write_text(TRAP.format(what="train/__init__.py"))
    (dest / "train" / "config.py").write_text(TRAP.format(what="train/config.py"))
    (dest / "kernels").mkdir()
    (dest / "kernels" / "__init__.py").write_text(TRAP.format(what="kernels/__init__.py"))
    return dest


@pytest.fixture(scope="module")
def swept(project) -> tuple[Path, str]:
    sweep_dir = project / "sweeps" / "ref"
    proc = sweeper(project, "+experiment=plain_width", "seeds=0-2", *FAST, f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return sweep_dir, proc.stdout + proc.stderr


def test_a_dry_run_beside_the_users_train_py_imports_none_of_it(project):
    proc = sweeper(project, "+experiment=plain_width", "seeds=0-3", "sweeper.dry_run=true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "USER CODE RAN" not in proc.stdout + proc.stderr
    assert "first run's command: python train_plain.py --out SWEEP_DIR/runs/relu/seed_0/out --seed=0 --width=32 " \
           "--act=relu --steps=1000 --lr=0.003" in proc.stdout, proc.stdout
    proc = sweeper(project, "+experiment=rope", "seeds=0-1", "sweeper.dry_run=true")    # the built-in trainer too
    assert proc.returncode == 0 and "USER CODE RAN" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_unmodified_argparse_script_sweeps_and_gets_the_decision_table(project, swept):
    sweep_dir, out = swept
    assert "USER CODE RAN" not in out
    assert "wide vs relu: BETTER" in out and "linear vs relu: WORSE" in out, out[-3000:]
    assert "checks across runs" not in out and "INTEGRITY" not in out, out[-3000:]      # a healthy sweep: quiet
    assert "warm starts: 9 of 9 run starts forked" in out, out[-2000:]
    for run_dir in sorted(sweep_dir.glob("runs/*/seed_*")):
        assert "USER CODE RAN" not in (run_dir / "stdout.log").read_text()
        summary = json.loads((run_dir / "summary.json").read_text())
        written = json.loads((run_dir / "out" / "metrics.json").read_text())     # its own --out folder
        reported = {REPORTED[k]: written.pop(k) for k in list(written) if k in REPORTED}   # consumed: no metrics
        assert summary["status"] == "finished" and summary["final"] == written
        assert summary["used"] == reported and reported["examples"] == 64 * reported["steps"]
        status = json.loads((run_dir / "status.json").read_text())     # started when the script did, not at its end
        assert status["ended"] - status["started"] >= summary["wall_time_s"] - 0.01, (status, summary["wall_time_s"])
        env = json.loads((run_dir / "env.json").read_text())
        variant, seed = run_dir.parent.name, int(run_dir.name.split("_")[1])
        width, act = {"relu": (32, "relu"), "wide": (128, "relu"), "linear": (32, "none")}[variant]
        assert env["argv"] == ["train_plain.py", "--out", str(run_dir / "out"), f"--seed={seed}", f"--width={width}",
                               f"--act={act}", "--steps=1000", "--lr=0.003"]
        assert env["cwd"] == str(project)


def test_the_same_run_cold_is_bitwise_the_warm_one(project, swept):
    """SWEEPER_COLD_START=1: a fresh interpreter per run gives the same finals as the forked warm runs."""
    sweep_dir, _ = swept
    cold = project / "sweeps" / "cold"
    env = {**user_env(), "SWEEPER_COLD_START": "1"}
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=plain_width",
                           "seeds=0", *FAST, f"sweeper.dir={cold}", "sweeper.report=false", "sweeper.reuse=false",
                           "~experiment.variants.linear"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "cold starts: SWEEPER_COLD_START=1" in proc.stdout + proc.stderr
    for variant in ("relu", "wide"):
        a = json.loads((cold / "runs" / variant / "seed_0" / "summary.json").read_text())["final"]
        b = json.loads((sweep_dir / "runs" / variant / "seed_0" / "summary.json").read_text())["final"]
        assert a == b


SCRIPTS = {
    # prints progress as JSON lines behind a prefix; never heard of sweeper
    "printer.py": """\
import argparse, json, math, time, os
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int); p.add_argument("--lr", type=float); p.add_argument("--steps", type=int)
a = p.parse_args()
if os.path.exists("slow"):
    time.sleep(60)
for step in range(1, a.steps + 1):
    print("METRICS " + json.dumps({"step": step, "loss": a.lr * 10 + 1.0 / step + 0.001 * a.seed}), flush=True)
print('{"not": "metrics, no prefix"}')
print("METRICS " + json.dumps({"score": 1.0 - a.lr, "label": "low"}))
""",
}
EXPERIMENT = """\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, printer.py, "--lr={lr}", "--steps={steps}"]
  args: [seed]
  metrics: [stdout]
  metrics_prefix: "METRICS "
lr: 0.1
steps: 5
experiment:
  name: printer
  baseline: a
  metric: loss
  lower_is_better: true
  secondary_metrics: {score: higher, label: lower}
  variants: {a: [], b: [lr=0.3]}
"""


@pytest.fixture
def printer(tmp_path) -> Path:
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "printer.yaml").write_text(EXPERIMENT)
    for name, text in SCRIPTS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_metrics_from_prefixed_stdout_lines_last_value_wins_and_steps_become_curves(printer):
    proc = sweeper(printer, "+experiment=printer", "seeds=0-2", "sweeper.dir=sw")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "b vs a: WORSE" in out, out[-2000:]
    assert "warning: secondary metric label: run " in out and "reported 'low', not a number" in out
    run = printer / "sw" / "runs" / "b" / "seed_1"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["final"] == {"loss": pytest.approx(0.3 * 10 + 1.0 / 5 + 0.001), "score": 0.7, "label": "low"}
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5] and "not" not in summary["final"]


def test_a_metric_typo_stops_the_sweep_after_the_first_finished_run_and_the_fix_continues(printer):
    proc = sweeper(printer, "+experiment=printer", "seeds=0-3", "sweeper.dir=sw", "experiment.metric=los",
                   "launcher.max_parallel=1")
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "sweeper: error: run a/seed_0 finished without the decision metric los (experiment.metric); it reported: "
        "label='low', loss=1.2, score=0.9"), err
    assert "set experiment.metric to the name the run reports (loss, score)" in err[0]
    statuses = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())["status"]
                for p in (printer / "sw" / "runs").glob("*/seed_*/status.json")}
    assert statuses["a/seed_0"] == "failed" and list(statuses.values()).count("pending") == 7, statuses
    fixed = sweeper(printer, "+experiment=printer", "seeds=0-3", "sweeper.dir=sw")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert "b vs a: WORSE" in fixed.stdout


def test_a_non_number_decision_metric_stops_the_sweep_naming_it(printer):
    proc = sweeper(printer, "+experiment=printer", "seeds=0-1", "sweeper.dir=sw", "experiment.metric=label",
                   "launcher.max_parallel=1")
    assert proc.returncode == 2
    assert "reported the decision metric label='low' (str), not a number" in proc.stderr, proc.stderr


def test_a_placeholder_or_args_key_that_is_not_in_the_run_config_is_one_line_exit_2(printer):
    proc = sweeper(printer, "+experiment=printer", "task.command=[python,printer.py,'--lr={lrr}']")
    assert proc.returncode == 2 and proc.stderr.startswith("sweeper: error: task.command: {lrr} is not a key of "
                                                           "the run config; keys are: "), proc.stderr
    proc = sweeper(printer, "+experiment=printer", "task.args=[sed]")
    assert proc.returncode == 2 and "task.args: 'sed' is not a key of the run config" in proc.stderr, proc.stderr
    proc = sweeper(printer, "+experiment=printer", "task.args=every")
    assert proc.returncode == 2 and "task.args='every': accepted values are none" in proc.stderr, proc.stderr


def test_an_argparse_error_is_a_failed_run_with_the_scripts_own_line(printer):
    proc = sweeper(printer, "+experiment=printer", "seeds=0-2", "sweeper.dir=sw", "task.args=flags", "+extra=1")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = json.loads((printer / "sw" / "runs" / "a" / "seed_0" / "status.json").read_text())
    assert status["status"] == "failed" and status["failure_class"] == "config_error", status
    assert "exit status 2: printer.py: error: unrecognized arguments: --extra=1" in status["error"], status


def test_ctrl_c_stops_a_zero_glue_run_and_the_same_command_restarts_it_from_scratch(printer):
    (printer / "slow").write_text("")
    log = open(printer / "sweep.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=printer",
                             "seeds=0-2", "sweeper.dir=sw"], cwd=printer, env=user_env(), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    status = printer / "sw" / "runs" / "a" / "seed_0" / "status.json"
    deadline = time.time() + 120
    while not (status.exists() and json.loads(status.read_text())["status"] == "running"):
        assert proc.poll() is None and time.time() < deadline, (printer / "sweep.log").read_text()
        time.sleep(0.1)
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130, (printer / "sweep.log").read_text()
    record = json.loads(status.read_text())
    assert record["status"] == "interrupted", record
    assert "restarts from scratch" in record["error"], record
    (printer / "slow").unlink()
    again = sweeper(printer, "+experiment=printer", "seeds=0-2", "sweeper.dir=sw")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    lines = [json.loads(x) for x in (status.parent / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5]                       # from scratch, no duplicates


def test_the_few_lines_level_gets_curves_and_the_paired_test(tmp_path):
    """examples/few_lines: run.generator("data_order") is recorded (summary fingerprint seed_streams), so the report
    pairs the variants by seed and says why; run.log gives curves; the paired-difference plot is titled paired."""
    project = tmp_path / "few_lines"
    shutil.copytree(ROOT / "examples" / "few_lines", project, ignore=shutil.ignore_patterns("sweeps", "__pycache__"))
    proc = sweeper(project, "+experiment=logged_width", "seeds=0-2", *FAST, "sweeper.dir=sw")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "wide vs relu: BETTER" in proc.stdout and "paired t-test" in proc.stdout, proc.stdout[-3000:]
    assert "checks across runs" not in proc.stdout and "INTEGRITY" not in proc.stdout   # a healthy sweep: quiet
    report = (project / "sw" / "report.md").read_text()
    assert "paired by seed: both arms drew their data order from the run's seed stream" in report
    summary = json.loads((project / "sw" / "runs" / "wide" / "seed_0" / "summary.json").read_text())
    assert summary["fingerprint"]["seed_streams"] == "data_order,init"
    lines = (project / "sw" / "runs" / "wide" / "seed_0" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 20 and "train_loss" in lines[-1]
    plots = sorted(p.name for p in (project / "sw" / "plots").iterdir())
    assert "grad_norm.png" not in plots and "grad_flow.png" not in plots           # no monitor ran: no placeholder
    from sweeper.analysis.results import load_experiment, load_manifest, load_runs
    from sweeper.analysis.verdict import analyze_all
    from sweeper.config.decision import DecisionOptions

    runs = load_runs(project / "sw", load_manifest(project / "sw"))
    exp, _ = load_experiment(project / "sw", load_manifest(project / "sw"))
    primary, _ = analyze_all(runs, exp, DecisionOptions(n_resamples=500))
    assert {c.design for c in primary.comparisons} == {"paired"}
    import dataclasses

    declared, _ = analyze_all(runs, dataclasses.replace(exp, design="independent"), DecisionOptions(n_resamples=500))
    assert {c.design for c in declared.comparisons} == {"independent"}
    assert "declared by experiment.design=independent" in declared.comparisons[0].notes[0]


def test_a_zero_glue_script_on_slurm_reports_what_it_printed_as_locally(printer, slurm_cluster):
    local = sweeper(printer, "+experiment=printer", "seeds=0-2", "sweeper.dir=local", "sweeper.report=false")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    slurm = sweeper(printer, "+experiment=printer", "seeds=0-2", "sweeper.dir=slurm", "launcher=slurm",
                    "launcher.cpus_per_task=1", "launcher.gpus_per_node=0", "launcher.poll_s=0.5")
    assert slurm.returncode == 0, slurm.stdout[-3000:] + slurm.stderr[-3000:]
    assert "b vs a: WORSE" in slurm.stdout
    for run in sorted((printer / "local" / "runs").glob("*/seed_*")):
        there = printer / "slurm" / run.relative_to(printer / "local")
        assert json.loads((there / "summary.json").read_text())["final"] == \
            json.loads((run / "summary.json").read_text())["final"]
        assert (there / "metrics.jsonl").read_text() == (run / "metrics.jsonl").read_text()


@pytest.mark.slow
def test_a_metric_typo_on_slurm_stops_the_sweep_cancels_its_jobs_and_the_fix_continues(printer, slurm_cluster):
    slurm = ["launcher=slurm", "launcher.cpus_per_task=1", "launcher.gpus_per_node=0", "launcher.poll_s=0.5"]
    proc = sweeper(printer, "+experiment=printer", "seeds=0-3", "sweeper.dir=sw", "experiment.metric=los",
                   *slurm, "launcher.array_parallelism=1")
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "finished without the decision metric los (experiment.metric)" in err[0], err
    assert "set experiment.metric to the name the run reports (loss, score)" in err[0]
    assert "cancelled" in proc.stdout and "Slurm job(s)" in proc.stdout, proc.stdout[-2000:]
    statuses = {p.parent.parent.name + "/" + p.parent.name: json.loads(p.read_text())["status"]
                for p in (printer / "sw" / "runs").glob("*/seed_*/status.json")}
    assert list(statuses.values()).count("failed") == 1 and "finished" not in statuses.values(), statuses
    deadline = time.time() + 60                                  # cancelled tasks checkpoint, then leave
    while "sweeper-printer" in (queued := subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True,
                                                          text=True).stdout) and time.time() < deadline:
        time.sleep(0.5)
    assert "sweeper-printer" not in queued, queued               # nothing of the stopped sweep still runs
    fixed = sweeper(printer, "+experiment=printer", "seeds=0-3", "sweeper.dir=sw", *slurm)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    assert "b vs a: WORSE" in fixed.stdout
