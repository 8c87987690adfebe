"""The local pool backend: every unfinished run of a plan as a pinned child process, retried per policy.

    statuses = LocalBackend().launch(plan, LocalLauncherConf(), Progress(total=len(plan.runs)))  # run_id -> status

What runs: each run's task (plan.argv(run), in plan.task.cwd, with plan.run_env(run) and the task's cwd on
PYTHONPATH). Finished runs are skipped (RunDir.outcome: a summary that says finished counts even when the
status is damaged), diverged ones kept (an outcome: rerunning would diverge again), every other run (pending,
interrupted, failed, or running left by a killed sweeper) is queued, seed-major (seed 0 of every variant first,
so a partial sweep compares variants on equal seeds). Every run gets the thread count the plan fixed
(plan.launch, launch_settings: from the launcher config and the whole plan, whatever is left to run); a run that
already ran keeps the count it recorded (its env record; its checkpoints were written with it). Failures are classified
(sweeper.backends.failures): transient
ones (killed by a signal, CUDA out of memory) are retried up to launcher.max_retries times after
launcher.retry_backoff_s, 2x, 4x ...; deterministic ones (exit 2, health check, an exception, exit 0 without
run.finish()) are not; when launcher.crash_loop_after runs of a variant fail with the same error, its queued
runs are not started. Process handling (slots, process groups, Ctrl-C, orphans) is sweeper.backends.local.pool; a
task.entry
run is forked by its slot's warm launcher (sweeper.backends.local.warm: the torch import paid once per slot, not per
run).
A run of N ranks (plan.ranks_of(variant): launcher.ranks_per_run or experiment.resources) is N processes on N
slots (sweeper.backends.local.ranks); a rank that dies ends the run, its status naming the rank.
"""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.backends.base import Backend
from sweeper.backends.failures import CONFIG, NO_RESULT, Failure, attempt_outcome
from sweeper.backends.local.schema import LocalLauncherConf
from sweeper.backends.local.slots import available_cores, make_slots
from sweeper.backends.metric_check import MetricCheck
from sweeper.backends.progress import Progress
from sweeper.config.task import python_path
from sweeper.errors import UsageError
from sweeper.run.files.manifest import Launch
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP, LOST_SUMMARY, Status

if TYPE_CHECKING:
    from sweeper.backends.local.pool import Job


def launch_settings(cfg: LocalLauncherConf, n_runs: int, ranks=()) -> Launch:
    """What the plan fixes for every run of a sweep of n_runs runs (all of them, not the runs left): the thread
    count its slots would give with every run queued (launcher.threads_per_run, else the cores split evenly;
    ranks: each run's ranks, a slot per rank). A run wider than the devices, or a thread count above the cores
    this process may use, is refused here (UsageError)."""
    cores = available_cores(cfg)
    if cfg.threads_per_run is not None and cfg.threads_per_run > len(cores):
        raise UsageError(f"launcher.threads_per_run={cfg.threads_per_run}: more threads than the {len(cores)} "
                         f"core(s) this sweep may use ({_cores(cores)}): at most {len(cores)}, or null to split "
                         f"the cores evenly across the runs")
    return Launch(threads_per_run=make_slots(cfg, n_runs, cores=cores, ranks=ranks)[0].threads)


def _cores(cores: list[int]) -> str:
    return f"cores {cores[0]}-{cores[-1]}" if cores == list(range(cores[0], cores[-1] + 1)) else f"cores {cores}"


def recorded_threads(rd: RunDir) -> int | None:
    """The thread count a run that already ran recorded (its env record), None when it has none: a run with
    checkpoints must resume with it (the fingerprint check), one without keeps it too."""
    try:
        threads = rd.read_env().get("torch_num_threads")
    except UnreadableFile:
        return None
    return threads if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0 else None


def lost_result(rd: RunDir) -> str | None:
    """The error RunDir.outcome() recorded for a finished run whose summary is gone (it runs again), else None."""
    try:
        error = rd.read_status().error or ""
    except UnreadableFile:
        return None
    return error if LOST_SUMMARY in error else None


