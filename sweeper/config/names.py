"""Names that become paths: experiment.name (sweeps/<name>-<hash>) and variant names (runs/<variant>/seed_<k>).

    check_name("experiment.name", "rope")     # UsageError: not a name, only dots, or longer than MAX_NAME
    shorten("x" * 300)                        # "'xxxxxxxxxxxxxxxxxxxx...' (300 characters)": a long value in a message

A file or folder name may have at most NAME_MAX = 255 bytes on Linux file systems (ext4, xfs, btrfs, tmpfs).
sweeper adds at most ADDED = 20 characters to a name it writes: `compare_vs_<experiment>-<8 hex>` (a comparison
written beside another sweep) and `.<variant>.json.<8 chars>.tmp` (the temporary file of a preflight report).
So a name has at most MAX_NAME = 235 characters, all ASCII (letters, digits, '_', '-', '.'), not only dots.
The folders a plan creates (sweeper.dir) are checked against the file system's own limits by
sweeper.plan.paths before anything is written.
"""
from __future__ import annotations

import re

from sweeper.errors import UsageError

NAME_MAX = 255                 # bytes in one file name (Linux file systems)
ADDED = 20                     # the most sweeper adds to a name (see the docstring)
MAX_NAME = NAME_MAX - ADDED    # the documented limit of experiment.name and variant names
NAME = re.compile(r"[A-Za-z0-9_.-]+")


def shorten(value, keep: int = 40) -> str:
    """A value for a one-line message: repr, cut after `keep` characters with its length named."""
    text = str(value)
    return repr(text) if len(text) <= keep else f"{text[:keep]!r}... ({len(text)} characters)"


def check_name(key: str, value, what: str) -> None:
    """UsageError when `value` cannot name a folder: `what` says which (e.g. "the sweep dir sweeps/<name>-<hash>")."""
    text = str(value)
    if not NAME.fullmatch(text) or set(text) == {"."}:
        raise UsageError(
            f"{key}={shorten(text)}: must be a name of letters, digits, '_', '-' and '.' (not only dots): it "
            f"names {what}"
        )
    if len(text) > MAX_NAME:
        raise UsageError(
            f"{key}={shorten(text)}: at most {MAX_NAME} characters (it names {what}; a file system "
            f"allows {NAME_MAX} per name and sweeper adds up to {ADDED}): use a shorter name"
        )
