"""The sweep dir as the user sees it: relative to the current folder when inside it (`sweeps/rope-815fcfd0`, as
the README shows), and a note when it lands, unignored, in a git project's work tree.

    print(f"sweep dir: {shown(plan.sweep_dir)}")
    note = gitignore_note(plan.sweep_dir)      # None, or one line: add sweeps/ to .gitignore

The default sweeper.dir is `sweeps/<experiment>-<hash>` in the folder the command runs in, so a sweep started in a
project's checkout appears in its `git status` until `sweeps/` is ignored.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


def shown(sweep_dir: Path | str) -> str:
    """The sweep dir relative to the current folder when it is inside it, else absolute."""
    path = Path(sweep_dir).absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def gitignore_note(sweep_dir: Path | str) -> str | None:
    """One line when the sweep dir is inside the current folder, in a git work tree, and git does not ignore it."""
    path = Path(sweep_dir).absolute()
    cwd = Path.cwd()
    if not path.is_relative_to(cwd) or not any((d / ".git").exists() for d in (cwd, *cwd.parents)):
        return None
    top = path.relative_to(cwd).parts[0]
    try:
        ignored = subprocess.run(["git", "check-ignore", "-q", top], cwd=cwd, capture_output=True, timeout=10,
                                 stdin=subprocess.DEVNULL, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if ignored.returncode != 1:       # 0: ignored; 128: not a work tree, or no git to ask
        return None
    return (f"note: sweeps are written into the current folder ({top}/ here, sweeper.dir moves them): add "
            f"`{top}/` to .gitignore, or git status lists every run")