class RunAdapter:
    """Between the pool and a run dir: the run's status is the child's; the parent completes it when it cannot."""

    def __init__(self, plan, progress: Progress | None = None):
        self.plan = plan
        self.runs = {r.run_id: r for r in plan.runs}
        self.progress = progress
        self.metrics = MetricCheck(plan.experiment)
        self.stop: str | None = None     # set when a finished run lacks the decision metric: the pool stops

    def job(self, run) -> Job:
        from sweeper.backends.local.pool import Job  # deferred: the pool and its warm starts load when runs launch

        rd = run.rundir
        return Job(key=run.run_id, label=run.label, group=run.variant, argv=self.plan.argv(run),
                   log_path=rd.log_path, marker=str(rd.path), cwd=Path(self.plan.task.cwd), run_dir=rd.path,
                   total_steps=run.total_steps, threads=recorded_threads(rd) or self.plan.launch.threads_per_run,
                   extra_env=dict(self.plan.run_env(run)),
                   pythonpath=python_path(self.plan.task), ranks=self.plan.ranks_of(run.variant))

    def _ids(self, run, attempt: int | None = None) -> dict:
        ids = {"run_id": run.run_id, "variant": run.variant, "seed": run.seed}
        return ids if attempt is None else {**ids, "attempts": attempt}

    def settle(self, job: Job, returncode: int, interrupted: bool, attempt: int) -> tuple[dict, Failure | None]:
        run = self.runs[job.key]
        rd = run.rundir
        state, failure = attempt_outcome(rd, returncode)
        if failure is not None and job.rank_exit is not None:        # one rank's exit ended the run: name it
            failure = job.rank_exit.failure(failure, rd.log_path)
        if failure is not None and failure.kind == NO_RESULT:        # name what is missing: the decision metric
            metric = self.plan.experiment.metric
            failure = dataclasses.replace(failure, message=f"{failure.message}: it never reported the decision "
                                          f"metric {metric} (end it with run.finish({metric}=value))")
        if state is Status.FINISHED:                     # fail fast: the decision metric must be a number
            problem = self.metrics.settle(rd.path, run.label, self.progress.log if self.progress else None)
            if problem:
                self.stop = self.stop or problem
                return rd.update_status(**self._ids(run, attempt)).to_dict(), \
                    Failure(CONFIG, problem, f"{CONFIG}: decision metric")
        if failure is None:                              # finished or diverged: the child's record stands
            return rd.update_status(**self._ids(run, attempt)).to_dict(), None
        if interrupted:                                  # the sweeper stopped it: not a failure of the run
            if state is not Status.INTERRUPTED:          # the child could not record it itself
                rd.update_status(Status.INTERRUPTED, error="stopped by the sweeper (Ctrl-C / SIGTERM) before it "
                                 "could checkpoint; " + _resumes(rd), exit_code=returncode, ended=time.time())
            return rd.update_status(**self._ids(run, attempt)).to_dict(), None
        record = rd.update_status(state, error=failure.message, exit_code=returncode, ended=time.time(),
                                  **failure.to_dict(), **self._ids(run, attempt))
        return record.to_dict(), failure

    def not_started(self, job: Job, reason: str) -> dict:
        run = self.runs[job.key]
        return run.rundir.update_status(Status.PENDING, error=f"not started: {reason}", **self._ids(run)).to_dict()


def _resumes(rd: RunDir) -> str:
    """What a resume does with a run stopped before it could checkpoint."""
    return "resumes from its last checkpoint" if rd.has_checkpoint() else "restarts from scratch (no checkpoint)"


