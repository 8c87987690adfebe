"""The cause and the fix of an import error in a run, appended to its failure message (sweeper.backends.failures).

    import_hint("ImportError: cannot import name 'CUDAProperties' from 'kernels' (/ckpt/kernels/__init__.py)")
    # -> "'kernels' came from /ckpt/kernels/__init__.py: ... rename that folder or ..."

A run imports what `python script.py` started in task.cwd would: the script's folder and task.cwd, then
PYTHONPATH, then the packages installed in the Python that runs sweeper (sweeper.config.import_path). An import
error there has one of two causes: a folder or file of that name found first (the project's own, or one on
PYTHONPATH) shadows the installed package, or the package is not installed in that Python.
"""
from __future__ import annotations

import re
import sys

_SHADOWED = re.compile(r"cannot import name '([^']+)' from '([^']+)' \(([^)]+)\)")
_MISSING = re.compile(r"No module named '([^']+)'")


def import_hint(message: str) -> str:
    """A sentence naming the cause and the fix of an ImportError / ModuleNotFoundError message; '' for others."""
    shadowed = _SHADOWED.search(message)
    if shadowed:
        name, module, where = shadowed.groups()
        top = module.split(".")[0]
        if re.search(r"[/\\](site|dist)-packages[/\\]", where):
            return (f"the installed '{module}' ({where}) has no '{name}': the code expects another version of "
                    f"it; install that one in {sys.executable}")
        return (f"'{module}' was imported from {where}, which has no '{name}': a folder or file named '{top}' "
                f"found first (in the script's folder, task.cwd or PYTHONPATH) shadows the installed package; "
                f"rename it or take its folder off PYTHONPATH")
    missing = _MISSING.search(message)
    if missing:
        top = missing.group(1).split(".")[0]
        return (f"'{top}' is neither in the script's folder, task.cwd nor PYTHONPATH, nor installed in "
                f"{sys.executable}: install it there (pip install ...) or set task.cwd to the folder that holds it")
    return ""
