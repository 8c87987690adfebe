"""Housekeeping of the run store: run dirs no sweep refers to, and the disk that reuse uses. Reads only, unless
told to remove.

    found = unreferenced([Path("sweeps")])     # [Garbage(path, bytes, why)]: run dirs no manifest lists, sweep
                                               # dirs with no manifest, a reuse cut short
    use = disk_use([Path("sweeps")])           # DiskUse: bytes on disk (a hard-linked file once), copied by reuse,
                                               # shared through hard links
    remove(found)                              # each under its sweep's lock; a sweep in use is skipped, named

A run is referred to by the manifest of the sweep dir it is in (a reused run is its new sweep's own copy: the
earlier sweep stays whole, and either can be deleted without the other losing a file). Nothing outside the given
folders is touched, and no link is followed.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sweeper.plan.lock import SweepLocked, sweep_lock
from sweeper.run.files.manifest import MANIFEST, read_manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.store.record import read_reused

RUNS = "runs"


@dataclass(frozen=True)
class Garbage:
    path: Path
    bytes: int
    why: str
    sweep_dir: Path


@dataclass(frozen=True)
class DiskUse:
    sweeps: int = 0
    total: int = 0            # bytes on disk under the folders (a file hard-linked several times counted once)
    reused_runs: int = 0
    copied: int = 0           # bytes reuse copied (the reused runs' files that are not hard links)
    linked: int = 0           # bytes reuse shares through hard links (counted once in total)


def _size(path: Path, seen: set | None = None) -> int:
    """Bytes of the regular files below `path` (no link followed); `seen` counts a hard-linked file once."""
    total = 0
    for here, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
        for name in files:
            info = os.lstat(os.path.join(here, name))
            if seen is not None:
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
            total += info.st_size
    return total


def sweep_dirs(folders: list[Path]) -> list[Path]:
    """Folders that are sweep dirs (they hold a manifest or a runs/ folder), the given ones or their children."""
    out = []
    for folder in folders:
        for child in [folder, *sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())]:
            if (child / MANIFEST).is_file() or (child / RUNS).is_dir():
                out.append(child)
    return list(dict.fromkeys(out))


def unreferenced(folders: list[Path]) -> list[Garbage]:
    """Run dirs that no sweep refers to."""
    found = []
    for sweep_dir in sweep_dirs(folders):
        try:
            manifest = read_manifest(sweep_dir)
        except UnreadableFile:
            continue                                      # a damaged manifest: its sweep is the user's to repair
        if manifest is None:
            found.append(Garbage(sweep_dir, _size(sweep_dir), "a sweep dir with no manifest (its plan was never "
                                                              "written whole)", sweep_dir))
            continue
        planned = {os.path.normpath(sweep_dir / r.run_dir) for r in manifest.runs}
        runs = sweep_dir / RUNS
        for variant in sorted(runs.iterdir()) if runs.is_dir() else []:
            if variant.is_symlink() or not variant.is_dir():
                continue
            for run_dir in sorted(variant.iterdir()):
                if run_dir.is_symlink() or not run_dir.is_dir():
                    continue
                if run_dir.name.startswith("."):
                    found.append(Garbage(run_dir, _size(run_dir), "a reuse cut short", sweep_dir))
                elif os.path.normpath(run_dir) not in planned:
                    found.append(Garbage(run_dir, _size(run_dir), "no run of its sweep's plan", sweep_dir))
    return found


def disk_use(folders: list[Path]) -> DiskUse:
    seen: set = set()
    dirs = sweep_dirs(folders)
    total = sum(_size(d, seen) for d in dirs)
    reused = copied = linked = 0
    for sweep_dir in dirs:
        try:
            entries = read_reused(sweep_dir)
        except UnreadableFile:
            continue
        for run_id in entries:
            run_dir = _run_dir_of(sweep_dir, run_id)
            if run_dir is None:
                continue
            reused += 1
            for here, dirs_, files in os.walk(run_dir):
                dirs_[:] = [d for d in dirs_ if not os.path.islink(os.path.join(here, d))]
                for name in files:
                    info = os.lstat(os.path.join(here, name))
                    if info.st_nlink > 1:
                        linked += info.st_size
                    else:
                        copied += info.st_size
    return DiskUse(len(dirs), total, reused, copied, linked)


def _run_dir_of(sweep_dir: Path, run_id: str) -> Path | None:
    try:
        manifest = read_manifest(sweep_dir)
    except UnreadableFile:
        return None
    entry = next((r for r in manifest.runs if r.run_id == run_id), None) if manifest else None
    return sweep_dir / entry.run_dir if entry else None


def remove(found: list[Garbage]) -> tuple[list[Garbage], list[str]]:
    """Remove each (under its sweep dir's lock); (removed, why others were not)."""
    removed, skipped = [], []
    for item in found:
        try:
            with sweep_lock(item.sweep_dir):
                if item.path.is_symlink():
                    continue
                shutil.rmtree(item.path)
                removed.append(item)
        except SweepLocked as e:
            skipped.append(str(e))
    return removed, skipped
