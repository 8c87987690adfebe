"""Resuming a sweep: after SIGKILL of the sweeper itself, re-running the same command redoes no finished run and
resumes interrupted ones from their checkpoints; a different plan is refused; seeds extend only when asked;
`python -m sweeper.resume` runs from the sweep dir alone and refuses a run config edited since planning."""
import json
import os
import signal
from pathlib import Path

import pytest

from sweeper.run.files.manifest import MANIFEST, read_manifest
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
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

VARIANTS = ("rope", "nope")


def snapshot(d, variant, seed):
    rd = run_dir(d, variant, seed)
    env = json.loads((rd / "env.json").read_text())
    return {"summary_mtime": os.stat(rd / "summary.json").st_mtime_ns, "pid": env["pid"], "starts": starts(rd)}


@pytest.mark.slow
def test_sigkill_of_the_sweeper_then_same_command_resumes(sweep_dir, tmp_path):
    # max_parallel=1 and seed-major order: rope/0, nope/0, rope/1, nope/1, one at a time.
    args = sweep_args(sweep_dir, "launcher.max_parallel=1", "train.ckpt_interval=5", steps=200, seeds="0-1")
    log = tmp_path / "first.log"
    # Each run leaves a stuck worker and a daemon behind (tests/grandchildren/sitecustomize.py) if nobody kills them.
    first = start(args, log, env=child_env(grandchildren=True))

    def some_finished_one_running_with_checkpoint():
        states = {(v, s): status(sweep_dir, v, s).get("status") for v in VARIANTS for s in (0, 1)}
        running = [k for k, st in states.items() if st == "running" and checkpoints(run_dir(sweep_dir, *k))]
        return running if "finished" in states.values() and running else None

    running = wait_for(some_finished_one_running_with_checkpoint, 180, "a finished run and a running one", first, log)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    # The orphaned run gets SIGTERM from the kernel (PR_SET_PDEATHSIG): it checkpoints and stops by itself.
    (v_int, s_int), = running
    wait_for(lambda: status(sweep_dir, v_int, s_int).get("status") == "interrupted", 60, "the orphaned run to stop")
    st = status(sweep_dir, v_int, s_int)
    assert st["exit_code"] == 75, st
    # Its stuck worker and daemon outlive the sweeper; the finished runs left nothing (cleaned when they ended).
    interrupted_dir = str(run_dir(sweep_dir, v_int, s_int))
    leftovers = wait_for(lambda: [p for p in processes_mentioning(str(sweep_dir))
                                  if not p[1].rstrip().endswith(interrupted_dir)] == []
                         and len(processes_mentioning(interrupted_dir)) == 2 and processes_mentioning(interrupted_dir),
                         30, "exactly the interrupted run's two leftovers")
    ckpt_step = checkpoints(run_dir(sweep_dir, v_int, s_int))[-1]
    finished = [(v, s) for v in VARIANTS for s in (0, 1) if status(sweep_dir, v, s).get("status") == "finished"]
    before = {k: snapshot(sweep_dir, *k) for k in finished}

    again = run(args + ["launcher.grace_s=2"])        # launcher settings are not part of the plan
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"stop   {v_int}/seed_{s_int}: 2 process(es) left by an earlier sweeper" in again.stdout
    assert processes_mentioning(str(sweep_dir)) == [], leftovers
    for k in finished:                            # not redone: same summary file, same process, one start
        assert snapshot(sweep_dir, *k) == before[k], k
        assert f"skip   {k[0]}/seed_{k[1]} (already finished)" in again.stdout
    rd = run_dir(sweep_dir, v_int, s_int)
    summary = json.loads((rd / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 200
    assert summary["resumed_from"] == f"step_{ckpt_step:08d}.pt"
    assert starts(rd) == 2
    for v in VARIANTS:
        for s in (0, 1):
            assert status(sweep_dir, v, s)["status"] == "finished"

    # The same directory with a different plan is refused before anything starts.
    changed = run(sweep_args(sweep_dir, "train.lr=0.01", steps=200, seeds="0-1"))
    assert changed.returncode == 2 and "holds a different plan" in changed.stderr, changed.stderr
    more = run(args + ["seeds=0-2"])
    assert more.returncode == 2 and "sweeper.extend=true" in more.stderr, more.stderr
    assert all(starts(run_dir(sweep_dir, v, s)) == (2 if (v, s) == (v_int, s_int) else 1)
               for v in VARIANTS for s in (0, 1))
    assert not run_dir(sweep_dir, "rope", 2).exists()


@pytest.mark.slow
def test_extend_seeds_keeps_old_runs_and_resume_module(sweep_dir, tmp_path):
    args = sweep_args(sweep_dir, steps=10, variants="rope")
    assert run(args).returncode == 0
    old = snapshot(sweep_dir, "rope", 0)
    extended = run(args + ["seeds=0-1", "sweeper.extend=true"])
    assert extended.returncode == 0, extended.stderr
    assert snapshot(sweep_dir, "rope", 0) == old
    assert status(sweep_dir, "rope", 1)["status"] == "finished"
    manifest = read_manifest(sweep_dir)
    assert manifest.seeds == [0, 1] and len(manifest.runs) == 2 and manifest.task["entry"] == "sweeper.train:main"

    # python -m sweeper.resume: from the directory alone; a failed run is run again, finished ones skipped.
    failed = RunDir(run_dir(sweep_dir, "rope", 1))
    failed.update_status(Status.FAILED, error="RuntimeError: simulated crash of an earlier sweeper")
    failed.summary_path.unlink()
    for ck in failed.ckpt_dir.iterdir():
        ck.unlink()
    resumed = run([str(sweep_dir), "sweeper.report=false", "launcher.max_parallel=1"], module="sweeper.resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "skip   rope/seed_0" in resumed.stdout and "start  rope/seed_1" in resumed.stdout
    assert snapshot(sweep_dir, "rope", 0) == old
    assert status(sweep_dir, "rope", 1)["status"] == "finished"

    # A frozen run config edited since planning is a different plan: refused, one line, exit 2.
    edited = RunDir(run_dir(sweep_dir, "rope", 0))
    cfg = edited.read_config()
    cfg["train"]["lr"] = 0.5
    edited.write_config(cfg)
    refused = run([str(sweep_dir)], module="sweeper.resume")
    assert refused.returncode == 2 and f"differs from the plan recorded in {MANIFEST}" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    bad = run([str(tmp_path / "nowhere")], module="sweeper.resume")
    assert bad.returncode == 2 and f"no readable {MANIFEST}" in bad.stderr
    bad_arg = run([str(sweep_dir), "train.steps=5"], module="sweeper.resume")
    assert bad_arg.returncode == 2 and "launcher.KEY=VALUE" in bad_arg.stderr
    (sweep_dir / MANIFEST).write_text("{not json")
    damaged = run([str(sweep_dir)], module="sweeper.resume")
    assert damaged.returncode == 2 and len(damaged.stderr.strip().splitlines()) == 1
    assert f"{sweep_dir / MANIFEST}: the sweep manifest is not valid JSON" in damaged.stderr



@pytest.mark.slow
@pytest.mark.parametrize("override, says", [("sweeper.report=maybe", "sweeper.report='maybe': expected a boolean"),
                                            ("sweeper.report=1", "sweeper.report='1': expected a boolean"),
                                            ("launcher.max_parallel=0", "launcher.max_parallel=0: must be a positive")])
def test_resume_overrides_are_type_checked_before_anything_runs(tmp_path, capsys, override, says):
    from sweeper.cli.resume import main
    from sweeper.cli.sweep import prepare
    from sweeper.plan.make import write_plan

    root = tmp_path / "s"
    argv = ["+experiment=rope", "seeds=0", f"sweeper.dir={root}"]
    plan, _, _ = prepare(argv)
    write_plan(plan, argv)                          # planned, nothing run
    before = sorted(p.name for p in Path(root).iterdir())
    assert main([str(root), override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]
    assert sorted(p.name for p in Path(root).iterdir()) == before      # no report written, nothing started
