"""What a run imports: the user's project and the installed packages, never the rest of sweeper's checkout.

    env["PYTHONPATH"] = os.pathsep.join([run_entries(task.cwd), inherited])   # sweeper.config.task.python_path

A run's process finds modules where `python script.py` started in the task's folder would: the task's cwd
first (documented: the user's modules), then the inherited PYTHONPATH, then the installed packages. Sweeper's
checkout root is never put there: it holds the demo's top-level `train/` and `kernels/` folders, which would
shadow a user's `train` package or Hugging Face's `kernels` (which transformers imports) under `pip install -e`.

A run still needs the `sweeper` package itself (the run contract). Installed (editable or wheel) or on the
inherited PYTHONPATH, the run finds it as the sweeper process did and nothing is added. Only when it would not
(a checkout started without installing it, with task.cwd outside the checkout) does the run get IMPORT_DIR:
a folder of the checkout holding nothing but links named `sweeper` and `hydra_plugins` to its own packages.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

from sweeper.errors import UsageError

PACKAGE = Path(__file__).resolve().parents[1]            # this sweeper package (its folder)
IMPORT_DIR = PACKAGE.parent / "build" / "import-path"     # used only for a checkout that is not installed
LINKED = ("sweeper", "hydra_plugins")                     # our only top-level packages


def _entries(pythonpath: str | None) -> list[str]:
    return [p for p in (pythonpath or "").split(os.pathsep) if p]


def _interpreter_path() -> list[str]:
    """The entries every python started from this interpreter gets: sys.path without this process's own first
    entry (its script's folder or cwd) and without what its PYTHONPATH added."""
    own = {os.path.abspath(p) for p in _entries(os.environ.get("PYTHONPATH"))}
    return [p for p in sys.path[1:] if p and os.path.abspath(p) not in own]


def _editable_spec():
    """The spec an editable install's import hook (set up by a .pth file at startup, in every python) gives."""
    for finder in sys.meta_path:
        if type(finder).__module__.startswith("__editable__") or getattr(finder, "__module__", "").startswith(
                "__editable__"):
            spec = finder.find_spec("sweeper", None)
            if spec is not None:
                return spec
    return None


def finds_sweeper(entries: list[str]) -> bool:
    """Whether a python with these PYTHONPATH entries imports THIS sweeper package without help."""
    spec = importlib.machinery.PathFinder.find_spec("sweeper", [*entries, *_interpreter_path()]) or _editable_spec()
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(Path(p).resolve() == PACKAGE for p in spec.submodule_search_locations)


def sweeper_entries(entries: list[str], inherited: str | None = None) -> list[str]:
    """[] when a run with these PYTHONPATH entries (then the inherited ones) finds sweeper, else [IMPORT_DIR]."""
    if finds_sweeper([*entries, *_entries(inherited if inherited is not None else os.environ.get("PYTHONPATH"))]):
        return []
    return [str(link_dir())]


def run_entries(cwd: str, inherited: str | None = None) -> str:
    """The PYTHONPATH entries a run gets before the inherited ones: its cwd, and IMPORT_DIR only when needed."""
    first = [cwd] if cwd else []
    return os.pathsep.join([*first, *sweeper_entries(first, inherited)])


def link_dir() -> Path:
    """IMPORT_DIR with its links (relative: a moved checkout keeps working), made once; UsageError if it cannot."""
    try:
        IMPORT_DIR.mkdir(parents=True, exist_ok=True)
        for name in LINKED:
            link, target = IMPORT_DIR / name, os.path.relpath(PACKAGE.parent / name, IMPORT_DIR)
            if os.path.islink(link) and os.readlink(link) == target:
                continue
            tmp = IMPORT_DIR / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            os.symlink(target, tmp)
            os.replace(tmp, link)
    except OSError as e:
        raise UsageError(f"sweeper is not installed in this Python ({sys.executable}) and runs cannot import it "
                         f"from {PACKAGE.parent} ({e.strerror}): install it (pip install -e {PACKAGE.parent}) or put "
                         f"that folder on PYTHONPATH") from None
    return IMPORT_DIR
