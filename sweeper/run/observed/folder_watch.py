"""What a run changed in its working folder outside its own run dir: a cheap snapshot (names, sizes, mtimes)
before and after the run, bounded, never following a link. Torch-free, stdlib only.

    before = snapshot(cwd, skip=[run_dir])      # {relative path: (size, mtime_ns, atime_ns)}; None past the bounds
    ...                                         # the run
    changed(before, snapshot(cwd, skip=[run_dir]))   # [("ckpt/model.npz", "created", 1234), ...]

Kinds: created, modified, deleted; and `read` for a file whose access time moved while its size and mtime did
not, when it had not been read since its last write (or is checkpoint-like, CHECKPOINT): what a mount with
relatime or strictatime shows of the first read after a write, so a file an earlier run wrote and this run read
is named, and data files read by every run are not listed again and again; under noatime nothing is read: no
`read` is claimed. Writes are listed before reads (a record is cut at MAX_LISTED entries).

Hidden folders are watched (state shared through a `.cache/` is state all the same). Skipped: version control
(.git, .hg, .svn), virtual environments (a folder holding pyvenv.cfg or conda-meta), installed packages
(site-packages, node_modules), the interpreter's own __pycache__, developer tools' state that an editor or a test
runner writes while runs run (.mypy_cache, .ruff_cache, .pytest_cache, .hypothesis, .idea, .vscode,
.ipynb_checkpoints, .tox, .nox, .coverage), sweep dirs (a folder holding a sweep manifest:
this sweep's runs and any other sweep's) and a folder of them near the top (sweeps/, where the sweeper writes the
journal), and the run's own dir. A folder of more than MAX_FILES files (or deeper than MAX_DEPTH) is not watched
(None): the check stays silent rather than guess. sweeper.run.command records the result in
RUN_DIR/isolation.json (sweeper.run.files.isolation).
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from sweeper.run.files.isolation import IsolationRecord, write_isolation
from sweeper.run.files.manifest import MANIFEST

MAX_FILES = 20_000
MAX_DEPTH = 8
SKIP_NAMES = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", "site-packages",
                        # the state of developer tools (editors, linters, test runners), which write while runs run
                        ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", ".idea", ".vscode",
                        ".ipynb_checkpoints", ".tox", ".nox", ".coverage"})
ENVIRONMENT_MARKS = frozenset({"pyvenv.cfg", "conda-meta"})     # a folder holding one is an environment
# a file a run may resume from: named like a checkpoint (STRONG), or in a format checkpoints are saved in
STRONG = re.compile(r"(ckpt|checkpoint|\.pt$|\.pth$|\.safetensors$)", re.IGNORECASE)
CHECKPOINT = re.compile(STRONG.pattern[:-1] + r"|\.(npz|npy|pkl|pickle|bin|h5|joblib|msgpack)$)", re.IGNORECASE)
Snapshot = dict[str, tuple[int, int, int]]


def snapshot(root: str | Path, skip: list[str | Path] = ()) -> Snapshot | None:
    """Every regular file (and link, not followed) under `root`: relative path -> (size, mtime_ns, atime_ns)."""
    skip_real = {os.path.realpath(s) for s in skip}
    found: Snapshot = {}
    top = os.path.abspath(root)
    cut = len(os.path.join(top, ""))                  # a path below `top`, less this prefix: its relative path
    stack = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth > MAX_DEPTH:
            return None
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        if any(e.name == MANIFEST or e.name in ENVIRONMENT_MARKS for e in entries):
            continue                                   # a sweep dir, a virtual environment
        for entry in entries:
            if entry.name in SKIP_NAMES:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    if os.path.realpath(entry.path) not in skip_real and not (depth < 2 and _holds_sweeps(entry.path)):
                        stack.append((entry.path, depth + 1))
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[entry.path[cut:]] = (st.st_size, st.st_mtime_ns, st.st_atime_ns)
            if len(found) > MAX_FILES:
                return None
    return found


def _holds_sweeps(folder: str, limit: int = 200) -> bool:
    """A folder of sweep dirs (sweeps/): their journal is written there by the sweeper, not by a run."""
    try:
        with os.scandir(folder) as it:
            for i, entry in enumerate(it):
                if i >= limit:
                    return False
                if entry.is_dir(follow_symlinks=False) and os.path.exists(os.path.join(entry.path, MANIFEST)):
                    return True
    except OSError:
        return False
    return False


def changed(before: Snapshot | None, after: Snapshot | None) -> list[tuple[str, str, int]] | None:
    """(path, created | modified | deleted | read, size) for every file that differs (see the module docstring);
    None when either is unknown."""
    if before is None or after is None:
        return None
    written, read = [], []
    for p, new in after.items():
        old = before.get(p)
        if old == new:                                 # the common case on a big folder: nothing happened
            continue
        if old is None or old[:2] != new[:2]:
            written.append((p, "created" if old is None else "modified", new[0]))
        elif new[2] > old[2] and (old[2] <= old[1] or CHECKPOINT.search(p)):
            read.append((p, "read", new[0]))
    deleted = [(p, "deleted", size) for p, (size, *_) in before.items() if p not in after]
    return sorted(written) + sorted(deleted) + sorted(read)


class FolderWatch:
    """One run's watch of its working folder: made before the run starts, `done()` after it ends writes
    RUN_DIR/isolation.json (sweeper.run.files.isolation). Never raises: a watch that fails records nothing."""

    def __init__(self, run_dir: str | Path, folder: str | Path | None = None):
        self.run_dir, self.folder = Path(run_dir), os.path.abspath(folder or os.getcwd())
        self.started = time.time()
        self.before = snapshot(self.folder, skip=[self.run_dir])

    def done(self) -> None:
        try:
            found = changed(self.before, snapshot(self.folder, skip=[self.run_dir]))
            write_isolation(self.run_dir, IsolationRecord(self.folder, self.started, time.time(),
                                                          watched=found is not None, changed=found or [],
                                                          n_changed=len(found or [])))
        except OSError as e:
            print(f"sweeper: warning: could not record what the run changed in {self.folder} ({e})", flush=True)
