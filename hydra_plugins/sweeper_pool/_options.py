"""The plugin's options (`hydra.launcher.KEY`): every key of sweeper's `launcher=local` schema plus its own.

    option_keys()        # every hydra.launcher.KEY the plugin accepts (the launch checks them against the schema)
    Options()            # its own keys, with their defaults: the decision table's baseline, metric and direction

Options is the one place of the plugin's own defaults (hydra.launcher.metric: "objective", the name under which
a task function's return value is recorded); SweeperPoolLauncherConf, the node Hydra stores, takes them from it.
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any

from sweeper.backends.local.schema import PoolConf

TARGET = "hydra_plugins.sweeper_pool.sweeper_pool_launcher.SweeperPoolLauncher"


DEFAULTS = {"max_retries": 0,           # a retry restarts the job (a Hydra job has no checkpoint of ours)
            "crash_loop_after": 0}      # off


@dataclass(frozen=True)
class Options:
    """hydra.launcher.* keys of the plugin's own: what the decision table compares (_contract.split_params)."""
    baseline: str | None = None     # the variant the others are compared with (as Hydra writes its overrides)
    metric: str = "objective"       # the decision metric: "objective" is the task function's return value
    lower_is_better: bool = True    # the metric's direction
    seed_key: str = "seed"          # the config key swept as the seed (seed=0,1,2); the rest name the variant


N_JOBS = ("n_jobs", None)           # hydra-joblib-launcher's name for max_parallel (folded into it at launch)


def _default(f) -> Any:
    if f.name in DEFAULTS:
        return field(default=DEFAULTS[f.name])
    return field(default_factory=f.default_factory) if f.default is MISSING else field(default=f.default)


# PoolConf's keys and defaults (the local launcher's schema, the one definition), typed Any here and stored as
# an open node (_open_node): Hydra takes any key and value, and the launch checks the options against the schema
# before anything is written, so a bad one (unknown key, wrong type, out of range) is one line naming it
# (_contract.split_params, _core.pool_config) instead of Hydra's multi-line type or key error.
SweeperPoolLauncherConf = make_dataclass(
    "SweeperPoolLauncherConf",
    [("_target_", str, field(default=TARGET))] + [(f.name, Any, _default(f)) for f in fields(PoolConf)]
    + [(N_JOBS[0], Any, field(default=N_JOBS[1]))] + [(f.name, Any, field(default=f.default)) for f in fields(Options)])
# importable by its name (make_dataclass leaves the module `types` on Python < 3.12): a copy of Hydra's ConfigStore
# (hydra_restore_singletons, the pool's Singleton state) must find the very class, or the stored node comes back empty
SweeperPoolLauncherConf.__module__ = __name__


def option_keys() -> list[str]:
    """Every `hydra.launcher.KEY` the plugin accepts."""
    return [f.name for f in fields(SweeperPoolLauncherConf) if f.name != "_target_"]
