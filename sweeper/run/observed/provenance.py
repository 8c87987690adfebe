"""What code a run ran: its commit, whether the tree was dirty, a hash of its script and of every project source
file it ran. Torch-free, stdlib only.

    set_script("train.py")          # the command / entry wrappers name the user's script before it runs
    code_record(git)                # {"code_commit", "code_dirty", "code_diff", "script", "script_sha256"}
    code_files()                    # {"model.py": "3f0c...", ...}: the project files this process ran (below)
    script_of(["python", "train.py", "--lr=0.1"])    # the file a task's command runs ("train.py")
    files_now({"model.py": "3f0c..."}, "/proj")      # the same files hashed as they are now (None: gone)

The project's code (code_files, in the summary's fingerprint): a run-API process (sweeper.init, task.entry)
records every module it has loaded at its end whose file is in the project folder (the run's working directory,
task.cwd) or outside the Python installation (an editable install of the user's own package); a task.command
(set_project_sources: its program is another process) records every source file of the project folder (git's
tracked and untracked files when it is a checkout, else a walk that skips hidden folders, virtual environments
and sweep dirs). Paths inside the project folder are relative to it, others absolute.

The script is the task.command's script (`python script.py`, `python -m module`), the task.entry's module, or
else the `__main__` file of a script that called sweeper.init() itself. The summary's fingerprint records it
(sweeper.run.Run), so the report can name runs of one sweep that ran different code
(sweeper.analysis.integrity.records.provenance), and `sweeper.extend=true` can warn before it adds seeds onto
changed code.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import site
import subprocess
import sys
from pathlib import Path

from sweeper.run.files.manifest import MANIFEST

PYTHONS = ("python", "python3")
_SCRIPT: list[str] = []          # the script this process runs, when a wrapper named it (set_script)
_WHOLE_PROJECT: list[bool] = []  # [True]: a task.command's wrapper: its code is every project source file
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".sh", ".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp")
MAX_FILES = 5000                 # a project folder with more source files records the first 5000 (sorted)


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


def set_project_sources(whole: bool = True) -> None:
    """A task.command's wrapper: the run's code is every source file of the project folder (its program's imports
    happen in another process)."""
    _WHOLE_PROJECT[:] = [True] if whole else []


def _installed_roots() -> tuple[str, ...]:
    """Folders of the Python installation (the stdlib, site-packages): modules there are not the project's."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    roots |= {user} if isinstance(user, str) else set()
    return tuple(os.path.realpath(r) + os.sep for r in roots if r)


def _skipped_dir(path: Path, name: str) -> bool:
    """A folder a project's sources never live in: hidden, a virtual environment, a sweep dir, caches."""
    return name.startswith(".") or name in ("__pycache__", "node_modules") or (path / "pyvenv.cfg").exists() \
        or (path / MANIFEST).exists()


def project_sources(folder: str | os.PathLike) -> list[str]:
    """The project folder's source files (SOURCE_SUFFIXES), relative to it, sorted: git's tracked and untracked
    (not ignored) files in a checkout, else a walk skipping hidden folders, virtual environments and sweep dirs."""
    root = Path(folder)
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--full-name", "."], capture_output=True, timeout=10)
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        out = top = None
    if out is not None and out.returncode == 0 and top.returncode == 0:
        base = Path(top.stdout.strip())
        names = []
        for raw in out.stdout.split(b"\0"):
            path = base / os.fsdecode(raw)
            if raw and path.suffix in SOURCE_SUFFIXES and path.is_file():
                try:
                    names.append(str(path.relative_to(root.resolve())))
                except ValueError:
                    continue
        return sorted(names)[:MAX_FILES]
    found = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(Path(here) / d, d))
        found += [os.path.relpath(os.path.join(here, f), root) for f in files if f.endswith(SOURCE_SUFFIXES)]
        if len(found) >= MAX_FILES:
            break
    return sorted(found)[:MAX_FILES]


def imported_sources(folder: str | os.PathLike) -> list[str]:
    """Files of the modules this process has loaded that are the project's: in `folder`, or outside the Python
    installation (an editable install); relative to `folder` when inside it, sorted."""
    root = os.path.realpath(folder) + os.sep
    installed = _installed_roots()
    found = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(SOURCE_SUFFIXES):
            continue
        real = os.path.realpath(path)
        if real.startswith(root):
            rel = real[len(root):]
            if not any(part.startswith(".") or part == "__pycache__" for part in Path(rel).parts[:-1]):
                found.add(rel)
        elif not real.startswith(installed) and os.path.isfile(real):
            found.add(real)
    return sorted(found)[:MAX_FILES]


def hash_files(names: list[str], folder: str | os.PathLike) -> dict[str, str | None]:
    """{name: short sha256 of its bytes now} (None: gone or unreadable); names relative to `folder` or absolute."""
    return {name: file_sha256(os.path.join(folder, name)) for name in names}


def code_files(folder: str | os.PathLike | None = None) -> dict[str, str | None]:
    """The project code this process ran, hashed (see the module docstring): a task.command's wrapper records the
    project folder's sources, any other run the project modules it loaded."""
    folder = folder or os.getcwd()
    names = project_sources(folder) if _WHOLE_PROJECT else imported_sources(folder)
    return hash_files(names, folder)


def changed_files(recorded: dict[str, str | None], folder: str | os.PathLike,
                  cache: dict[str, str | None] | None = None) -> list[str]:
    """The recorded files whose bytes differ now (edited, or gone), in order; `cache` keeps hashes of files
    already read (a plan over many runs that share files reads each once)."""
    cache = {} if cache is None else cache
    changed = []
    for name, sha in recorded.items():
        path = os.path.join(folder, name)
        if path not in cache:
            cache[path] = file_sha256(path)
        if cache[path] != sha:
            changed.append(name)
    return changed
