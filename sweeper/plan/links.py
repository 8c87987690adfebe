"""No link out of a sweep dir is followed: a run's folder (runs/, runs/<variant>, the run dir, or a folder in it
such as out/ or ckpt/) replaced by a symbolic link (say between an interrupt and the rerun) stops the launch
before anything is written: one line naming the link, where it points and the fix, exit 2.

    check_no_links(plan.sweep_dir, [run.run_dir for run in plan.runs])   # under the sweep lock, before write_plan

Only the folders sweeper makes and writes into are checked; files in a run dir are opened with O_NOFOLLOW
(sweeper.run.files.atomic). Checking is one lstat per folder and one directory listing per existing run dir.
"""
from __future__ import annotations

import os
from pathlib import Path

from sweeper.errors import UsageError
from sweeper.pasted import pasted


def check_no_links(sweep_dir: Path, run_dirs: list[Path]) -> None:
    """UsageError for the first folder between `sweep_dir` and a run dir, or inside a run dir, that is a link."""
    seen: set[Path] = set()
    for run_dir in run_dirs:
        try:
            rel = run_dir.relative_to(sweep_dir)
        except ValueError:                       # not under the sweep dir: nothing between to check
            rel = Path()
        for depth in range(1, len(rel.parts) + 1):
            folder = sweep_dir.joinpath(*rel.parts[:depth])
            if folder in seen:
                continue
            seen.add(folder)
            _refuse_link(folder)
        try:
            entries = list(os.scandir(run_dir))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink() and os.path.isdir(entry.path):
                _refuse_link(Path(entry.path))


def _refuse_link(path: Path) -> None:
    if not path.is_symlink():
        return
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    raise UsageError(f"{path} is a symbolic link (to {target}): sweeper never writes through a link in a sweep "
                     f"dir; remove the link (`{pasted('rm', path)}`) and run the same command again (that run "
                     f"starts in a fresh folder)")
