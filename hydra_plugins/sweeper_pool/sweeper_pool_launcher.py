"""The `hydra/launcher=sweeper_pool` config and Launcher class (light: Hydra scans this module at startup).

    python my_app.py -m seed=0,1,2 lr=0.01,0.001 hydra/launcher=sweeper_pool 'hydra.launcher.baseline="lr=0.01"'
    python -m sweeper.report multirun/2024-05-01/12-00-00        # the decision table of that multirun

Pool options (`hydra.launcher.KEY=VALUE`): every key of sweeper's `launcher=local`
(sweeper.backends.local.schema.PoolConf:
devices, runs_per_device, ranks_per_run, cpu_only, max_parallel, threads_per_run, cores, max_retries,
retry_backoff_s, crash_loop_after, grace_s; the same types, ranges and comments; ranks_per_run=N runs each job
as N data-parallel ranks with torchrun's environment, the task function joining the process group itself), with two
defaults of its own (max_retries: 0,
a retry restarts the job; crash_loop_after: 0, off) and
    n_jobs: null           hydra-joblib-launcher's name for max_parallel (-1: no cap); give one of the two
Decision-table options (recorded in the sweep dir's manifest for `python -m sweeper.report`):
    baseline: null         the variant the others are compared with, by name: a job's overrides without the
                           seed, joined by a space ("lr=0.01", "lr=0.01 wd=0"; "default" when only the seed
                           varies), quoted for Hydra as above. null: the report asks for one (`--baseline`)
    metric: objective      the metric decided on: a job returning a number records it under this name; a job
                           returning a mapping of numbers, or calling sweeper.init() + run.finish(), names its own
    lower_is_better: true  the metric's direction
    seed_key: seed         the override that is the seed (its values are a variant's seeds)
A bad option is one line naming it (`hydra.launcher.max_parallel=0: must be a positive integer or null`).
Each job's output dir is a sweeper run dir: config.yaml (the job's config), its status, its summary (the
return value or finish() metrics) and stdout.log (the job's stdout and stderr). Running the same multirun again
(same hydra.sweep.dir) skips the jobs that already finished with the same config and returns their results.
"""

from typing import Any, Sequence

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher
from omegaconf import OmegaConf

from hydra_plugins.sweeper_pool._options import SweeperPoolLauncherConf


def _open_node():
    """The options as a config node that takes any key (not struct): an unknown `hydra.launcher.KEY` reaches the
    launch, where the schema names it and the accepted keys in one line (Hydra's own refusal is several lines)."""
    node = OmegaConf.structured(SweeperPoolLauncherConf)
    OmegaConf.set_struct(node, False)
    return node


ConfigStore.instance().store(group="hydra/launcher", name="sweeper_pool", node=_open_node(), provider="sweeper")


class SweeperPoolLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config = None
        self.hydra_context = None
        self.task_function = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
        from hydra_plugins.sweeper_pool._core import launch  # deferred: Hydra's plugin scan imports this module
        #   in every Hydra app; cloudpickle and the pool load only when a multirun launches

        return launch(self, job_overrides, initial_job_idx)
