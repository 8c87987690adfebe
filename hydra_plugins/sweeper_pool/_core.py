"""SweeperPoolLauncher.launch: one pinned child process per Hydra job, run by sweeper's pool, each in a run dir.

The parent composes each job's sweep config (as Hydra's basic launcher does), writes the multirun's manifest
and each job's config and pending status (hydra_plugins.sweeper_pool._contract), pickles the job with the task
function (cloudpickle, like hydra-submitit-launcher) and runs `python -m hydra_plugins.sweeper_pool._worker JOB
RESULT` in a slot; the worker calls Hydra's run_job, records the outcome in the run dir and pickles the
JobReturn back. A job that dies without a result (killed, out of memory) comes back as a FAILED JobReturn naming
the cause and its log, its status completed here. A job whose run dir already finished with the same config is
not run again: its recorded JobReturn comes back.
"""
from __future__ import annotations

import logging
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals
from omegaconf import OmegaConf, open_dict

from hydra_plugins.sweeper_pool import _contract as contract
from sweeper.backends.failures import classify
from sweeper.backends.local.pool import Job, run_pool
from sweeper.backends.local.schema import LocalLauncherConf
from sweeper.backends.local.slots import make_slots
from sweeper.backends.progress import Progress
from sweeper.config.import_path import sweeper_entries
from sweeper.errors import UsageError
from sweeper.run.files.atomic import read_tail
from sweeper.run.files.manifest import read_manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import EXIT_INTERRUPTED, Status

log = logging.getLogger(__name__)
WORK = ".sweeper_pool"      # job and result pickles, under hydra.sweep.dir


def pool_config(params: dict):
    """The pool's options typed and checked by the local launcher's schema, errors naming hydra.launcher.KEY."""
    try:
        return LocalLauncherConf.from_dict({**params, "name": "local"}, prefix="hydra.launcher")
    except UsageError as e:
        raise contract.LaunchError(str(e)) from None


def load_return(path: Path) -> JobReturn | None:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        return None


class HydraJobAdapter:
    """Pool adapter: a job succeeded when its worker wrote a COMPLETED JobReturn; the run dir's status is the
    worker's, completed here when the worker could not (killed, stopped)."""

    def __init__(self, results: dict[str, Path], jobs: dict[str, contract.HydraJob]):
        self.results, self.jobs = results, jobs
        self.returns: dict[str, JobReturn] = {}

    def settle(self, job, returncode: int, interrupted: bool, attempt: int):
        rd = self.jobs[job.key].rundir
        ret = load_return(self.results[job.key])
        if ret is not None:
            self.returns[job.key] = ret
        try:
            recorded = rd.read_status()
        except UnreadableFile as e:
            recorded = None
            log.warning(f"sweeper_pool: {e}")
        if ret is not None and ret.status == JobStatus.COMPLETED and returncode == 0:
            return rd.update_status(attempts=attempt).to_dict(), None
        stopped = returncode == EXIT_INTERRUPTED and recorded is not None and recorded.status == Status.INTERRUPTED
        if interrupted:
            if stopped:       # the job's own sweeper.init() run saved a checkpoint and said so
                return rd.update_status(attempts=attempt).to_dict(), None
            return rd.update_status(Status.INTERRUPTED, error="stopped by Ctrl-C / SIGTERM before it finished; "
                                    "runs again when the multirun is launched again", exit_code=returncode,
                                    ended=time.time(), attempts=attempt).to_dict(), None
        error = recorded.error if recorded is not None and recorded.status in (Status.FAILED, Status.INTERRUPTED) \
            else None
        if ret is not None and ret.status == JobStatus.FAILED:
            error = _line(ret._return_value)
        failure = classify(returncode, error, read_tail(job.log_path))
        if job.rank_exit is not None:                      # one rank's exit ended the job: name it
            failure = job.rank_exit.failure(failure, job.log_path)
        status = rd.update_status(Status.INTERRUPTED if stopped else Status.FAILED, error=failure.message,
                                  exit_code=returncode, ended=time.time(), attempts=attempt, **failure.to_dict())
        return status.to_dict(), failure

    def not_started(self, job, reason: str) -> dict:
        return self.jobs[job.key].rundir.update_status(Status.PENDING, error=f"not started: {reason}").to_dict()


def _line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return text.splitlines()[0] if text else type(error).__name__


def _more_batches(config, n: int) -> bool:
    """True when Hydra's sweeper launches in batches and this one is full (another may follow)."""
    size = OmegaConf.select(config, "hydra.sweeper.max_batch_size", default=None)
    return isinstance(size, int) and size > 0 and n == size


