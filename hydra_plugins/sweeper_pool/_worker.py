"""`python -m hydra_plugins.sweeper_pool._worker JOB_PKL RESULT_PKL`: run one Hydra job in this process.

JOB_PKL holds the parent's sys.path (pickle), then the job (cloudpickle): hydra context, sweep config, task
function, singleton state. The JobReturn is written to RESULT_PKL atomically. Exit 0 when the task completed,
1 when it raised (the traceback is printed to this job's log first).
"""
from __future__ import annotations

import pickle
import sys
import traceback


def main(job_file: str, result_file: str) -> int:
    with open(job_file, "rb") as f:
        for path in reversed(pickle.load(f)):
            if path not in sys.path:
                sys.path.insert(1, path)
        job = pickle.load(f)
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals

    setup_globals()
    Singleton.set_state(job["singleton_state"])
    HydraConfig.instance().set_config(job["config"])
    ret = run_job(hydra_context=job["hydra_context"], task_function=job["task_function"], config=job["config"],
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    if ret.status != JobStatus.COMPLETED:
        err = ret._return_value
        traceback.print_exception(type(err), err, err.__traceback__)
    import cloudpickle

    from train.atomic import atomic_write_bytes

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
