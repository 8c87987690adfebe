"""Commands the product prints for a user to paste into a shell, each word shell-quoted (shlex.quote): a sweep
dir named `sw $(touch X) x` prints as `'sw $(touch X) x'`, which a shell passes on as one word and never runs.

    print(f"resume with `{pasted('python', '-m', 'sweeper.resume', sweep_dir)}`")
"""
from __future__ import annotations

import os
import shlex


def pasted(*words: object) -> str:
    """The words as one shell command line, each quoted where it needs it (paths as str, surrogates kept)."""
    return " ".join(shlex.quote(os.fspath(w) if isinstance(w, os.PathLike) else str(w)) for w in words)
