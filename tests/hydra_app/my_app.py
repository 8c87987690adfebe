"""A small plain-Hydra app for tests/test_hydra_plugin.py: records what each job saw, fails for seed 3.

    python my_app.py -m seed=0,1,2 hydra/launcher=sweeper_pool
    python my_app.py --returns seed=0,1,2 hydra/launcher=sweeper_pool   # multirun, print the jobs' return values
"""
import json
import os
import sys

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

ConfigStore.instance().store(name="config", node={"seed": 0, "fail_on": 3, "sleep": 0.0})


def record(cfg: DictConfig) -> int:
    import time

    out = {"seed": cfg.seed, "pid": os.getpid(), "ppid": os.getppid(),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "affinity": sorted(os.sched_getaffinity(0)),
           "started": time.time()}
    time.sleep(cfg.sleep)
    out["ended"] = time.time()
    with open(os.path.join(HydraConfig.get().runtime.output_dir, "job.json"), "w") as f:
        json.dump(out, f)
    print(f"job for seed {cfg.seed} ran in pid {os.getpid()}")
    if cfg.seed == cfg.fail_on:
        raise ValueError(f"seed {cfg.seed} is cursed")
    return cfg.seed * 10


main = hydra.main(config_path=None, config_name="config", version_base=None)(record)


def multirun_returns(overrides: list[str]) -> list:
    """Hydra's own multirun (as `-m` does), returning the JobReturns of the first batch."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import detect_task_name
    from hydra.core.global_hydra import GlobalHydra

    hydra_app = Hydra.create_main_hydra_file_or_module(calling_file=__file__, calling_module=None,
                                                       config_path=None, job_name=detect_task_name(__file__, None))
    try:
        return hydra_app.multirun(config_name="config", task_function=record, overrides=overrides)[0]
    finally:
        GlobalHydra.instance().clear()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--returns"]:
        returns = multirun_returns(sys.argv[2:])
        print("RETURNS " + json.dumps([r.return_value for r in returns]))
    else:
        main()
