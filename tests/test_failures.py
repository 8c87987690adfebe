"""Failure classes and the retry policy: the classifier on each class, then the pool with real failures
(a child SIGKILLed by the test, a frozen config that fails validation, a config that raises in training)."""
import json
import os
import signal

import pytest
import yaml

from sweeper.backends.failures import (
    CONFIG,
    EXCEPTION,
    HEALTH,
    LOST_NODE,
    OOM,
    SIGNAL,
    CrashLoops,
    RetryPolicy,
    classify,
)
from tests.helpers.local_pool import (
    checkpoints,
    processes_mentioning,
    run,
    run_dir,
    start,
    starts,
    status,
    sweep_args,
    user_project,
    wait_for,
)

pytest_plugins = ["tests.helpers.local_pool"]     # its sweep_dir fixture


# -- the classifier ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("returncode, error, tail, health, kind, transient", [
    (-9, None, "", None, SIGNAL, True),                                   # Popen: killed by SIGKILL
    (137, None, "", None, SIGNAL, True),                                  # a shell's 128 + 9
    (75, "stopped by SIGTERM at step 12; checkpoint saved", "", None, SIGNAL, True),
    (1, "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "", None, OOM, True),
    (1, None, "torch.OutOfMemoryError: CUDA out of memory.", None, OOM, True),
    (-9, None, "slurmstepd: error: *** JOB 12 CANCELLED DUE TO NODE_FAIL ***", None, LOST_NODE, True),
    (2, "model.n_heads=0: must be a positive integer", "", None, CONFIG, False),
    (1, "health check failed: gradient_flow", "", "fail", HEALTH, False),
    (-9, None, "", "fail", SIGNAL, True),       # killed mid-run: transient, whatever health.json said so far
    (1, "ValueError: bad value", "", "pass", EXCEPTION, False),
    (1, None, "Traceback (most recent call last):\n  ...\nZeroDivisionError: division by zero\n", None,
     EXCEPTION, False),
])
def test_classify(returncode, error, tail, health, kind, transient):
    failure = classify(returncode, error, tail, health)
    assert failure.kind == kind and failure.transient is transient
    assert failure.message and "\n" not in failure.message


def test_same_error_in_other_runs_has_one_signature():
    a = classify(1, "ValueError: the split at /tmp/a/runs/x/seed_0 holds 0 windows, fewer than 8")
    b = classify(1, "ValueError: the split at /tmp/a/runs/x/seed_3 holds 0 windows, fewer than 8")
    c = classify(1, "KeyError: 'foo'")
    assert a.signature == b.signature != c.signature
    assert classify(-9).signature != classify(-15).signature


def test_retry_policy_and_crash_loops():
    policy = RetryPolicy(max_retries=2, backoff_s=1.5, max_backoff_s=4.0, crash_loop_after=2)
    killed, broken = classify(-9), classify(1, "ValueError: x")
    assert [policy.should_retry(killed, a) for a in (1, 2, 3)] == [True, True, False]
    assert not policy.should_retry(broken, 1)
    assert [policy.delay_s(a) for a in (1, 2, 3)] == [1.5, 3.0, 4.0]
    loops = CrashLoops(2)
    assert not loops.record("nope", broken) and not loops.record("rope", broken)
    assert not loops.record("nope", classify(1, "KeyError: 'y'"))
    assert loops.record("nope", classify(1, "ValueError: x")) and "nope" in loops.stopped
    assert not loops.record("nope", broken)          # reported once
    assert "rope" not in loops.stopped and not CrashLoops(0).record("v", broken)


# -- the pool with real failures ---------------------------------------------------------------------------------

