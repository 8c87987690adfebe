"""The command line of a sweep: config dirs, override keys and values, and the shell-friendly list forms.

    dirs, rest = split_config_dirs(["--config-dir", "conf", "+experiment=mine"])   # your own config dirs
    overrides = with_config_dirs(rest, dirs)        # as hydra.searchpath=[file://...]
    key_of("+train.steps=5")                         # "train.steps"
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep

from sweeper.config.launchers import registered
from sweeper.errors import UsageError

CONFIG_DIR_FLAGS = ("--config-dir", "-cd")


def split_config_dirs(argv: list[str]) -> tuple[list[Path], list[str]]:
    """(absolute dirs of every `--config-dir DIR`, `-cd DIR`, `--config-dir=DIR`, the other arguments)."""
    dirs, rest, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in CONFIG_DIR_FLAGS:
            if i + 1 >= len(argv) or not argv[i + 1] or "=" in argv[i + 1] and not Path(argv[i + 1]).is_dir():
                raise UsageError(f"{arg} needs a directory: {arg} DIR (a folder with experiment/NAME.yaml)")
            value, i = argv[i + 1], i + 2
        elif arg.startswith("--config-dir="):
            value, i = arg.split("=", 1)[1], i + 1
        else:
            rest.append(arg)
            i += 1
            continue
        path = Path(os.path.expanduser(value)).resolve()
        if not path.is_dir():
            raise UsageError(f"--config-dir {value}: no such directory ({path})")
        dirs.append(path)
    return dirs, rest


def with_config_dirs(overrides: list[str], dirs: list[Path]) -> list[str]:
    """The overrides with the dirs appended to Hydra's search path (merged with a given hydra.searchpath)."""
    if not dirs:
        return list(overrides)
    given = [o for o in overrides if key_of(o) == "hydra.searchpath"]
    paths = [p for o in given for p in searchpath_value(o)] + [f"file://{d}" for d in dirs]
    quoted = ",".join("'" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in paths)
    return [f"hydra.searchpath=[{quoted}]"] + [o for o in overrides if o not in given]


def key_of(override: str) -> str:
    """The key an override sets: `model.d=1` / `+a.b=1` / `~x` / `model=big` -> model.d, a.b, x, model."""
    return override.split("=", 1)[0].strip().lstrip("+~")


def searchpath_value(override: str) -> list[str]:
    try:
        value = OverridesParser.create().parse_overrides([override])[0].value()
    except Exception:  # noqa: BLE001 - Hydra's parser raises its own types; one line either way
        raise UsageError(f"malformed override {override!r}: expected hydra.searchpath=[file:///abs/dir,...]") from None
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def comma_lists(overrides: list[str]) -> list[str]:
    """The shell-friendly list forms a launcher schema takes (its COMMA_LISTS), as Hydra lists: `launcher.devices=3,5`
    (Hydra would read a sweep), `launcher.cores='0,1'` and `launcher.devices=3` become [3,5], [0,1], [3]."""
    keys = {f"launcher.{k}" for backend in registered().values() for k in getattr(backend.schema, "COMMA_LISTS", ())}
    out = []
    for override in overrides:
        if key_of(override) in keys and "=" in override and not override.startswith("~"):
            try:
                value = OverridesParser.create().parse_overrides([override])[0].value()
            except Exception:  # noqa: BLE001 - Hydra reports it when composing
                value = None
            if isinstance(value, ChoiceSweep) and value.simple_form:
                items = value.list
            elif isinstance(value, str):
                items = [p.strip() for p in value.split(",") if p.strip()]
            else:
                items = [value] if isinstance(value, int) and not isinstance(value, bool) else None
            if items is not None and all(isinstance(i, (int, str)) and not isinstance(i, bool) for i in items):
                written = [str(i) if isinstance(i, int) else "'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'"
                           for i in items]
                override = f"{override.split('=', 1)[0]}=[{','.join(written)}]"
        out.append(override)
    return out


def override_value(key: str, overrides: list[str]) -> Any:
    """The value the last override of `key` gives (as Hydra parses it), or None."""
    for override in reversed(overrides):
        if key_of(override) == key:
            try:
                return OverridesParser.create().parse_overrides([override])[0].value()
            except Exception:  # noqa: BLE001 - only shown in a message
                return None
    return None
