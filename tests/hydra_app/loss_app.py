"""A plain Hydra app whose loss depends on lr and seed, for the decision-table tests of tests/test_hydra_plugin.py.

    python loss_app.py -m seed=0,1,2 lr=0.01,0.1 hydra/launcher=sweeper_pool 'hydra.launcher.baseline="lr=0.01"'
    python loss_app.py -m seed=0,1,2 lr=0.01,0.1 use_run=true ...   # sweeper.init() + run.finish(val_loss=...)
    python loss_app.py --returns seed=0,1 hydra/launcher=sweeper_pool   # multirun, print the jobs' return values
    python loss_app.py -m seed=0 die=true hydra/launcher=sweeper_pool    # the job kills itself (SIGKILL)

Each job writes job.json (its pid and start time) in its output dir, so a test can tell whether it ran.
"""
import json
import math
import os
import signal
import sys
import time

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


def register_config() -> None:
    """The app's primary config, stored when the app runs (not on import: tests import `loss` from here, and a
    stored "config" would leak into every other composition in that test process)."""
    ConfigStore.instance().store(name="config", node={"seed": 0, "lr": 0.01, "use_run": False, "die": False})


def loss(lr: float, seed: int) -> float:
    """Lowest at lr=0.01; the seed adds a deterministic, lr-dependent wobble of up to 0.1."""
    wobble = ((seed * 37 + round(-math.log10(lr)) * 11) % 7) / 70
    return round(abs(math.log10(lr) + 2.0) + wobble, 6)


def train(cfg: DictConfig):
    with open(os.path.join(HydraConfig.get().runtime.output_dir, "job.json"), "w") as f:
        json.dump({"pid": os.getpid(), "started": time.time(), "run_dir": os.environ.get("SWEEPER_RUN_DIR")}, f)
    if cfg.die:                       # as the OOM killer would: no result, no status written by the job
        os.kill(os.getpid(), signal.SIGKILL)
    value = loss(cfg.lr, cfg.seed)
    if not cfg.use_run:
        return value
    import sweeper

    run = sweeper.init()
    assert run.seed == cfg.seed and run.config.lr == cfg.lr, (run.seed, run.config)
    run.log(0, train_loss=2 * value)
    run.finish(val_loss=value, steps=1)
    return "not a number: the run's finish() metrics stand"


def main() -> None:
    """`python loss_app.py ...`: hydra.main, decorated here and not on import (the decorator sets Hydra's
    process-wide version base, which would change every later Hydra run in a test process importing `loss`)."""
    register_config()
    hydra.main(config_path=None, config_name="config", version_base=None)(train)()


def multirun_returns(overrides: list[str]) -> list:
    """Hydra's own multirun (as `-m` does), returning the JobReturns of the first batch."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import detect_task_name
    from hydra.core.global_hydra import GlobalHydra

    hydra_app = Hydra.create_main_hydra_file_or_module(calling_file=__file__, calling_module=None,
                                                       config_path=None, job_name=detect_task_name(__file__, None))
    try:
        return hydra_app.multirun(config_name="config", task_function=train, overrides=overrides)[0]
    finally:
        GlobalHydra.instance().clear()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--returns"]:
        register_config()
        returns = multirun_returns(sys.argv[2:])
        print("RETURNS " + json.dumps([[r.overrides, r.return_value] for r in returns]))
    else:
        main()
