"""The paths a plan will write, checked before anything is written or started: lengths and a writable place.

    check_paths(plan)      # UsageError: a name or path too long for the file system (sweeper.dir, the journal)
                           # OSError (exit 1, named with its fix): the sweep dir cannot be created or written

Limits come from the file system the sweep dir goes on (os.pathconf of the nearest existing folder: NAME_MAX,
usually 255 bytes per name, and PATH_MAX, usually 4096 bytes per path). The sweep dir's own name has room for
`compare_vs_` in front of it (a comparison with it written into another sweep); every path under it has room for
the longest file a sweep writes (a checkpoint's temporary file in runs/<variant>/seed_<k>/ckpt/).
experiment.name and variant names are checked earlier (sweeper.config.names: at most 235 characters).
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from sweeper.config.names import shorten
from sweeper.errors import UsageError

COMPARE_PREFIX = "compare_vs_"                          # sweeper.report.write: NEW/compare_vs_<OLD name>/
DEEPEST = "/ckpt/.step_18446744073709551615.pt.XXXXXXXX.tmp"   # the longest path below a run dir


def _exists(path: Path) -> bool | None:
    """True/False, or None when the path cannot even be looked up (a name too long: ENAMETOOLONG)."""
    try:
        os.stat(path)
        return True
    except FileNotFoundError:
        return False
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            return None
        if e.errno == errno.ENOTDIR:
            raise UsageError(f"{path}: a part of it is a file, not a folder; choose another sweeper.dir") from None
        raise


def nearest_existing(path: Path) -> Path:
    """The path itself or its closest ancestor that exists (the root, at worst)."""
    for candidate in [path, *path.parents]:
        if _exists(candidate):
            return candidate
    return Path(path.anchor or "/")


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def check_length(path: Path, key: str, reserve_last: int = 0, below: int = 0) -> Path:
    """UsageError when a part of `path` that is not there yet is longer than the file system allows (the last part
    `reserve_last` bytes shorter), or the whole path plus `below` bytes is; the nearest existing folder."""
    path = Path(os.path.abspath(path))
    existing = nearest_existing(path)
    name_max = _limit(existing, "PC_NAME_MAX", 255)
    path_max = _limit(existing, "PC_PATH_MAX", 4096)
    parts = path.relative_to(existing).parts
    for i, part in enumerate(parts):
        room = name_max - (reserve_last if i == len(parts) - 1 else 0)
        if len(os.fsencode(part)) > room:
            raise UsageError(f"{key}: the name {shorten(part)} in {shorten(path, 60)} has {len(os.fsencode(part))} "
                             f"bytes; this file system allows {name_max} per name"
                             + (f" and sweeper adds up to {reserve_last} to it" if reserve_last and i == len(parts) - 1
                                else "") + ": use a shorter name")
    total = len(os.fsencode(path)) + below
    if total >= path_max:
        raise UsageError(f"{key}: {shorten(path, 60)} is {len(os.fsencode(path))} bytes long; with the files a sweep "
                         f"writes below it ({below} bytes more) it passes this file system's {path_max}-byte limit "
                         f"on a path: choose a shorter sweeper.dir")
    return existing


def check_writable(path: Path, existing: Path, what: str) -> None:
    """UsageError (exit 2: the user's choice of sweeper.dir, answered before anything starts) naming `existing`
    (the folder `path` would be made in, or path itself) when it is not a writable folder: permissions or a
    read-only file system."""
    if not existing.is_dir():
        raise UsageError(f"{existing} is a file, not a folder: {what} cannot be {path}; choose another sweeper.dir")
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if not read_only and os.access(existing, os.W_OK | os.X_OK):
        return
    why = "is on a read-only file system" if read_only else "is not writable by this user (permissions)"
    where = f"{existing}, where {what} {path} would be created," if existing != path else f"{what} {path}"
    raise UsageError(f"sweeper.dir={path}: {where} {why}; choose a writable sweeper.dir")


def check_paths(plan, writable: bool = True) -> None:
    """Every path the plan writes: the sweep dir (its new names, its length with the deepest file below it), a
    writable place for it (unless writable=False: a dry run writes nothing), and the journal folder's names
    (sweeper.journal). Raises before anything is written."""
    sweep_dir = Path(plan.sweep_dir)
    deepest = max((len(os.fsencode(r.run_dir.relative_to(sweep_dir))) for r in plan.runs), default=0) \
        + len(DEEPEST) + 1
    existing = check_length(sweep_dir, f"sweeper.dir={shorten(sweep_dir, 60)}", reserve_last=len(COMPARE_PREFIX),
                            below=deepest)
    if writable:
        check_writable(sweep_dir, existing, "the sweep dir")
    journal = plan.sweep.sweeper.journal
    if journal and str(journal).strip().lower() not in ("off", "false", "none"):
        check_length(
            Path(os.path.expanduser(journal)),
            f"sweeper.journal={shorten(journal, 60)}",
            below=len("/.journal.md.XXXXXXXX.tmp"),
        )
