"""`python -m hydra_plugins.sweeper_pool._worker JOB_PKL RESULT_PKL`: run one Hydra job in this process.

JOB_PKL holds the parent's sys.path (pickle), then the job (cloudpickle): hydra context, sweep config, task
function, singleton state, and the job's run (run dir, run id, experiment, variant, seed, config hash, metric).
SWEEPER_RUN_DIR is the job's output dir, so the task may call sweeper.init() itself; the run's status is
marked running, then, after Hydra's run_job:
    the task ended its run itself (sweeper.init() + run.finish()/diverged()/...)  its record stands
    the job completed                  its summary's final metrics are the return value: a number -> {metric:
                                       value}, a mapping of numbers -> itself; anything else: finished with no
                                       final metric and a warning
    the job raised                     status failed with the exception's line (traceback in the job's log)
The JobReturn is written to RESULT_PKL atomically. Exit 0 when the task completed, 1 when it raised.
With hydra.launcher.ranks_per_run=N every rank of the job runs this (torchrun's RANK, WORLD_SIZE, MASTER_PORT
set by the pool: the task function joins its process group itself); rank 0 alone writes the status, the
summary and the result, a rank r > 0 its env.rank<r>.json.
"""
from __future__ import annotations

import os
import pickle
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

from sweeper.run import RUN_DIR_ENV
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from sweeper.run.observed.envinfo import environment_record


def _number(value: Any) -> float | int | None:
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        value = value.item()      # numpy scalars, 0-d tensors
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def final_metrics(value: Any, metric: str) -> tuple[dict, str | None]:
    """The summary's final metrics for a job's return value, and a warning when it holds none."""
    number = _number(value)
    if number is not None:
        return {metric: number}, None
    if isinstance(value, Mapping) and value:
        final = {str(k): _number(v) for k, v in value.items()}
        if all(v is not None for v in final.values()):
            return final, None
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return {}, (f"the job returned {shown}, not a number or a mapping of numbers: recorded as finished with no "
                f"final {metric!r}; return the metric's value (or call sweeper.init() and run.finish(...))")


def record_outcome(run: dict, ret, started: float, env: dict) -> None:
    from hydra.core.utils import JobStatus  # deferred: hydra (0.2 s), only when this runs

    rd = RunDir(run["run_dir"])
    try:
        record = rd.read_status()
    except UnreadableFile:
        record = None
    if ret.status != JobStatus.COMPLETED:
        err = ret._return_value
        line = f"{type(err).__name__}: {err}".strip().splitlines()[0]
        rd.update_status(Status.FAILED, error=line, exit_code=1, ended=time.time())
        return
    if record is not None and record.status != Status.RUNNING:      # the task's own run ended it
        return
    final, warning = final_metrics(ret.return_value, run["metric"])
    if warning:
        print(f"WARNING: {warning}", flush=True)
    rd.write_summary(Summary(status=Status.FINISHED, final=final, wall_time_s=time.time() - started,
                             run_id=run["run_id"], experiment=run["experiment"], variant=run["variant"],
                             seed=run["seed"], config_hash=run["config_hash"], env=env))
    warnings = (record.warnings if record is not None else []) + ([warning] if warning else [])
    rd.update_status(Status.FINISHED, error=None, exit_code=0, ended=time.time(), warnings=warnings)


def main(job_file: str, result_file: str) -> int:
    with open(job_file, "rb") as f:
        for path in reversed(pickle.load(f)):
            if path not in sys.path:
                sys.path.insert(1, path)
        job = pickle.load(f)
    from hydra.core.hydra_config import HydraConfig  # deferred: hydra (0.2 s), only when this runs
    from hydra.core.singleton import Singleton  # deferred: hydra (0.2 s), only when this runs
    from hydra.core.utils import JobStatus, run_job, setup_globals  # deferred: hydra (0.2 s), only when this runs

    run = job["run"]
    rd, started = RunDir(run["run_dir"]), time.time()
    os.environ[RUN_DIR_ENV] = str(rd.path)
    rank = int(os.environ.get("RANK") or 0)
    if rank == 0:
        rd.update_status(Status.RUNNING, started=started, ended=None, error=None, exit_code=None, pid=os.getpid())
    env = environment_record()
    rd.write_env(env, rank=rank)
    setup_globals()
    Singleton.set_state(job["singleton_state"])
    HydraConfig.instance().set_config(job["config"])
    ret = run_job(hydra_context=job["hydra_context"], task_function=job["task_function"], config=job["config"],
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    if ret.status != JobStatus.COMPLETED:
        err = ret._return_value
        traceback.print_exception(type(err), err, err.__traceback__)
    if rank:                                  # rank 0 records the job's outcome and result
        sys.stdout.flush()
        return 0 if ret.status == JobStatus.COMPLETED else 1
    record_outcome(run, ret, started, env)
    import cloudpickle  # deferred: cloudpickle (at launch only), only when this runs

    from sweeper.run.files.atomic import atomic_write_bytes

    try:
        data = cloudpickle.dumps(ret)
    except Exception as e:   # an unpicklable return value: keep the status, say why the value is missing
        ret._return_value = RuntimeError(f"the job's return value could not be pickled: {e}")
        data = cloudpickle.dumps(ret)
    atomic_write_bytes(result_file, data)
    sys.stdout.flush()
    return 0 if ret.status == JobStatus.COMPLETED else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m hydra_plugins.sweeper_pool._worker JOB_PKL RESULT_PKL", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
