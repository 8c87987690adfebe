import pytest

"""Ctrl-C / SIGTERM and the sweep lock, with real processes: a second sweeper is refused, a stopped sweep leaves
no process behind (stuck workers and escaped daemons included), its runs end "interrupted" and resume."""
import os
import signal
import time

from tests.helpers.local_pool import (
    checkpoints,
    child_env,
    processes_mentioning,
    run,
    run_dir,
    start,
    starts,
    status,
    sweep_args,
    wait_for,
)

pytest_plugins = ["tests.helpers.local_pool"]     # its sweep_dir fixture


def both_running_with_checkpoint(d):
    return all(status(d, v).get("status") == "running" and checkpoints(run_dir(d, v)) for v in ("rope", "nope"))


@pytest.mark.slow
def test_ctrl_c_stops_everything_and_the_sweep_resumes(sweep_dir, tmp_path):
    args = sweep_args(sweep_dir, "launcher.grace_s=3", "train.ckpt_interval=5", steps=300)
    log = tmp_path / "first.log"
    first = start(args, log, env=child_env(grandchildren=True))
    # Each run has a stuck worker in its group and a daemon outside it (tests/grandchildren/sitecustomize.py).
    wait_for(
        lambda: both_running_with_checkpoint(sweep_dir) and len(processes_mentioning(str(sweep_dir / "runs"))) >= 6,
        120,
        "both runs running with a checkpoint, and their descendants",
        first,
        log,
    )
    t0 = time.time()
    os.kill(first.pid, signal.SIGINT)
    assert first.wait(timeout=60) == 130, log.read_text()
    assert time.time() - t0 < 30
    assert processes_mentioning(str(sweep_dir)) == [], "processes left behind after Ctrl-C"
    out = log.read_text()
    assert "interrupted: stopping 2 running run(s)" in out and "sweeper.resume" in out
    steps_at_stop = {}
    for v in ("rope", "nope"):
        st = status(sweep_dir, v)
        assert st["status"] == "interrupted", st
        steps_at_stop[v] = checkpoints(run_dir(sweep_dir, v))[-1]
        assert 0 < steps_at_stop[v] < 300

    resumed = run([str(sweep_dir), "sweeper.report=false"], module="sweeper.resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    for v in ("rope", "nope"):
        rd = run_dir(sweep_dir, v)
        assert status(sweep_dir, v)["status"] == "finished"
        assert f"at step {steps_at_stop[v]}" in (rd / "stdout.log").read_text()  # "resumed from ... at step N"
        assert starts(rd) == 2
    assert processes_mentioning(str(sweep_dir)) == []


@pytest.mark.slow
def test_second_sweeper_is_refused_and_a_second_ctrl_c_kills_at_once(sweep_dir, tmp_path):
    # grace_s=120 and workers that ignore SIGTERM: only the second Ctrl-C can end this quickly.
    args = sweep_args(sweep_dir, "launcher.grace_s=120", steps=5000)
    log = tmp_path / "sweep.log"
    proc = start(args, log, env=child_env(grandchildren=True))
    wait_for(
        lambda: all(status(sweep_dir, v).get("status") == "running" for v in ("rope", "nope")),
        120,
        "both runs running",
        proc,
        log,
    )
    second = run(args)
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"in use by another sweeper (pid {proc.pid})" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert all(status(sweep_dir, v).get("status") == "running" for v in ("rope", "nope"))  # untouched
    os.kill(proc.pid, signal.SIGINT)
    wait_for(lambda: "interrupted: stopping" in log.read_text(), 10, "the first Ctrl-C to register", proc, log)
    t0 = time.time()
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert time.time() - t0 < 15
    assert processes_mentioning(str(sweep_dir)) == []
    for v in ("rope", "nope"):
        assert status(sweep_dir, v)["status"] == "interrupted"


@pytest.mark.slow
def test_sigterm_to_the_sweeper_is_a_clean_stop(sweep_dir, tmp_path):
    args = sweep_args(sweep_dir, "launcher.grace_s=20", "train.ckpt_interval=0", steps=5000, variants="rope")
    log = tmp_path / "sweep.log"
    proc = start(args, log)
    wait_for(lambda: (run_dir(sweep_dir, "rope") / "metrics.jsonl").exists(), 120, "training steps", proc, log)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    st = status(sweep_dir, "rope")
    # The run itself checkpointed at the next step and wrote its status (ckpt_interval=0: no periodic checkpoint).
    assert st["status"] == "interrupted" and st["exit_code"] == 75, st
    assert checkpoints(run_dir(sweep_dir, "rope"))
    assert processes_mentioning(str(sweep_dir)) == []
