"""The local pool backend: every unfinished run of a plan as a pinned child process, retried per policy.

    statuses = launch(plan, LauncherConfig(), Progress(total=len(plan.runs)))   # run_id -> final status

What runs: finished runs are skipped, diverged ones kept (an outcome: rerunning would diverge again), every
other run (pending, interrupted, failed, or "running" left by a killed sweeper) is queued, seed-major (seed 0
of every variant first, so a partial sweep compares variants on equal seeds). A run with checkpoints resumes
from them with the thread count its checkpoint was written with. Failures are classified (sweeper.failures):
transient ones (killed by a signal, CUDA out of memory) are retried up to launcher.max_retries times after
launcher.retry_backoff_s, 2x, 4x ...; deterministic ones (exit 2, health check, an exception) are not; when
launcher.crash_loop_after runs of a variant fail with the same error, its queued runs are not started.
Process handling (slots, process groups, Ctrl-C, orphans) is sweeper.pool.
"""
from __future__ import annotations

import sys
import time

from sweeper.failures import EXIT_STOPPED, KEEP, Failure, classify, log_tail, run_state
from sweeper.plan import Plan, RunSpec
from sweeper.pool import Job, run_pool
from sweeper.progress import Progress
from sweeper.slots import PROJECT_ROOT, LauncherConfig, make_slots
from train.atomic import atomic_write_json, read_json

def has_checkpoint(run: RunSpec) -> bool:
    ckpt = run.run_dir / "ckpt"
    return ckpt.is_dir() and any(p.name.startswith("step_") for p in ckpt.iterdir())


class RunAdapter:
    """Between the pool and a run dir: status.json is the child's; the parent completes it when it cannot."""

    def __init__(self, plan: Plan):
        self.runs = {r.run_id: r for r in plan.runs}

    def job(self, run: RunSpec) -> Job:
        threads = None
        if has_checkpoint(run):      # resume with the thread count the checkpoint's fingerprint holds
            threads = (read_json(run.run_dir / "env.json", {}) or {}).get("torch_num_threads")
        return Job(key=run.run_id, label=run.label, group=run.variant,
                   argv=[sys.executable, "-m", "train", str(run.run_dir)], log_path=run.run_dir / "stdout.log",
                   marker=str(run.run_dir), cwd=PROJECT_ROOT, run_dir=run.run_dir,
                   total_steps=run.config["train"]["steps"], threads=threads if isinstance(threads, int) else None)

    def settle(self, job: Job, returncode: int, interrupted: bool, attempt: int) -> tuple[dict, Failure | None]:
        run = self.runs[job.key]
        status = read_json(run.run_dir / "status.json", {}) or {}
        state = status.get("status")
        stopped_with_checkpoint = returncode == EXIT_STOPPED and state == "interrupted"    # the child wrote it
        base = {"run_id": run.run_id, "variant": run.variant, "seed": run.seed, "attempts": attempt}
        if returncode == 0 and state in KEEP:
            status.update(base)
            atomic_write_json(run.run_dir / "status.json", status)
            return status, None
        if interrupted:
            if not stopped_with_checkpoint:    # the child could not write it itself
                status.update(status="interrupted", error="stopped by the sweeper (Ctrl-C / SIGTERM) before it "
                              "could checkpoint; resumes from its last checkpoint", exit_code=returncode,
                              ended=time.time())
            status.update(base)
            atomic_write_json(run.run_dir / "status.json", status)
            return status, None
        health = (read_json(run.run_dir / "health.json", {}) or {}).get("verdict")
        error = status.get("error") if state in ("failed", "interrupted") else None
        failure = classify(returncode, error, log_tail(run.run_dir / "stdout.log"), health)
        status.update(status="interrupted" if stopped_with_checkpoint else "failed", error=failure.message,
                      exit_code=returncode, ended=time.time(), **failure.to_dict(), **base)
        atomic_write_json(run.run_dir / "status.json", status)
        return status, failure

    def not_started(self, job: Job, reason: str) -> dict:
        run = self.runs[job.key]
        status = read_json(run.run_dir / "status.json", {}) or {}
        status.update(status="pending", error=f"not started: {reason}", run_id=run.run_id, variant=run.variant,
                      seed=run.seed)
        atomic_write_json(run.run_dir / "status.json", status)
        return status


def launch(plan: Plan, launcher_cfg: LauncherConfig | dict, progress: Progress | None = None) -> dict[str, str]:
    """Run every run of the plan that is not finished or diverged; returns run_id -> final status."""
    cfg = launcher_cfg if isinstance(launcher_cfg, LauncherConfig) else LauncherConfig.from_dict(launcher_cfg)
    progress = progress or Progress(total=len(plan.runs))
    results, todo = {}, []
    for run in plan.runs:
        state = run_state(run.run_dir)
        if state in KEEP:
            results[run.run_id] = state
            progress.skipped(run, state)
        else:
            todo.append(run)
    variant_order = {v: i for i, v in enumerate(plan.experiment.variants)}
    todo.sort(key=lambda r: (plan.seeds.index(r.seed) if r.seed in plan.seeds else r.seed, variant_order[r.variant]))
    resumable = [r.label for r in todo if has_checkpoint(r)]
    if resumable:
        progress.log(f"resume {len(resumable)} run(s) from their checkpoints: {', '.join(resumable)}")
    if not todo:
        return results
    slots = make_slots(cfg, len(todo))
    adapter = RunAdapter(plan)
    outcomes = run_pool([adapter.job(r) for r in todo], slots, adapter, cfg.retry_policy(), progress,
                        grace_s=float(cfg.grace_s))
    results.update({key: status.get("status", "failed") for key, status in outcomes.items()})
    return results


def parse_launcher_config(launcher: dict) -> LauncherConfig:
    cfg = LauncherConfig.from_dict(launcher)
    make_slots(cfg, 1)    # device and core selections are checked before anything starts
    return cfg
