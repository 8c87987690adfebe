"""YAML that would not fit in memory is refused before Hydra reads it: an alias bomb (anchors nested ten deep,
each alias repeating the one before: a few lines that expand to billions of nodes) is one line naming the file,
exit 2, in milliseconds.

    check_yaml_files(overrides)            # the experiment file and every YAML of the user's --config-dirs
    check_yaml(Path("configs/train.yaml"), "task.config_file")

The file is composed (parsed into nodes, aliases kept as shared references: cheap at any expansion), then its
expanded size is counted with each shared node counted once per reference (memoised). MAX_NODES is far above any
real config (a config of 1,000,000 values is 100 MB of YAML).
"""
from __future__ import annotations

from pathlib import Path

import yaml

from sweeper.config.composition.search import CONF_DIR, experiment_file, search_dirs
from sweeper.errors import UsageError

MAX_NODES = 1_000_000          # values after every alias is expanded
MAX_BYTES = 64 << 20           # a config file larger than this is not a config


def check_yaml_files(overrides: list[str]) -> None:
    """UsageError for the first YAML file composition may read (the experiment's; the user's config dirs' group
    files) whose aliases expand beyond MAX_NODES."""
    exp = experiment_file(overrides)
    if exp is not None:
        check_yaml(exp, "experiment file")
    for d in search_dirs(overrides):
        if d == CONF_DIR or not d.is_dir():
            continue
        for path in sorted({*d.glob("*.yaml"), *d.glob("*/*.yaml")}):
            if path != exp:
                check_yaml(path, "config file")


def check_yaml(path: Path, what: str) -> None:
    """UsageError naming `path` when its expansion exceeds MAX_NODES (or the file MAX_BYTES); unreadable or
    malformed files are left to the reader that reports them."""
    try:
        if path.stat().st_size > MAX_BYTES:
            raise UsageError(f"{what} {path}: {path.stat().st_size} bytes, more than a config file holds "
                             f"({MAX_BYTES >> 20} MiB); keep data out of configs")
        text = path.read_text(encoding="utf-8", errors="replace")
        if "*" not in text:                      # no alias: nothing can expand
            return
        nodes = yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        total = sum(_expanded(node, {}, set()) for node in nodes if node is not None)
    except (OSError, yaml.YAMLError, RecursionError):
        return
    except _TooLarge:
        total = MAX_NODES + 1
    if total > MAX_NODES:
        raise UsageError(f"{what} {path}: its YAML aliases (*name) expand to more than {MAX_NODES:,} values (an "
                         f"alias bomb); write the values out, or nest fewer aliases")


class _TooLarge(Exception):
    pass


def _expanded(node: yaml.Node, memo: dict[int, int], open_: set[int]) -> int:
    """Nodes of `node` with every alias expanded; _TooLarge past MAX_NODES or on a recursive alias."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in open_:
        raise _TooLarge()
    open_.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            size += _expanded(child, memo, open_)
            if size > MAX_NODES:
                raise _TooLarge()
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            size += _expanded(k, memo, open_) + _expanded(v, memo, open_)
            if size > MAX_NODES:
                raise _TooLarge()
    open_.discard(key)
    memo[key] = size
    return size