def leader_pid(rd):
    """pid of the running `python -m sweeper.train RUN_DIR` (its own env.json), if it is alive."""
    try:
        pid = json.loads((rd / "env.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None
    return pid if any(p == pid for p, _ in processes_mentioning(str(rd))) else None


@pytest.mark.slow
def test_signal_kills_are_retried_with_backoff_and_resume_siblings_unaffected(sweep_dir, tmp_path):
    args = sweep_args(sweep_dir, "launcher.max_retries=1", "launcher.retry_backoff_s=0.5",
                      "train.ckpt_interval=5", steps=300)
    log = tmp_path / "sweep.log"
    proc = start(args, log)
    rope, nope = run_dir(sweep_dir, "rope"), run_dir(sweep_dir, "nope")
    killed = {"rope": [], "nope": []}
    # rope: killed once after its first checkpoint -> retried, resumes, finishes.
    # nope: killed in each of its two attempts -> retries exhausted, failed; rope is not affected.
    while proc.poll() is None and (len(killed["rope"]) < 1 or len(killed["nope"]) < 2):
        for name, rd, times in (("rope", rope, 1), ("nope", nope, 2)):
            pid = leader_pid(rd)
            if pid and pid not in killed[name] and len(killed[name]) < times and checkpoints(rd):
                os.kill(pid, signal.SIGKILL)
                killed[name].append(pid)
        wait_for(lambda: True, 0.1, "")
    assert proc.wait(timeout=180) == 1, log.read_text()
    out = log.read_text()
    assert "RETRY  rope/seed_0: attempt 1/2 failed (signal: killed by SIGKILL); retrying in 0.5s" in out
    assert "RETRY  nope/seed_0: attempt 1/2 failed (signal: killed by SIGKILL); retrying in 0.5s" in out
    assert "FAILED nope/seed_0" in out
    st = status(sweep_dir, "rope")
    assert st["status"] == "finished" and st["attempts"] == 2 and starts(rope) == 2
    assert "resumed from" in (rope / "stdout.log").read_text()
    assert json.loads((rope / "summary.json").read_text())["steps"] == 300
    st = status(sweep_dir, "nope")
    assert st["status"] == "failed" and st["failure_class"] == "signal" and st["transient"] is True
    assert st["attempts"] == 2 and st["error"] == "killed by SIGKILL" and starts(nope) == 2
    assert processes_mentioning(str(sweep_dir)) == []


@pytest.mark.slow
def test_deterministic_failures_are_not_retried_and_crash_loops_stop_their_variant(sweep_dir):
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    args = sweep_args(sweep_dir, "launcher.max_parallel=1", "launcher.max_retries=3", steps=10, seeds="0-2")
    plan = make_plan(compose_sweep(args), [0, 1, 2])
    write_plan(plan, args)
    for r in plan.runs:   # freeze broken configs: rope raises while training, nope fails validation (exit 2)
        cfg = json.loads(json.dumps(r.config))
        if r.variant == "rope":
            cfg["model"]["context"] = 400_000     # no training window fits: ValueError in the child
        else:
            cfg["model"]["n_heads"] = 3           # d_model=32 is not divisible by 3: ConfigError, exit 2
        (r.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run(args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "RETRY" not in proc.stdout
    for variant, kind, code in (("rope", "exception", 1), ("nope", "config_error", 2)):
        for seed in (0, 1):
            st = status(sweep_dir, variant, seed)
            assert (st["status"], st["failure_class"], st["exit_code"], st["attempts"]) == ("failed", kind, code, 1)
            assert st["transient"] is False
        st = status(sweep_dir, variant, 2)
        assert st["status"] == "pending" and "crash loop: 2 runs of variant" in st["error"], st
        assert starts(run_dir(sweep_dir, variant, 2)) == 0
        assert f"STOP   variant {variant}: crash loop" in proc.stdout
        assert f"NOT STARTED {variant}/seed_2" in proc.stdout
    assert "FAILED rope/seed_0 " in proc.stdout and "holds 0 windows" in status(sweep_dir, "rope", 0)["error"]


# -- any task through the contract: a user's script that finishes, forgets to, or crashes ------------------------

USER_TASK = """
import os, sys
import yaml
if yaml.safe_load(open(os.path.join(os.environ["SWEEPER_RUN_DIR"], "config.yaml")))["mode"] == "early":
    raise KeyError("no_such_column")          # dies before sweeper.init(): only its log says why
import sweeper
run = sweeper.init()
for step in (1, 2, 3):
    run.log(step, loss=1.0 / step)
if run.config.mode == "crash":
    print(1 / 0)
if run.config.mode == "quiet":
    sys.exit(0)                               # exit 0, but the run never ended: a failure, not a success
run.finish(val_loss=0.5 + run.seed)
"""


@pytest.mark.slow
def test_user_task_outcomes_exit_0_without_finish_fails_and_a_crash_names_its_exception(tmp_path):
    project = user_project(tmp_path / "project", USER_TASK, {
        "ok": ["mode=finish"], "quiet": ["mode=quiet"], "crash": ["mode=crash"], "early": ["mode=early"]},
        config="mode: finish")
    d = tmp_path / "sweep"
    args = ["--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={d}", "launcher.max_retries=2",
            "launcher.retry_backoff_s=0", "launcher.crash_loop_after=0"]
    proc = run(args, cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "RETRY" not in proc.stdout                                          # none of these is transient
    never = ("exited 0 without calling run.finish(): it never reported the decision metric val_loss (end it with "
             "run.finish(val_loss=value))")
    expected = {"quiet": (0, never, "no_result"),                  # named as what it is: no result, no exception
                "crash": (1, "ZeroDivisionError: division by zero", "exception"),
                "early": (1, "KeyError: 'no_such_column'", "exception")}
    for variant, (code, error, kind) in expected.items():
        st = status(d, variant)
        assert (st["status"], st["error"], st["exit_code"], st["failure_class"], st["attempts"]) == \
            ("failed", error, code, kind, 1), st
        assert starts(run_dir(d, variant)) == 1
        assert f"FAILED {variant}/seed_0 " in proc.stdout and f"{kind}: {error}" in proc.stdout
    assert status(d, "ok")["status"] == "finished"
    report = (d / "report.md").read_text().split("## Failed runs")[1].split("## Variants")[0]
    for variant, (code, error, kind) in expected.items():
        assert f"| {variant}/seed_0 | {kind} | {code} | {error} |" in report, report


@pytest.mark.slow
def test_a_finished_summary_with_a_damaged_status_is_not_rerun(tmp_path):
    project = user_project(tmp_path / "project", USER_TASK, {"ok": ["mode=finish"], "also": ["mode=finish", "tag=b"]},
                           config="mode: finish\ntag: a")
    d = tmp_path / "sweep"
    args = ["--config-dir", "conf", "+experiment=mine", "seeds=0-1", f"sweeper.dir={d}", "sweeper.report=false"]
    assert run(args, cwd=project).returncode == 0
    damaged = run_dir(d, "ok", 1) / "status.json"
    damaged.write_bytes(b'{"status": "finis')                                 # killed while writing it
    again = run(args, cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skip   ok/seed_1 (already finished)" in again.stdout and "start" not in again.stdout
    assert starts(run_dir(d, "ok", 1)) == 1
    assert status(d, "ok", 1)["status"] == "finished"                         # repaired from its summary


@pytest.mark.parametrize("error, hint", [
    ("ImportError: cannot import name 'CUDAProperties' from 'kernels' (/p/kernels/__init__.py)",
     "a folder or file named 'kernels' found first"),
    ("ImportError: cannot import name 'x' from 'kernels' (/v/lib/python3.11/site-packages/kernels/__init__.py)",
     "the code expects another version of it"),
    ("ModuleNotFoundError: No module named 'transformers.models'", "'transformers' is neither in the script's folder"),
])
def test_an_import_error_says_its_cause_and_the_fix(error, hint):
    failure = classify(1, error)
    assert failure.message.startswith(error) and hint in failure.message and "\n" not in failure.message
