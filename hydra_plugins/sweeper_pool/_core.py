"""SweeperPoolLauncher.launch: one pinned child process per Hydra job, run by sweeper's pool.

The parent composes each job's sweep config (as Hydra's basic launcher does), pickles it with the task function
(cloudpickle, like hydra-submitit-launcher) and runs `python -m hydra_plugins.sweeper_pool._worker JOB RESULT` in
a slot; the worker calls Hydra's run_job and pickles the JobReturn back. A job that dies without a result
(killed, out of memory) comes back as a FAILED JobReturn naming the cause and its log.
"""
from __future__ import annotations

import logging
import os
import pickle
import sys
from pathlib import Path
from typing import Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from omegaconf import OmegaConf, open_dict

log = logging.getLogger(__name__)
WORK = ".sweeper_pool"      # job and result pickles, under hydra.sweep.dir


def pool_config(params: dict):
    from sweeper.errors import UsageError
    from sweeper.slots import LauncherConfig

    plain = {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in params.items()}
    try:
        return LauncherConfig.from_dict({"name": "local", **plain})
    except UsageError as e:
        raise ValueError(str(e).replace("launcher.", "hydra.launcher.")) from None


class HydraJobAdapter:
    """Pool adapter: a job succeeded when its worker wrote a COMPLETED JobReturn."""

    def __init__(self, results: dict[str, Path]):
        self.results = results
        self.returns: dict[str, JobReturn] = {}

    def _load(self, key: str) -> JobReturn | None:
        try:
            with open(self.results[key], "rb") as f:
                return pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            return None

    def settle(self, job, returncode: int, interrupted: bool, attempt: int):
        from sweeper.failures import classify, log_tail

        ret = self._load(job.key)
        if ret is not None:
            self.returns[job.key] = ret
        if ret is not None and ret.status == JobStatus.COMPLETED and returncode == 0:
            return {"status": "finished", "attempts": attempt}, None
        if interrupted:
            return {"status": "interrupted", "error": "stopped by Ctrl-C / SIGTERM", "attempts": attempt}, None
        error = f"{type(ret._return_value).__name__}: {ret._return_value}" if ret is not None else None
        failure = classify(returncode, error, log_tail(job.log_path))
        return {"status": "failed", "error": failure.message, "attempts": attempt, **failure.to_dict()}, failure

    def not_started(self, job, reason: str) -> dict:
        return {"status": "pending", "error": f"not started: {reason}"}


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    import cloudpickle

    from sweeper.pool import Job, run_pool
    from sweeper.progress import Progress
    from sweeper.slots import make_slots

    setup_globals()
    config, hydra_context = launcher.config, launcher.hydra_context
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    cfg = pool_config(launcher.params)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    work = sweep_dir / WORK
    work.mkdir(parents=True, exist_ok=True)
    slots = make_slots(cfg, len(job_overrides))
    log.info(f"sweeper_pool: launching {len(job_overrides)} jobs on {len(slots)} slot(s) "
             f"({', '.join(s.name for s in slots)}); sweep output dir: {sweep_dir}")
    singleton_state = Singleton.get_state()
    jobs, sweep_configs, results = [], {}, {}
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        HydraConfig.instance().set_config(sweep_config)
        job_dir = Path(str(sweep_config.hydra.sweep.dir)) / str(sweep_config.hydra.sweep.subdir)
        shown = " ".join(filter_overrides(overrides))
        log.info(f"\t#{idx} : {shown}")
        key, job_file, result = str(idx), work / f"job_{idx}.pkl", work / f"job_{idx}.result.pkl"
        result.unlink(missing_ok=True)
        with open(job_file, "wb") as f:
            pickle.dump(list(sys.path), f)         # first: where the task function's modules are found
            cloudpickle.dump({"hydra_context": hydra_context, "config": sweep_config,
                              "task_function": launcher.task_function, "singleton_state": singleton_state}, f)
        sweep_configs[key], results[key] = (sweep_config, list(overrides), job_dir), result
        jobs.append(Job(key=key, label=f"#{idx} {shown}", group="jobs",
                        argv=[sys.executable, "-m", "hydra_plugins.sweeper_pool._worker", str(job_file), str(result)],
                        log_path=job_dir / "stdout.log", marker=str(job_file), cwd=Path(os.getcwd())))
    HydraConfig.instance().set_config(config)
    adapter = HydraJobAdapter(results)
    progress = Progress(total=len(jobs))
    outcomes = run_pool(jobs, slots, adapter, cfg.retry_policy(), progress, grace_s=float(cfg.grace_s))
    returns = []
    for job in jobs:
        ret = adapter.returns.get(job.key)
        status = outcomes.get(job.key, {})
        if ret is None:      # the worker died before writing a result
            sweep_config, overrides, job_dir = sweep_configs[job.key]
            task_cfg = OmegaConf.masked_copy(sweep_config, [k for k in sweep_config if k != "hydra"])
            ret = JobReturn(overrides=overrides, cfg=task_cfg, hydra_cfg=sweep_config, working_dir=str(job_dir),
                            task_name=str(sweep_config.hydra.job.name), status=JobStatus.FAILED,
                            _return_value=RuntimeError(f"job {job.label}: {status.get('error') or 'no result'} "
                                                       f"(log: {job.log_path})"))
        returns.append(ret)
    return returns
