"""The local pool: each run a fresh child process pinned to its slot, the next run starting when a slot frees.

    statuses = launch(plan, LauncherConfig(), Progress(total=len(plan.runs)))

The child's environment (CUDA_VISIBLE_DEVICES, OMP/MKL threads) and CPU affinity are set before it starts;
its output goes to RUN_DIR/stdout.log. Finished runs are skipped, interrupted ones resume from their
checkpoints. Ctrl-C or SIGTERM: every child's process group gets SIGTERM (runs checkpoint at the next step and
end "interrupted"), then SIGKILL after a grace period; a second Ctrl-C kills at once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from sweeper.plan import Plan, RunSpec
from sweeper.progress import Progress
from sweeper.slots import PROJECT_ROOT, LauncherConfig, Slot, make_slots
from train.atomic import atomic_write_json, read_json

TERMINAL = ("finished", "failed", "diverged", "interrupted")
GRACE_S = 20.0


@dataclass
class Child:
    run: RunSpec
    slot: Slot
    proc: subprocess.Popen
    started: float


def run_state(run: RunSpec) -> str:
    status = read_json(run.run_dir / "status.json", {}) or {}
    return status.get("status", "pending")


def start_child(run: RunSpec, slot: Slot) -> subprocess.Popen:
    log = open(run.run_dir / "stdout.log", "ab")
    log.write(f"\n=== sweeper: start on {slot.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n".encode())
    log.flush()
    cores = set(slot.cores)

    def pin() -> None:   # runs in the child between fork and exec
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)

    try:
        return subprocess.Popen([sys.executable, "-m", "train", str(run.run_dir)], cwd=PROJECT_ROOT,
                                env=slot.child_env(os.environ), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=pin)
    finally:
        log.close()


def settle_status(run: RunSpec, returncode: int, interrupted: bool) -> dict:
    """The run's final status: the child's own, or one the parent writes when the child could not."""
    status = read_json(run.run_dir / "status.json", {}) or {}
    if status.get("status") in TERMINAL and status.get("status") != "running":
        if status["status"] != "interrupted" or interrupted or returncode == 75:
            return status
    if interrupted:
        status.update(status="interrupted", error="stopped by the sweeper (Ctrl-C / SIGTERM)")
    elif returncode < 0:
        status.update(status="failed", error=f"killed by {signal.Signals(-returncode).name}")
    else:
        status.update(status="failed", error=status.get("error") or f"exit status {returncode}")
    status.update(exit_code=returncode, ended=time.time(), run_id=run.run_id, variant=run.variant, seed=run.seed)
    atomic_write_json(run.run_dir / "status.json", status)
    return status


class _Interrupts:
    """Counts SIGINT/SIGTERM while the pool runs; restores the previous handlers afterwards."""

    def __init__(self):
        self.count = 0
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, *_):
        self.count += 1

    def __exit__(self, *exc):
        for sig, h in self._old.items():
            signal.signal(sig, h)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def launch(plan: Plan, launcher_cfg: LauncherConfig | dict, progress: Progress | None = None) -> dict[str, str]:
    """Run every unfinished run of the plan; returns run_id -> final status."""
    cfg = launcher_cfg if isinstance(launcher_cfg, LauncherConfig) else LauncherConfig.from_dict(launcher_cfg)
    progress = progress or Progress(total=len(plan.runs))
    queue = []
    for run in plan.runs:
        if run_state(run) == "finished":
            progress.skipped(run)
        else:
            queue.append(run)
    slots = make_slots(cfg, len(queue))
    free = list(slots)
    running: list[Child] = []
    results = {r.run_id: "finished" for r in plan.runs if r not in queue}
    with _Interrupts() as intr:
        while (queue or running) and not intr.count:
            while free and queue:
                slot, run = free.pop(0), queue.pop(0)
                running.append(Child(run, slot, start_child(run, slot), time.time()))
                progress.started(run, slot)
            for child in [c for c in running if c.proc.poll() is not None]:
                running.remove(child)
                free.append(child.slot)
                free.sort(key=lambda s: s.index)
                status = settle_status(child.run, child.proc.returncode, interrupted=False)
                results[child.run.run_id] = status["status"]
                progress.ended(child.run, status, time.time() - child.started)
            progress.tick([(c.run, c.slot) for c in running])
            time.sleep(0.1)
        if intr.count:
            progress.log(f"interrupted: stopping {len(running)} running run(s) (SIGTERM, then SIGKILL after "
                         f"{GRACE_S:.0f}s; Ctrl-C again to kill now)")
            _stop_all(running, intr)
            for child in running:
                status = settle_status(child.run, child.proc.returncode, interrupted=True)
                results[child.run.run_id] = status["status"]
            for run in queue:
                results[run.run_id] = "pending"
            raise KeyboardInterrupt
    return results


def _stop_all(running: list[Child], intr: _Interrupts) -> None:
    first = intr.count
    for child in running:
        _signal_group(child.proc, signal.SIGTERM)
    deadline = time.time() + GRACE_S
    while any(c.proc.poll() is None for c in running) and time.time() < deadline and intr.count == first:
        time.sleep(0.05)
    for child in running:
        _signal_group(child.proc, signal.SIGKILL)   # also reaps grandchildren (e.g. DataLoader workers)
        child.proc.wait()


def parse_launcher_config(launcher: dict) -> LauncherConfig:
    cfg = LauncherConfig.from_dict(launcher)
    make_slots(cfg, 1)    # device and core selections are checked before anything starts
    return cfg
