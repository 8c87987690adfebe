"""Where configs are found: the package's own (sweeper.conf, the repo's conf/) and every --config-dir.

    search_dirs(["hydra.searchpath=[file:///home/me/conf]"])   # [<sweeper/conf>, /home/me/conf]
    available("experiment", overrides)                          # ["rope", "mine"]: options of a group
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hydra.core.config_store import ConfigStore

from sweeper.config.composition.argv import key_of, searchpath_value
from sweeper.config.schema import register
from sweeper.errors import UsageError


def _package_conf_dir() -> Path:
    """The configs shipped as the package `sweeper.conf` (the repo's conf/, mapped by pyproject.toml)."""
    spec = importlib.util.find_spec("sweeper.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    # A source checkout put on PYTHONPATH without installing it: its conf/ sits beside the package.
    return Path(importlib.util.find_spec("sweeper").origin).resolve().parent.parent / "conf"


CONF_DIR = _package_conf_dir()


def search_dirs(overrides: list[str] = ()) -> list[Path]:
    """Every config directory composition searches: the package's, then each hydra.searchpath entry."""
    dirs = [CONF_DIR]
    for override in overrides:
        if key_of(override) != "hydra.searchpath":
            continue
        for entry in searchpath_value(override):
            scheme, sep, rest = entry.partition("://")
            if not sep:
                dirs.append(Path(os.path.expanduser(entry)).resolve())
            elif scheme == "file":
                dirs.append(Path(os.path.expanduser(rest)).resolve())
            elif scheme == "pkg":
                spec = importlib.util.find_spec(rest) if _importable(rest) else None
                if spec is not None and spec.submodule_search_locations:
                    dirs.append(Path(list(spec.submodule_search_locations)[0]))
    return dirs


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def experiment_file(overrides: list[str]) -> Path | None:
    """The file +experiment=NAME selects (the last such override), first found along the search path; None."""
    name = next((o.split("=", 1)[1] for o in reversed(overrides) if key_of(o) == "experiment" and "=" in o), None)
    for d in search_dirs(overrides) if name else []:
        path = d / "experiment" / f"{name}.yaml"
        try:
            if path.is_file():
                return path
        except OSError:                      # a name too long for the file system: not a file here
            continue
    return None


def available(group: str, overrides: list[str] = ()) -> list[str]:
    """The options of a config group over every config dir and the ConfigStore (the typed groups)."""
    try:
        register()
        stored = {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group)}
    except (UsageError, OSError, ValueError):   # ValueError-like: no such group in the store
        stored = set()
    return sorted(stored | {p.stem for d in search_dirs(overrides) for p in (d / group).glob("*.yaml")})


def where_searched(overrides: list[str]) -> str:
    dirs = search_dirs(overrides)
    if len(dirs) == 1:
        return f"searched {dirs[0]}; add your own with --config-dir DIR"
    return "searched " + ", ".join(map(str, dirs))