def launch(plan, launcher_cfg: LocalLauncherConf | dict, progress: Progress | None = None,
           gate=None) -> dict[str, str]:
    """Run every run of the plan that is not finished or diverged; returns run_id -> final status. gate: a
    preflight running beside the pool (sweeper.execute.preflight_gate.PreflightGate), None: none."""
    cfg = launcher_cfg if isinstance(launcher_cfg, LocalLauncherConf) else LocalLauncherConf.from_dict(launcher_cfg)
    metric = getattr(getattr(plan, "experiment", None), "metric", None)
    progress = progress or Progress(total=len(plan.runs), metric=metric)
    results, todo = {}, []
    for run in plan.runs:
        state = run.rundir.outcome()
        if state in KEEP:
            results[run.run_id] = state.value
            progress.skipped(run, state.value)
        else:
            todo.append(run)
            lost = lost_result(run.rundir)
            if lost:
                progress.log(f"redo   {run.label}: {lost}")
    variant_order = {v: i for i, v in enumerate(plan.experiment.variants)}
    todo.sort(key=lambda r: (plan.seeds.index(r.seed) if r.seed in plan.seeds else r.seed, variant_order[r.variant]))
    resumable = [r.label for r in todo if r.rundir.has_checkpoint()]
    if resumable:
        progress.log(f"resume {len(resumable)} run(s) from their checkpoints: {', '.join(resumable)}")
    if not todo:
        return results
    if plan.launch.threads_per_run is not None:     # slots sized for the plan's threads, not for the runs left
        cfg = dataclasses.replace(cfg, threads_per_run=plan.launch.threads_per_run)
    notes: list[str] = []
    slots = make_slots(cfg, len(todo), ranks=[plan.ranks_of(r.variant) for r in todo], notes=notes)
    for note in notes:                           # GPUs another process fills: named
        progress.log(f"note: {note}")
    from sweeper.backends.local.pool import run_pool  # deferred: a bad command line never loads the pool
    from sweeper.backends.local.warm import WarmStarts

    adapter = RunAdapter(plan, progress)
    one_rank = any(plan.ranks_of(r.variant) == 1 for r in todo)     # multi-rank runs start cold: no launcher
    warm = WarmStarts(*_warm(plan.task)) if one_rank else None
    outcomes = run_pool([adapter.job(r) for r in todo], slots, adapter, cfg.retry_policy(), progress,
                        grace_s=float(cfg.grace_s), warm=warm, max_parallel=cfg.max_parallel, watch=cfg.watch(),
                        gate=gate)
    results.update({key: str(status.get("status", Status.FAILED.value)) for key, status in outcomes.items()})
    return results


class LocalBackend(Backend):
    """launcher=local: the pool on this machine's GPU or CPU-core slots."""
    name = "local"
    schema = LocalLauncherConf
    gates_preflight = True

    def check_machine(self, conf: LocalLauncherConf) -> None:
        make_slots(conf, 1)    # device and core selections against this machine (nvidia-smi when GPUs are asked)

    def launch_settings(self, conf: LocalLauncherConf, plan) -> Launch:
        return launch_settings(conf, len(plan.runs), ranks=[plan.ranks_of(r.variant) for r in plan.runs])

    def launch(self, plan, conf: LocalLauncherConf, progress, gate=None) -> dict[str, str]:
        return launch(plan, conf, progress, gate)

    def preflight_place(self, conf: LocalLauncherConf, plan) -> tuple[dict, tuple[int, ...]]:
        """The full plan's first slot: its threads, cores, GPU and a run's environment (OMP_WAIT_POLICY=PASSIVE)."""
        if plan.launch.threads_per_run is not None:
            conf = dataclasses.replace(conf, threads_per_run=plan.launch.threads_per_run)
        slot = make_slots(conf, len(plan.runs), ranks=[plan.ranks_of(r.variant) for r in plan.runs])[0]
        return slot.child_env(os.environ, plan.launch.threads_per_run,
                              python_path(plan.task)), tuple(slot.cores)


def _warm(task) -> tuple:
    """WarmStarts' arguments: what a slot's launcher serves (an entry, a python command, or None) and preloads."""
    from sweeper.backends.local.warm import warm_target  # deferred: the warm starts load when runs launch

    target, preload = warm_target(task)
    return target, str(task.cwd), preload
