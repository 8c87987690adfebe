"""The `hydra/launcher=sweeper_pool` config and Launcher class (light: Hydra scans this module at startup).

    python my_app.py -m seed=0,1,2 lr=0.01,0.001 hydra/launcher=sweeper_pool 'hydra.launcher.baseline="lr=0.01"'
    python -m sweeper.report multirun/2024-05-01/12-00-00        # the decision table of that multirun

Pool options (`hydra.launcher.KEY=VALUE`), as sweeper's `launcher=local`:
    devices: null          GPU ids, e.g. [0,2]; null = every visible GPU (CUDA_VISIBLE_DEVICES honoured)
    runs_per_device: 1     jobs sharing one GPU
    cpu_only: false        ignore GPUs: CPU-core slots
    max_parallel: null     cap on concurrent jobs
    n_jobs: null           hydra-joblib-launcher's name for max_parallel (-1: no cap); give one of the two
    threads_per_run: null  threads per job; null = the cores split evenly
    cores: null            CPU core ids to use; null = this process's affinity set
    max_retries: 0         retries after a transient failure (killed by a signal, CUDA OOM); a retry restarts the job
    retry_backoff_s: 5.0   delay before the first retry, doubled each time
    crash_loop_after: 0    stop starting jobs once this many failed with the same error (0 = off)
    grace_s: 20.0          Ctrl-C: seconds from SIGTERM to SIGKILL of the jobs' process groups
Decision-table options (recorded in the sweep dir's manifest for `python -m sweeper.report`):
    baseline: null         the variant the others are compared with, by name: a job's overrides without the
                           seed, joined by a space ("lr=0.01", "lr=0.01 wd=0"; "default" when only the seed
                           varies), quoted for Hydra as above. null: the report asks for one (`--baseline`)
    metric: objective      the metric decided on: a job returning a number records it under this name; a job
                           returning a mapping of numbers, or calling sweeper.init() + run.finish(), names its own
    lower_is_better: true  the metric's direction
    seed_key: seed         the override that is the seed (its values are a variant's seeds)
Each job's output dir is a sweeper run dir: config.yaml (the job's config), its status, its summary (the
return value or finish() metrics) and stdout.log (the job's stdout and stderr). Running the same multirun again
(same hydra.sweep.dir) skips the jobs that already finished with the same config and returns their results.
"""

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher


@dataclass
class SweeperPoolLauncherConf:
    _target_: str = "hydra_plugins.sweeper_pool.sweeper_pool_launcher.SweeperPoolLauncher"
    devices: Optional[List[Any]] = None
    runs_per_device: int = 1
    cpu_only: bool = False
    max_parallel: Optional[int] = None
    n_jobs: Optional[int] = None
    threads_per_run: Optional[int] = None
    cores: Optional[List[int]] = field(default=None)
    max_retries: int = 0
    retry_backoff_s: float = 5.0
    crash_loop_after: int = 0
    grace_s: float = 20.0
    baseline: Optional[str] = None
    metric: str = "objective"
    lower_is_better: bool = True
    seed_key: str = "seed"


ConfigStore.instance().store(group="hydra/launcher", name="sweeper_pool", node=SweeperPoolLauncherConf,
                             provider="sweeper")


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
        from hydra_plugins.sweeper_pool._core import launch   # lazy: sweeper, cloudpickle, the pool

        return launch(self, job_overrides, initial_job_idx)
