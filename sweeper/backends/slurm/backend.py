"""The Slurm backend: the planned runs as one submitit job array, one task per run, requeued on preemption.

    python -m sweeper +experiment=rope seeds=0-3 launcher=slurm launcher.partition=gpu launcher.timeout_min=240
    python -m sweeper +experiment=rope seeds=0-3 launcher=slurm launcher.wait=false   # submit and exit
    python -m sweeper.slurm status SWEEP_DIR     # job state per run (and fix statuses of jobs that died)
    python -m sweeper.slurm cancel SWEEP_DIR     # scancel every job of the sweep (runs checkpoint first)

Resources use the key names of hydra-submitit-launcher (partition, account, qos, timeout_min, mem_gb,
cpus_per_task, gpus_per_node, gres, additional_parameters, array_parallelism, signal_delay_s, setup, ...);
`job_name` is its `name` (here `name` selects the backend). Each task runs sweeper.backends.slurm.task.RunTask: the
run's task (plan.argv(run) in plan.task.cwd with plan.run_env(run)). Run statuses go through RunDir.
Job ids are recorded in SWEEP_DIR/slurm.json, so a later launch (the same command, or sweeper.resume) adopts
runs whose jobs are still queued or running instead of submitting them twice, and skips finished runs.

At scale (sweeper.backends.slurm.limits): a plan larger than the cluster's MaxArraySize goes in several arrays, all in
the one record; launcher.array_parallelism stays the sweep's limit, shared among its arrays; what the
controller's MaxJobCount cannot hold yet is submitted once earlier jobs leave the queue (wait=true) or by the
same command again (wait=false). A refused sbatch is one line naming Slurm's reason and the fix.

Runs of several ranks (sweeper.backends.slurm.ranks): one array task per run asks for every rank's resources
(cpus_per_task, GPUs, mem_gb are per rank) and starts the ranks itself; variants of different widths go in
different arrays, sharing launcher.array_parallelism.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import shutil
import subprocess
import time
from pathlib import Path

from sweeper.backends.base import Backend
from sweeper.backends.metric_check import MetricCheck
from sweeper.backends.progress import Progress
from sweeper.backends.slurm.jobs import ENDED, SlurmUnavailable, cancel, job_states, settle, sync_statuses
from sweeper.backends.slurm.limits import cluster_limits, jobs_in_controller, room, share, split_arrays
from sweeper.backends.slurm.ranks import for_ranks
from sweeper.backends.slurm.schema import SlurmLauncherConf
from sweeper.config.import_path import sweeper_entries
from sweeper.config.task import python_path
from sweeper.errors import UsageError
from sweeper.pasted import pasted
from sweeper.plan.slurm_record import RECORD, read_record, write_record
from sweeper.run.files.manifest import Launch
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import KEEP, Status


def sbatch_options(cfg: SlurmLauncherConf) -> dict:
    """The sbatch options of every task (what `sbatch --test-only` checks before anything is written)."""
    opts = {"partition": cfg.partition, "account": cfg.account, "qos": cfg.qos, "time": cfg.timeout_min,
            "cpus-per-task": cfg.cpus_per_task, "gpus-per-node": cfg.gpus_per_node or None, "gres": cfg.gres,
            "mem": f"{int(cfg.mem_gb * 1024)}M" if cfg.mem_gb else None, "cpus-per-gpu": cfg.cpus_per_gpu,
            "gpus-per-task": cfg.gpus_per_task, "mem-per-gpu": cfg.mem_per_gpu, "mem-per-cpu": cfg.mem_per_cpu,
            "constraint": cfg.constraint, "exclude": cfg.exclude}
    opts.update({str(k).replace("_", "-"): v for k, v in cfg.additional_parameters.items()})
    return {k: v for k, v in opts.items() if v is not None}


def probe_cluster(cfg: SlurmLauncherConf) -> None:
    """The options against the cluster (sbatch --test-only), before anything is written."""
    missing = [tool for tool in ("sbatch", "squeue", "srun") if shutil.which(tool) is None]
    if missing:
        raise UsageError(f"launcher=slurm: {', '.join(missing)} not found on PATH; run on a Slurm login node "
                         f"or use launcher=local")
    options = sbatch_options(for_ranks(cfg, cfg.ranks_per_run))
    flags = [f"--{k}" if v is True else f"--{k}={v}" for k, v in options.items()]
    test = subprocess.run(["sbatch", "--test-only", *flags, "--wrap=true"], capture_output=True, text=True,
                          timeout=60)
    if test.returncode != 0:
        why = " ".join(line.removeprefix("sbatch: error: ").strip() for line in test.stderr.splitlines()
                       if line.strip()) or f"exit status {test.returncode}"
        raise UsageError(f"launcher=slurm: Slurm refuses these job options ({' '.join(flags)}): {why}")


def make_executor(cfg: SlurmLauncherConf, folder: Path, job_name: str):
    """A submitit executor for the array, set up the way hydra-submitit-launcher sets up its own."""
    import submitit  # deferred: submitit (Slurm only), only when this runs

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=cfg.max_num_timeout)
    # The job's own python (submitit's) needs sweeper only: nothing when installed, else its link folder
    # (sweeper.config.import_path); never the checkout, whose train/ and kernels/ would shadow a user's.
    setup = [f"export PYTHONPATH={p}${{PYTHONPATH:+:$PYTHONPATH}}" for p in sweeper_entries([])] + list(cfg.setup or [])
    params = {"timeout_min": cfg.timeout_min, "cpus_per_task": cfg.cpus_per_task,
              "gpus_per_node": cfg.gpus_per_node or None, "mem_gb": cfg.mem_gb, "name": job_name,
              "stderr_to_stdout": cfg.stderr_to_stdout, "slurm_array_parallelism": cfg.array_parallelism,
              "slurm_signal_delay_s": cfg.signal_delay_s, "slurm_setup": setup,
              "slurm_additional_parameters": dict(cfg.additional_parameters)}
    for key in ("partition", "account", "qos", "gres", "cpus_per_gpu", "gpus_per_task", "mem_per_gpu",
                "mem_per_cpu", "constraint", "exclude", "comment"):
        params[f"slurm_{key}"] = getattr(cfg, key)
    executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return executor




# -- launch -------------------------------------------------------------------------------------------------

class _JobSlot:
    """What Progress prints for a run on Slurm (the local pool prints its GPU slot)."""

    def __init__(self, job_id: str, cpus: int | None):
        self.name, self.cores, self.threads = f"Slurm job {job_id}", (), cpus or 1


def launch(plan, launcher_cfg: SlurmLauncherConf | dict, progress=None) -> dict[str, str] | None:
    """Submit every run that is not finished, diverged or still queued; wait unless launcher.wait=false.

    Returns run_id -> final status (None after submitting with wait=false)."""
    cfg = launcher_cfg if isinstance(launcher_cfg, SlurmLauncherConf) else SlurmLauncherConf.from_dict(launcher_cfg)
    metric = getattr(getattr(plan, "experiment", None), "metric", None)
    progress = progress or Progress(total=len(plan.runs), metric=metric)
    sweep_dir = Path(plan.sweep_dir)
    try:
        known = sync_statuses(sweep_dir)
    except SlurmUnavailable as e:
        raise SlurmUnavailable(f"{e}; cannot tell which runs of {sweep_dir} are still queued, so nothing was "
                               f"submitted: run again when Slurm answers") from None
    except UnreadableFile as e:
        raise UsageError(str(e)) from None
    recorded = read_record(sweep_dir).get("jobs", {})
    results, adopted, todo = {}, {}, []
    for run in plan.runs:
        status, state = known.get(run.run_id, (None, None))
        status = str(status or run.rundir.outcome())
        if status in KEEP:
            progress.skipped(run, status)
            results[run.run_id] = status
        elif state is not None and state not in ENDED:
            adopted[run.run_id] = recorded[run.run_id]["job_id"]
            progress.log(f"adopt  {run.label}: Slurm job {adopted[run.run_id]} is {state}")
        else:
            todo.append(run)
    jobs, todo = _submit_what_fits(plan, todo, cfg, progress)
    if not cfg.wait:
        if jobs or adopted:
            progress.log(f"not waiting (launcher.wait=false): follow with "
                         f"`{pasted('python', '-m', 'sweeper.slurm', 'status', sweep_dir)}`, "
                         f"report with `{pasted('python', '-m', 'sweeper.report', sweep_dir)}`")
        if todo:
            progress.log(f"{len(todo)} run(s) not submitted yet (the cluster's MaxJobCount is reached): run the "
                         f"same command again once jobs have left the queue; it submits only those")
        return None
    metrics = MetricCheck(plan.experiment)     # fail fast: the first finished run without the decision metric
    try:
        pending = {**adopted, **jobs}
        while pending or todo:       # todo: runs the controller had no room for yet (MaxJobCount)
            results.update(_wait(plan, pending, cfg, progress, metrics, until_room=bool(todo)))
            pending = {r: j for r, j in pending.items() if r not in results}
            if todo and not pending:
                _await_room(cfg, progress)
            more, todo = _submit_what_fits(plan, todo, cfg, progress, quiet=True)
            pending.update(more)
    except KeyboardInterrupt:
        progress.log(f"stopped waiting; the jobs keep running on Slurm. Cancel them with `python -m "
                     f"sweeper.slurm cancel {sweep_dir}`")
        raise
    return results


def _submit_what_fits(plan, todo: list, cfg: SlurmLauncherConf, progress, quiet: bool = False
                      ) -> tuple[dict[str, str], list]:
    """Submit as many of `todo` as the cluster holds now, in arrays that fit it, each recorded as soon as sbatch
    accepts it; (run_id -> job id of what was submitted, the runs left for later). Runs of different ranks per
    run go in different arrays (their resources differ), sharing launcher.array_parallelism."""
    widths: dict[int, list] = {}
    for run in todo:
        widths.setdefault(plan.ranks_of(run.variant), []).append(run)
    if len(widths) <= 1:
        return _submit_width(plan, todo, cfg, next(iter(widths), 1), progress, quiet)
    jobs, left = {}, []
    for (ranks, runs), at_once in zip(widths.items(), share(cfg.array_parallelism, [len(r) for r in widths.values()])):
        got, rest = _submit_width(plan, runs, dataclasses.replace(cfg, array_parallelism=at_once), ranks, progress,
                                  quiet)
        jobs.update(got)
        left += rest
    return jobs, left


def _submit_width(plan, todo: list, cfg: SlurmLauncherConf, ranks: int, progress, quiet: bool = False
                  ) -> tuple[dict[str, str], list]:
    """_submit_what_fits for runs of `ranks` ranks each."""
    if not todo:
        return {}, []
    limits, held = cluster_limits(), jobs_in_controller()
    sizes, throttles = split_arrays(len(todo), limits, held, cfg.array_parallelism)
    if not sizes:
        if not quiet:
            progress.log(f"no room in the Slurm queue: it holds {held} job(s) ({limits.describe()}); "
                         f"{len(todo)} run(s) wait")
        return {}, todo
    sweep_dir = Path(plan.sweep_dir)
    folder = Path(cfg.submitit_folder) if cfg.submitit_folder else sweep_dir / ".submitit" / "%j"
    job_name = cfg.job_name or f"sweeper-{plan.experiment.name}"

    from sweeper.backends.slurm.task import RunTask  # deferred: it subclasses submitit's, imported only to submit

    pythonpath = python_path(plan.task)
    jobs, start, parts = {}, 0, []
    for size, throttle in zip(sizes, throttles):
        runs = todo[start:start + size]
        executor = make_executor(for_ranks(dataclasses.replace(cfg, array_parallelism=throttle), ranks), folder,
                                 job_name)
        try:
            with _sbatch_quiet(), executor.batch():
                submitted = [executor.submit(RunTask(str(run.run_dir), plan.argv(run), plan.task.cwd,
                                                     plan.run_env(run), pythonpath, cfg.use_gpus, cfg.stop_grace_s,
                                                     cfg.max_retries, cfg.retry_backoff_s, ranks,
                                                     int(cfg.max_log_mb * 2 ** 20) if cfg.max_log_mb else None))
                             for run in runs]
        except Exception as e:   # sbatch refused (submitit raises its stderr): one line, nothing guessed
            done = f"; {start} run(s) were submitted before it and are recorded in {sweep_dir / RECORD}" if start \
                else "; nothing was submitted"
            raise UsageError(f"launcher=slurm: sbatch refused an array of {len(runs)} run(s): "
                             f"{sbatch_refusal(e)}{done}. {refusal_fix(sbatch_refusal(e), limits)}") from None
        write_record(sweep_dir, runs, submitted, cfg, folder, throttle)
        jobs.update({run.run_id: job.job_id for run, job in zip(runs, submitted)})
        parts.append(_what_was_submitted(submitted, throttle))
        start += size
    progress.log(f"submitted {'; '.join(parts)}; job ids in {sweep_dir / RECORD}")
    if start < len(todo):
        progress.log(f"{len(todo) - start} more run(s) wait for room in the Slurm queue ({limits.describe()})")
    return jobs, todo[start:]


@contextlib.contextmanager
def _sbatch_quiet():
    """submitit prints a refused sbatch's stderr and logs the dropped batch; the error line says it once."""
    log = logging.getLogger("submitit")
    before, log.disabled = log.disabled, True
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        log.disabled = before


