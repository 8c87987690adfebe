"""Warm starts (issue 16 item 2): a slot's warm launcher forks a child that is the process a cold start gives.

    python -m pytest -q tests/test_warm.py

Real processes: the forked child's /proc identity (cmdline, SWEEPER_JOB marker, own process group, affinity),
PR_SET_PDEATHSIG through a killed launcher, and a tiny sweep launched warm and cold with bitwise-equal finals
and the same environment seen by each run (CUDA_VISIBLE_DEVICES, thread counts, affinity, argv).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from sweeper.backends.local.pool import Job, job_processes
from sweeper.backends.local.slots import Slot
from sweeper.backends.local.warm import Server, WarmStarts
from sweeper.run.files.rundir import RunDir
from tests.helpers.commands import ROOT
from tests.helpers.local_pool import child_env, run, sweep_args, user_project, wait_for

TWO_CORES = len(os.sched_getaffinity(0)) >= 2
SLOW_TASK = """import time
def main(run):
    while not run.should_stop:
        time.sleep(0.05)
    return {"val_loss": 1.0}
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_warm_child_is_named_grouped_pinned_and_stopped_as_a_cold_one(tmp_path):
    (tmp_path / "slow_task.py").write_text(SLOW_TASK)
    rd = tmp_path / "runs" / "r0"
    rd.mkdir(parents=True)
    (rd / "config.yaml").write_text("seed: 0\n")
    core = min(os.sched_getaffinity(0))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
           "SWEEPER_RUN_DIR": str(rd), "SWEEPER_JOB": str(rd)}
    server = Server("slow_task:main", str(tmp_path), env, (core,))
    argv = [sys.executable, "-m", "sweeper.run", "slow_task:main", str(rd)]
    answer = server.request({"argv": argv, "env": env, "cwd": str(tmp_path), "log": str(rd / "out.log"),
                             "marker": str(rd), "cores": [core]})
    pid = answer["pid"]
    try:
        cmdline = [w.decode() for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if w]
        assert cmdline == argv                                   # what a cold start shows in ps and /proc
        assert f"SWEEPER_JOB={rd}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert job_processes(str(rd)) == [pid]                   # a later sweeper finds it as a leftover
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid  # its own session and process group
        assert os.sched_getaffinity(pid) == {core}
        server.proc.kill()                                       # the launcher dies (as when the sweeper does)
        server.proc.wait()
        wait_for(lambda: not _alive(pid), 30, "the child to stop on PR_SET_PDEATHSIG's SIGTERM")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert "Traceback" not in (rd / "out.log").read_text()


def test_cold_starts_when_warm_is_off_or_not_the_same_process(tmp_path, monkeypatch):
    slot = Slot(index=0, gpu=None, cores=(min(os.sched_getaffinity(0)),), threads=1)
    job = Job(key="k", label="l", group="g", argv=["/bin/true"], log_path=tmp_path / "log", marker="m",
              cwd=tmp_path)
    warm = WarmStarts(None, str(tmp_path))                   # a task.command: no launcher at all
    warm.open([slot], lambda s: {})
    assert warm.servers == {} and warm.start(job, slot, {}) is None
    assert warm.summary() == "cold starts: warm starts need a task.entry or a python task.command"
    monkeypatch.setenv("SWEEPER_COLD_START", "1")
    assert WarmStarts("sweeper.train:main", str(tmp_path)).entry is None


def _env_seen(rd: Path) -> dict:
    env = json.loads((rd / "env.json").read_text())
    return {k: env[k] for k in ("argv", "cpu_affinity", "cuda_visible_devices", "env", "torch_num_threads", "cwd")}