def _failed_return(hjob: contract.HydraJob, sweep_config, label: str, log_path: Path, status: dict) -> JobReturn:
    task_cfg = OmegaConf.masked_copy(sweep_config, [k for k in sweep_config if k != "hydra"])
    return JobReturn(overrides=hjob.overrides, cfg=task_cfg, hydra_cfg=sweep_config, working_dir=str(hjob.rundir.path),
                     task_name=str(sweep_config.hydra.job.name), status=JobStatus.FAILED,
                     _return_value=RuntimeError(f"job {label}: {status.get('error') or 'no result'} (log: {log_path})"))


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    setup_globals()
    config, hydra_context = launcher.config, launcher.hydra_context
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    opts, pool_params = contract.split_params(launcher.params)
    cfg = pool_config(pool_params)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    work = sweep_dir / WORK
    hjobs, sweep_configs = [], {}
    task_hash = contract.task_identity(launcher.task_function)
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        HydraConfig.instance().set_config(sweep_config)
        job_dir = Path(str(sweep_config.hydra.sweep.dir)) / str(sweep_config.hydra.sweep.subdir)
        hjobs.append(contract.describe_job(idx, overrides, sweep_config, job_dir, sweep_dir, opts, task_hash))
        sweep_configs[str(idx)] = sweep_config
    HydraConfig.instance().set_config(config)
    try:
        earlier = read_manifest(sweep_dir) if initial_job_idx > 0 else None
    except UnreadableFile as e:
        raise contract.LaunchError(str(e)) from None
    contract.check_jobs(hjobs, opts, earlier, _more_batches(config, len(hjobs)))
    for hjob in hjobs:
        for warning in hjob.warnings:
            log.warning(f"sweeper_pool: {warning}")
    manifest = contract.write_sweep_manifest(sweep_dir, hjobs, opts, launcher, earlier)
    experiment = manifest.experiment.name

    progress = Progress(total=len(hjobs))
    jobs, returns, results, by_key = [], {}, {}, {}
    singleton_state = Singleton.get_state()
    pythonpath = os.pathsep.join(sweeper_entries([os.getcwd()]))   # nothing of our checkout: import_path
    for hjob in hjobs:
        key, sweep_config = str(hjob.idx), sweep_configs[str(hjob.idx)]
        job_file, result = work / f"job_{key}.pkl", work / f"job_{key}.result.pkl"
        job = Job(key=key, label=f"#{key} {hjob.shown}", group=hjob.variant,
                  argv=[sys.executable, "-m", "hydra_plugins.sweeper_pool._worker", str(job_file), str(result)],
                  log_path=hjob.rundir.log_path, marker=str(job_file), cwd=Path(os.getcwd()), run_dir=hjob.rundir.path,
                  ranks=cfg.ranks_per_run, pythonpath=pythonpath)
        summary = contract.finished(hjob)
        if summary is not None:
            ret = load_return(result)
            if ret is None or ret.status != JobStatus.COMPLETED or list(ret.overrides) != hjob.overrides:
                ret = contract.return_from_summary(hjob, summary, opts.metric, sweep_config)
            returns[key] = ret
            progress.skipped(job, summary.status)
            continue
        contract.prepare(hjob, experiment)
        _write_job(job_file, result, hydra_context, sweep_config, launcher.task_function, singleton_state, hjob,
                   experiment, opts.metric)
        jobs.append(job)
        results[key], by_key[key] = result, hjob
    if jobs:
        log.info(f"sweeper_pool: launching {len(jobs)} of {len(hjobs)} jobs; sweep output dir: {sweep_dir}")
        outcomes = _run(jobs, cfg, HydraJobAdapter(results, by_key), progress, returns)
        for job in jobs:
            if job.key not in returns:      # the worker died before writing a result
                returns[job.key] = _failed_return(by_key[job.key], sweep_configs[job.key], job.label, job.log_path,
                                                  outcomes.get(job.key, {}))
    else:
        log.info(f"sweeper_pool: all {len(hjobs)} jobs already finished; sweep output dir: {sweep_dir}")
        progress.close()
    return [returns[str(h.idx)] for h in hjobs]


def _run(jobs, cfg, adapter: HydraJobAdapter, progress, returns: dict) -> dict:
    try:
        slots = make_slots(cfg, len(jobs))
    except UsageError as e:
        raise contract.LaunchError(str(e).replace("launcher.", "hydra.launcher.")) from None
    log.info(f"sweeper_pool: {len(slots)} slot(s): {', '.join(s.name for s in slots)}")
    for job in jobs:
        log.info(f"\t{job.label}")
    outcomes = run_pool(jobs, slots, adapter, cfg.retry_policy(), progress, grace_s=float(cfg.grace_s),
                        max_parallel=cfg.max_parallel, watch=cfg.watch())
    returns.update(adapter.returns)
    return outcomes


def _write_job(job_file: Path, result: Path, hydra_context, sweep_config, task_function, singleton_state,
               hjob: contract.HydraJob, experiment: str, metric: str) -> None:
    import cloudpickle  # deferred: cloudpickle (at launch only), only when this runs

    job_file.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    run = {"run_dir": str(hjob.rundir.path), "run_id": hjob.run_id, "experiment": experiment,
           "variant": hjob.variant, "seed": hjob.seed, "config_hash": hjob.config_hash, "metric": metric}
    with open(job_file, "wb") as f:
        pickle.dump(list(sys.path), f)         # first: where the task function's modules are found
        cloudpickle.dump({"hydra_context": hydra_context, "config": sweep_config, "task_function": task_function,
                          "singleton_state": singleton_state, "run": run}, f)
