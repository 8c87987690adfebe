"""A user's config groups are their own: a file in a --config-dir is never checked against a schema of the same
group and name that a package registered (the demo trainer's model/small, data/stdlib, train/default, ...).

    register(); keep_user_files(search_dirs(overrides)[1:])     # sweeper.config.composition.compose, each time

Hydra matches a config file to a ConfigStore entry at the same path and validates the file against it
(automatic schema matching, deprecated since Hydra 1.1, with a warning). The demo's groups are registered
through the `sweeper.schemas` entry point, so a user's `conf/model/small.yaml` with `task: custom` was refused
against the trainer's model schema. Here every such entry not registered by sweeper itself (its own schemas
and the launcher group stay) is dropped from the ConfigStore before composing when a user's dir has a file at
its path: the user's file is composed exactly as Hydra reads it. The built-in trainer still validates its own
run config (sweeper.train.config.RunConfig), so a user's file that replaces one of its groups is checked there.
"""
from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigNode, ConfigStore


def keep_user_files(dirs: list[Path]) -> list[str]:
    """Drop the package-registered ConfigStore entries a file in one of `dirs` shadows; the paths dropped."""
    dropped = []
    for group_path, names in _groups(ConfigStore.instance().repo, ""):
        for name, node in list(names.items()):
            if not isinstance(node, ConfigNode) or node.provider == "sweeper":
                continue
            if any((d / group_path / name).is_file() for d in dirs):
                del names[name]
                dropped.append(f"{group_path}/{name}")
    return dropped


def _groups(repo: dict, prefix: str):
    """(group path, its dict of nodes) for every group below the root (the root's own nodes are primary configs)."""
    for key, value in repo.items():
        if isinstance(value, dict):
            path = f"{prefix}/{key}" if prefix else key
            yield path, value
            yield from _groups(value, path)
