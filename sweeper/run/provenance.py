"""What code a run ran: its commit, whether the tree was dirty, and a hash of its script. Torch-free, stdlib only.

    set_script("train.py")          # the command / entry wrappers name the user's script before it runs
    code_record(git)                # {"code_commit", "code_dirty", "code_diff", "script", "script_sha256"}
    script_of(["python", "train.py", "--lr=0.1"])    # the file a task's command runs ("train.py")

The script is the task.command's script (`python script.py`, `python -m module`), the task.entry's module, or
else the `__main__` file of a script that called sweeper.init() itself. The summary's fingerprint records it
(sweeper.run.Run), so the report can name runs of one sweep that ran different code
(sweeper.analysis.integrity.provenance), and `sweeper.extend=true` can warn before it adds seeds onto changed code.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

PYTHONS = ("python", "python3")
_SCRIPT: list[str] = []          # the script this process runs, when a wrapper named it (set_script)


def set_script(path: str | os.PathLike | None) -> None:
    """Name the file this process's run executes (the wrappers call it before running the user's code)."""
    _SCRIPT[:] = [os.path.abspath(path)] if path else []


def current_script() -> str | None:
    """The named script, else the `__main__` module's file (a script launched as `python train.py`)."""
    if _SCRIPT:
        return _SCRIPT[0]
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.abspath(main) if main else None


def file_sha256(path: str | os.PathLike | None, n: int = 16) -> str | None:
    """Short sha256 of a file's bytes; None when there is no such readable file."""
    if not path:
        return None
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()[:n]


def module_file(name: str, cwd: str | os.PathLike | None = None) -> str | None:
    """The source file of module `name` (found from `cwd` first, as a run finds it), without importing it."""
    added = cwd is not None and str(cwd) not in sys.path
    if added:
        sys.path.insert(0, str(cwd))
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    finally:
        if added:
            sys.path.remove(str(cwd))
    origin = spec.origin if spec is not None else None
    return origin if origin and os.path.isfile(origin) else None


def script_of(words: list[str] | tuple[str, ...], cwd: str | os.PathLike | None = None) -> str | None:
    """The file a command's words run: `python script.py`, `python -m module` (its source file), or the first
    word after the program that names an existing file (`bash train.sh`, `python -u train.py`), else the
    program itself when it is a file given by path. Relative paths are relative to `cwd`."""
    base = Path(cwd or os.getcwd())
    words = list(words)
    if not words:
        return None
    program = Path(words[0]).name
    if program in PYTHONS or words[0] == sys.executable or program.startswith("python"):
        for i, word in enumerate(words[1:], 1):
            if word == "-m" and i + 1 < len(words):
                return module_file(words[i + 1], base)
            if not word.startswith("-"):
                path = base / word
                return str(path) if path.is_file() else None
        return None
    for word in words[1:]:
        if not word.startswith("-") and (base / word).is_file():
            return str(base / word)
    first = base / words[0]
    return str(first) if os.sep in words[0] and first.is_file() else None


def diff_sha256(folder: str | os.PathLike | None = None, n: int = 16) -> str | None:
    """Short sha256 of the uncommitted changes to tracked files (`git diff HEAD`) of the checkout holding
    `folder`: two runs on one dirty tree ran the same code when it is the same. None when git cannot say."""
    try:
        out = subprocess.run(["git", "-C", str(folder or os.getcwd()), "diff", "HEAD", "--no-ext-diff", "--binary"],
                             capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return hashlib.sha256(out.stdout).hexdigest()[:n] if out.returncode == 0 else None


def code_record(git: dict | None, script: str | None = None, folder: str | os.PathLike | None = None) -> dict:
    """The summary's record of the code a run ran (git: envinfo.git_state of the run's folder; a dirty tree
    also records the hash of its uncommitted changes, code_diff)."""
    git = git or {}
    script = script or current_script()
    return {"code_commit": git.get("commit"), "code_dirty": git.get("dirty"),
            "code_diff": diff_sha256(folder) if git.get("dirty") else None,
            "script": script, "script_sha256": file_sha256(script)}