def _room_now() -> int:
    return room(cluster_limits(), jobs_in_controller())


def _await_room(cfg: SlurmLauncherConf, progress) -> None:
    """Sleep until the controller can take a job again (ended jobs leave it after MinJobAge)."""
    if _room_now() > 0:
        return
    progress.log("waiting for room in the Slurm queue (MaxJobCount reached; ended jobs leave it after MinJobAge)")
    while _room_now() == 0:
        time.sleep(cfg.poll_s)


def sbatch_refusal(error: BaseException) -> str:
    """Slurm's own reason from a failed sbatch (submitit's error text holds its stderr), on one line."""
    lines = [line.strip().removeprefix("sbatch: error: ") for line in str(error).splitlines()]
    said = [line for line in lines if line and not line.startswith(("Command", "Error", "stdout", "stderr"))]
    errors = [line for line in said if "error" in line.lower() or "invalid" in line.lower() or "fail" in line.lower()]
    return " ".join(errors or said or [type(error).__name__]).replace("sbatch: ", "")


def refusal_fix(reason: str, limits) -> str:
    """What to do about a refused submission (the line ends with it)."""
    low = reason.lower()
    if "array" in low:
        return (f"The cluster's limits are {limits.describe()}; ask its admin about MaxArraySize, or sweep fewer "
                f"seeds at once (seeds=A-B, then sweeper.extend=true)")
    if "job limit" in low or "maxjobcount" in low or "qos" in low or "maxsubmit" in low:
        return ("Wait for jobs to leave the queue (squeue -u $USER) and run the same command again: finished and "
                "queued runs are kept")
    return "Fix the job options (launcher.*) or the cluster, then run the same command again: submitted runs are kept"