@pytest.mark.slow
@pytest.mark.skipif(not TWO_CORES, reason="needs 2 cores (2 slots of 1 thread each)")
def test_warm_and_cold_launches_give_bitwise_equal_runs_that_see_the_same_environment(tmp_path):
    out = {}
    for mode, extra in (("warm", {}), ("cold", {"SWEEPER_COLD_START": "1"})):
        d = tmp_path / mode
        # sweeper.reuse=false: the cold sweep trains its runs rather than reusing the warm sweep's finished ones
        proc = run(sweep_args(d, "launcher.cores=[0,1]", "sweeper.reuse=false", steps=10, seeds="0-1",
                              variants="rope"), env=child_env(extra))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out[mode] = (d, proc.stdout + proc.stderr)
    assert "warm starts: 2 of 2 run starts forked" in out["warm"][1]
    assert "cold starts: SWEEPER_COLD_START=1" in out["cold"][1] and "warm starts:" not in out["cold"][1]
    for seed in (0, 1):
        warm, cold = (out[m][0] / "runs" / "rope" / f"seed_{seed}" for m in ("warm", "cold"))
        assert RunDir(warm).read_summary().final == RunDir(cold).read_summary().final     # bitwise: floats ==
        seen_warm, seen_cold = _env_seen(warm), _env_seen(cold)
        assert seen_warm["argv"][-1] == str(warm) and seen_cold["argv"][-1] == str(cold)
        seen_warm["argv"], seen_cold["argv"] = seen_warm["argv"][:-1], seen_cold["argv"][:-1]
        assert seen_warm == seen_cold
        assert seen_warm["env"]["OMP_NUM_THREADS"] == "1" and seen_warm["torch_num_threads"] == 1
        assert seen_warm["cuda_visible_devices"] == "" and len(seen_warm["cpu_affinity"]) == 1


LAZY_TASK = """import json, sys
def main(run):
    seen = {m: m in sys.modules for m in ("heavy", "torch", "torch._dynamo")}
    import heavy
    (run.dir.path / "seen.json").write_text(json.dumps(seen))
    return {"val_loss": 1.0}
"""


def _preload_sweep(root: Path, preload: str, extra_env: dict | None = None, *extra: str, runs: int = 2):
    """A user project whose entry imports `heavy` (which imports torch) inside main; seeds 0-1 with task.preload."""
    user_project(root, "", {"a": []})
    (root / "lazy.py").write_text(LAZY_TASK)
    (root / "heavy.py").write_text("import torch\n")
    (root / "heavy_broken.py").write_text("raise RuntimeError('boom at import')\n")
    proc = run(["--config-dir", "conf", "+experiment=mine", f"seeds=0-{runs - 1}", "task.command=null",
                "task.entry=lazy:main", f"task.preload={preload}", f"sweeper.dir={root / 'sweep'}",
                "sweeper.report=false", *extra], env=child_env(extra_env), cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = [json.loads(p.read_text()) for p in sorted((root / "sweep").rglob("seen.json"))]
    assert len(seen) == runs, proc.stdout + proc.stderr
    return seen, proc.stdout + proc.stderr


@pytest.mark.slow
def test_preload_modules_and_torch_dynamo_are_imported_once_by_the_warm_launcher(tmp_path):
    """What the entry imports inside main (task.preload) is already loaded in the child a warm launcher forks,
    and torch._dynamo with torch (every torch.optim optimizer imports it); a cold start has none of it."""
    seen, log = _preload_sweep(tmp_path / "warm", "[heavy]")
    assert seen == [{"heavy": True, "torch": True, "torch._dynamo": True}] * 2, log
    assert "warm starts: 2 of 2 run starts forked" in log
    seen, log = _preload_sweep(tmp_path / "cold", "[heavy]", {"SWEEPER_COLD_START": "1"})
    assert seen == [{"heavy": False, "torch": False, "torch._dynamo": False}] * 2, log


@pytest.mark.slow
def test_a_preload_module_that_fails_to_import_starts_runs_cold_and_says_why(tmp_path):
    seen, log = _preload_sweep(tmp_path, "[heavy_broken]")
    assert seen == [{"heavy": False, "torch": False, "torch._dynamo": False}] * 2, log
    assert ("warm starts: 0 of 2 run starts forked by a slot's warm launcher (warm start unavailable: ImportError: "
            "task.preload module heavy_broken does not import (RuntimeError: boom at import))") in log, log


@pytest.mark.slow
@pytest.mark.skipif(not TWO_CORES, reason="needs 2 cores (one slot of 2 threads)")
def test_a_slot_of_two_threads_forks_warm_without_the_preload(tmp_path):
    """With 2 threads, numpy's OpenBLAS starts a thread pool at import and no fork after it is safe: the launcher
    skips task.preload and still forks the run (warm), which then imports heavy itself."""
    seen, log = _preload_sweep(tmp_path, "[heavy]", None, "launcher.cores=[0,1]", runs=1)
    assert "start  mine/seed_0 on cpu0 (cores 0,1, 2 threads)" in log or "2 threads" in log, log
    assert seen == [{"heavy": False, "torch": False, "torch._dynamo": False}], log
    assert "warm starts: 1 of 1 run starts forked" in log, log
