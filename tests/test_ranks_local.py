"""Multi-rank runs in a real sweep on CPU (gloo): a 2-rank variant beside a 1-rank baseline, end to end; a rank
killed mid-run ends its run at once, named in its status and the report; Ctrl-C and SIGKILL of the sweeper,
then the same command: every run bitwise equal to the sweep that was never interrupted.

Run: ``python -m pytest -q tests/test_ranks_local.py`` (the interrupt test is marked slow: ``-m slow``)
"""
import json
import os
import signal
import time

import pytest

from sweeper.run.files.manifest import read_manifest
from tests.helpers.local_pool import (
    checkpoints,
    child_env,
    processes_mentioning,
    run,
    run_dir,
    start,
    status,
    sweep_args,
    wait_for,
)
from tests.helpers.train_runs import assert_bitwise_equal

pytest_plugins = ["tests.helpers.local_pool"]     # its sweep_dir fixture

WIDE = "+experiment.resources={nope: {ranks_per_run: 2}}"
CORES = sorted(os.sched_getaffinity(0))


def wide_args(d, *extra, steps=10, seeds="0"):
    return sweep_args(d, WIDE, *extra, steps=steps, seeds=seeds)


@pytest.mark.slow
def test_a_two_rank_variant_beside_a_one_rank_baseline(sweep_dir):
    proc = run(wide_args(sweep_dir, "sweeper.report=true"), env=child_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "start  nope/seed_0 on cpu0+cpu1 (cores" in proc.stdout, proc.stdout
    assert "variant" in proc.stdout and "nope" in proc.stdout and "vs rope" in proc.stdout   # the report, as ever
    manifest = read_manifest(sweep_dir)
    assert manifest.resources == {"rope": {"ranks_per_run": 1}, "nope": {"ranks_per_run": 2}}
    rope, nope = run_dir(sweep_dir, "rope"), run_dir(sweep_dir, "nope")
    summary = json.loads((nope / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["fingerprint"]["world_size"] == 2
    assert summary["fingerprint"]["device_model"] == "cpu"
    assert json.loads((rope / "summary.json").read_text())["fingerprint"]["world_size"] == 1
    envs = [json.loads((nope / name).read_text()) for name in ("env.json", "env.rank1.json")]
    assert [e["rank"]["rank"] for e in envs] == ["0", "1"] and {e["rank"]["world_size"] for e in envs} == {"2"}
    assert envs[0]["rank"]["master_port"] == envs[1]["rank"]["master_port"]
    assert {e["cuda_visible_devices"] for e in envs} == {""} and {e["torch_num_threads"] for e in envs} == {1}
    if len(CORES) >= 2:                           # each rank pinned to its own slot's cores
        assert not set(envs[0]["cpu_affinity"]) & set(envs[1]["cpu_affinity"]), envs
    assert not (rope / "env.rank1.json").exists() and (nope / "stdout.rank1.log").exists()
    steps = [r["step"] for r in map(json.loads, (nope / "metrics.jsonl").read_text().splitlines())]
    assert steps == sorted(set(steps)) and steps[-1] == 10          # rank 0 alone logs: no line twice
    ckpt = checkpoints(nope)[-1]
    from sweeper.run.checkpoint import read_checkpoint

    blob = read_checkpoint(nope / "ckpt" / f"step_{ckpt:08d}.pt")
    assert blob["world_size"] == 2 and len(blob["ranks"]) == 2       # every rank's RNG states
    assert not blob["ranks"][0]["rng"]["torch"].equal(blob["ranks"][1]["rng"]["torch"])   # its own dropout stream
    assert processes_mentioning(str(sweep_dir)) == []


@pytest.mark.slow
def test_a_killed_rank_ends_its_run_named_within_30s(sweep_dir, tmp_path):
    log = tmp_path / "sweep.log"
    proc = start(wide_args(sweep_dir, "launcher.max_retries=0", "sweeper.report=true", "sweeper.one_change=off",
                           "experiment.variants.rope=['train.steps=10']", steps=2000), log)   # the baseline: short
    nope = run_dir(sweep_dir, "nope")
    wait_for(lambda: (nope / "env.rank1.json").exists() and '"step": 10,' in
             (nope / "metrics.jsonl").read_text(errors="replace") if (nope / "metrics.jsonl").exists() else False,
             180, "the 2-rank run to log step 10", proc, log)
    pid = json.loads((nope / "env.rank1.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    t0 = time.time()
    # rank 0 may record its own gloo error first; the pool's record (with attempts) names the cause
    wait_for(lambda: status(sweep_dir, "nope").get("attempts"), 30, "the pool to end the run")
    took = time.time() - t0
    st = status(sweep_dir, "nope")
    assert st["error"].startswith("rank 1 of 2: killed by SIGKILL") and st["failure_class"] == "signal", st
    assert took < 30
    print(f"the killed rank ended its run, named in its status, {took:.2f} s after the kill")
    assert proc.wait(timeout=120) == 1
    out = log.read_text()
    assert "FAILED nope/seed_0" in out and "rank 1 of 2: killed by SIGKILL" in out
    assert "rank 1 of 2: killed by SIGKILL" in (sweep_dir / "report.md").read_text()
    assert processes_mentioning(str(sweep_dir)) == []


@pytest.mark.slow
def test_ctrl_c_and_sigkill_of_the_sweeper_then_the_same_command_is_bitwise_the_uninterrupted_sweep(tmp_path):
    ref = tmp_path / "ref"
    args = lambda d: wide_args(d, "train.ckpt_interval=5", "launcher.grace_s=20", "sweeper.reuse=false",  # noqa
                               steps=60, seeds="0-1")  # trains (and resumes), reusing none of ref's
    assert run(args(ref), timeout=600).returncode == 0
    for how in ("sigint", "sigkill"):
        d = tmp_path / how
        log = tmp_path / f"{how}.log"
        first = start(args(d), log)
        wide = run_dir(d, "nope", 0)
        wait_for(lambda: checkpoints(wide) and status(d, "nope", 0).get("status") == "running", 300,
                 "the 2-rank run running with a checkpoint", first, log)
        os.kill(first.pid, signal.SIGINT if how == "sigint" else signal.SIGKILL)
        first.wait(timeout=120)
        if how == "sigint":
            assert first.returncode == 130, log.read_text()[-2000:]
        wait_for(lambda: not processes_mentioning(str(d)), 60, "every rank to stop")
        if how == "sigint":      # every rank stopped at one step, with a checkpoint
            st = status(d, "nope", 0)
            assert st["status"] == "interrupted" and st["exit_code"] == 75, st
        again = run(args(d), timeout=600)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr
        for variant in ("rope", "nope"):
            for seed in (0, 1):
                assert_bitwise_equal(run_dir(ref, variant, seed), run_dir(d, variant, seed))
        assert json.loads((wide / "summary.json").read_text()).get("resumed_from"), how