def _what_was_submitted(jobs: list, at_once: SlurmLauncherConf | int) -> str:
    """'1 run as Slurm job 12' or '4 runs as Slurm job array 13 (at most 256 at once)': what one sbatch made."""
    at_once = at_once.array_parallelism if isinstance(at_once, SlurmLauncherConf) else at_once
    arrays = sorted({j.job_id.split("_")[0] for j in jobs if "_" in j.job_id})
    plain = [j.job_id for j in jobs if "_" not in j.job_id]
    parts = [f"Slurm job array {a} (at most {at_once} at once)" for a in arrays]
    parts += [f"Slurm job{'s' if len(plain) > 1 else ''} {', '.join(plain)}"] if plain else []
    return f"{len(jobs)} run{'s' if len(jobs) != 1 else ''} as {' and '.join(parts)}"


def _wait(plan, pending: dict[str, str], cfg: SlurmLauncherConf, progress, metrics: MetricCheck,
          until_room: bool = False) -> dict[str, str]:
    """Poll until every job has ended (or, with until_room, until the controller has room for more jobs after one
    of these ended); report starts and ends as they happen. A finished run without the decision metric (or with
    a non-number) stops the sweep: its result is set aside, every live job of the sweep is cancelled (its run
    checkpoints and ends interrupted), and UsageError names the metric (exit 2); the corrected command continues."""
    by_id = {run.run_id: run for run in plan.runs}
    pending = dict(pending)
    started: dict[str, float] = {}
    results = {}
    outage = False
    while pending:
        try:
            states = job_states(set(pending.values()))
        except SlurmUnavailable as e:
            if not outage:
                progress.log(f"WARNING {e}; still waiting (the jobs are not affected)")
            outage = True
            time.sleep(cfg.poll_s)
            continue
        outage = False
        for run_id, job_id in list(pending.items()):
            run, state = by_id[run_id], states[job_id]
            if state == "RUNNING" and run_id not in started:
                started[run_id] = time.monotonic()
                progress.started(run, _JobSlot(job_id, cfg.cpus_per_task))
            if state not in ENDED:
                continue
            status = settle(run.run_dir, job_id, state)
            del pending[run_id]
            if status["status"] == Status.FINISHED.value:
                _check_metric(plan, run, metrics, progress)
            results[run_id] = status["status"]
            progress.ended(run, status, time.monotonic() - started.get(run_id, time.monotonic()))
        running = [(by_id[r], _JobSlot(j, cfg.cpus_per_task)) for r, j in pending.items() if r in started]
        progress.tick(running)
        if until_room and results and _room_now() > 0:
            return results
        if pending:
            time.sleep(cfg.poll_s)
    return results


