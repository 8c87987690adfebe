"""The launchers a sweep can use: every backend registered under the `sweeper.backends` entry point group.

    registered()                      # {"local": LocalBackend, "slurm": SlurmBackend, ...}: name -> Backend class
    backend_of({"name": "slurm"})     # that Backend class; UsageError naming launcher.name and the choices
    launcher_conf(cfg["launcher"])    # the launcher block typed and checked by its backend's schema

A backend is a subclass of sweeper.backends.base.Backend with a `schema` (its launcher=NAME dataclass). The
registry is pyproject.toml's `[project.entry-points."sweeper.backends"]`: adding a backend is one new folder
under sweeper/backends/ and one line there (a third-party package registers its own the same way). Loading by
entry point keeps this module below the backends it names: config never imports the backend layer.
"""
from __future__ import annotations

import functools
from importlib.metadata import entry_points

from sweeper.errors import UsageError

GROUP = "sweeper.backends"


@functools.cache
def registered() -> dict[str, type]:
    """name -> Backend class, the built-in ones first (local is the default), then the rest by name."""
    found = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda ep: (ep.name not in ("local", "slurm"), ep.name)):
        try:
            found[ep.name] = ep.load()
        except Exception as e:  # noqa: BLE001 - a third-party backend that fails to load: one line naming it
            raise UsageError(f"backend entry point {GROUP}:{ep.name} = {ep.value} failed to load: "
                             f"{type(e).__name__}: {e}".splitlines()[0]) from None
    if "local" not in found:
        raise UsageError(f"no `{GROUP}` entry points: sweeper is not installed (pip install -e . in its checkout)")
    return found


def backend_of(block: dict | None, prefix: str = "launcher") -> type:
    name = (block or {}).get("name", "local")
    backends = registered()
    if name not in backends:
        raise UsageError(f"{prefix}.name={name!r}: accepted values are {', '.join(backends)} "
                         f"(choose the backend with launcher=NAME)")
    return backends[name]


def launcher_conf(block: dict | None, prefix: str = "launcher"):
    """The launcher block checked by the schema of its backend (launcher.name): keys, types, ranges."""
    return backend_of(block, prefix).schema.from_dict(block, prefix)
