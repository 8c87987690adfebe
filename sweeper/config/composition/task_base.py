"""A script's own YAML as the base of the experiment: `task.config_file: configs/train.yaml`.

    overrides = with_task_base(overrides, compose_raw)   # + `+task_config=base_<hash>` before +experiment=
    cfg = compose_raw(overrides)                          # the YAML's keys, then the experiment's, then overrides

The file's top-level keys enter the composition first (a config of the group `task_config`, at the global
package, registered in Hydra's ConfigStore): the experiment's keys, the command line's and each variant's
overrides apply on top of it, exactly as on the file's own keys (`lr=0.1`, `model.width=64`). Which file: the
`task.config_file` of the task block that the experiment and the command line's task overrides compose to
(relative to task.cwd, default the current directory). Each run then gets its own merged copy
(sweeper.config.task: `{config_file}` in the command).
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, Callable

import yaml
from hydra.core.config_store import ConfigStore

from sweeper.config.composition.argv import key_of
from sweeper.config.composition.search import experiment_file, search_dirs
from sweeper.config.composition.yaml_bounds import check_yaml
from sweeper.errors import UsageError

GROUP = "task_config"
RESERVED_KEYS = ("sweeper", "launcher", "seeds", "experiment", "task", "hydra")   # run_config.RESERVED
_TASKS: dict[tuple, Any] = {}     # the task block per selecting overrides, cwd and experiment file version


def _selecting(overrides: list[str]) -> list[str]:
    """The overrides that decide the task block: the search path, the experiment, task.* and task=..."""
    return [o for o in overrides if key_of(o) in ("hydra.searchpath", "experiment") or key_of(o) == "task"
            or key_of(o).startswith("task.") or key_of(o).startswith("task/")]


def _may_name_a_file(selecting: list[str]) -> bool:
    """Whether anything could set task.config_file: an override, a YAML file of a config dir searched, or a
    typed config of a `sweeper.schemas` entry point. When nothing can (most sweeps), no extra composition runs:
    it costs about a third of a second, which a bad command line must not wait for."""
    if any("config_file" in o for o in selecting):
        return True
    for folder in search_dirs(selecting):
        for path in folder.rglob("*.yaml"):
            try:
                if b"config_file" in path.read_bytes():
                    return True
            except OSError:
                return True                  # unreadable: compose, and let Hydra say what is wrong
    return "config_file" in repr(ConfigStore.instance().repo.get("task", {}))


def base_file(task: Any) -> Path | None:
    """The absolute path task.config_file names (None when it names none)."""
    name = task.get("config_file") if isinstance(task, dict) else None
    if not name:
        return None
    if not isinstance(name, str):
        raise UsageError(f"task.config_file={name!r}: expected the path of your script's YAML file")
    path = Path(os.path.expanduser(name))
    if not path.is_absolute():
        path = Path(os.path.expanduser(task.get("cwd") or os.getcwd())) / path
    return path.resolve()


def read_base(path: Path) -> dict:
    """The file's top-level mapping; UsageError naming the file for anything else."""
    check_yaml(path, "task.config_file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"task.config_file={path}: cannot be read ({e.strerror or e}); give the path of your "
                         f"script's YAML (relative to task.cwd)") from None
    except yaml.YAMLError as e:
        raise UsageError(f"task.config_file={path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UsageError(f"task.config_file={path}: expected a mapping of keys to values at the top level")
    clash = [k for k in data if k in RESERVED_KEYS]
    if clash:
        raise UsageError(f"task.config_file={path}: its key {clash[0]!r} is one of sweeper's own "
                         f"({', '.join(RESERVED_KEYS)}); rename it in the file")
    return data


def with_task_base(overrides: list[str], compose_raw: Callable[[list[str]], dict]) -> list[str]:
    """The overrides with the base config of task.config_file added before the experiment (unchanged when the
    task names no file, or when the task block cannot be composed alone: the full composition says why)."""
    selecting = _selecting(overrides)
    if not _may_name_a_file(selecting):
        return overrides
    exp = experiment_file(selecting)
    try:
        key = (tuple(selecting), os.getcwd(), str(exp), exp.stat().st_mtime_ns if exp else None)
    except OSError:
        key = ("uncached", len(_TASKS))
    if key not in _TASKS:                    # one extra composition per sweep, not one per variant
        try:
            _TASKS[key] = compose_raw(selecting).get("task")
        except Exception:  # noqa: BLE001 - composed again in full, where the error gets its one line
            return overrides
    task = _TASKS[key]
    path = base_file(task) if isinstance(task, dict) and task.get("command") else None   # else the schema refuses
    if path is None:
        return overrides
    data = read_base(path)
    name = f"base_{zlib.crc32(os.fsencode(path)):08x}"
    ConfigStore.instance().store(group=GROUP, name=name, node=data, package="_global_", provider="sweeper")
    first = next((i for i, o in enumerate(overrides) if key_of(o) == "experiment"), 0)
    return overrides[:first] + [f"+{GROUP}={name}"] + overrides[first:]