def _check_metric(plan, run, metrics: MetricCheck, progress) -> None:
    """The fail-fast rule every backend applies (MetricCheck.settle); here a stop also cancels the sweep's live
    jobs (their runs checkpoint and resume) before UsageError ends the sweep."""
    problem = metrics.settle(run.run_dir, run.label, progress.log)
    if not problem:
        return
    try:
        stopped = cancel(Path(plan.sweep_dir))
    except (SlurmUnavailable, OSError, subprocess.SubprocessError) as e:
        stopped, problem = [], f"{problem} (the sweep's other jobs could not be cancelled: {e}; `python -m " \
                               f"sweeper.slurm cancel {plan.sweep_dir}` does it)"
    progress.log(f"stopping the sweep: {run.label} finished without a usable decision metric; cancelled "
                 f"{len(stopped)} Slurm job(s) (their runs checkpoint and resume on the next launch)")
    progress.close()
    raise UsageError(problem)


class SlurmBackend(Backend):
    """launcher=slurm: one submitit job array per plan (or several, at the cluster's limits)."""
    name = "slurm"
    schema = SlurmLauncherConf

    def probe(self, conf: SlurmLauncherConf) -> None:
        probe_cluster(conf)

    def launch_settings(self, conf: SlurmLauncherConf, plan) -> Launch:
        return Launch(threads_per_run=conf.cpus_per_task)

    def waits(self, conf: SlurmLauncherConf) -> bool:
        return conf.wait

    def launch(self, plan, conf: SlurmLauncherConf, progress) -> dict[str, str] | None:
        return launch(plan, conf, progress)
