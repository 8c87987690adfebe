"""The plugin's options (`hydra.launcher.KEY`): every key of sweeper's `launcher=local` schema plus its own.

    option_keys()        # every hydra.launcher.KEY the plugin accepts (the launch checks them against the schema)
"""
from __future__ import annotations

from dataclasses import MISSING, field, fields, make_dataclass
from typing import Any

from sweeper.backends.local.schema import PoolConf

TARGET = "hydra_plugins.sweeper_pool.sweeper_pool_launcher.SweeperPoolLauncher"


DEFAULTS = {"max_retries": 0,           # a retry restarts the job (a Hydra job has no checkpoint of ours)
            "crash_loop_after": 0}      # off


OWN = {"n_jobs": None, "baseline": None, "metric": "objective", "lower_is_better": True, "seed_key": "seed"}


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
    + [(k, Any, field(default=v)) for k, v in OWN.items()])
# importable by its name (make_dataclass leaves the module `types` on Python < 3.12): a copy of Hydra's ConfigStore
# (hydra_restore_singletons, the pool's Singleton state) must find the very class, or the stored node comes back empty
SweeperPoolLauncherConf.__module__ = __name__


def option_keys() -> list[str]:
    """Every `hydra.launcher.KEY` the plugin accepts."""
    return [f.name for f in fields(SweeperPoolLauncherConf) if f.name != "_target_"]
