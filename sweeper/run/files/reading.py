"""Reading the run contract's JSON files: the parsed value, or UnreadableFile naming the file, why, and the fix.

    raw = load_json_file(path, "run status", "delete it")      # None when the file does not exist
    record = json_object(raw, path, "run status", "delete it")  # the dict, or UnreadableFile: not an object
    raise UnreadableFile(path, "the run's config is missing", "restore it")   # "PATH: why; fix"

RunDir, the manifest and isolation read their JSON through these; other files' owners (looks, the journal, the Slurm
record) raise UnreadableFile too.
A file is never read through a symbolic link (sweeper.run.files.atomic.open_nofollow). Readers that must go on
(the report) catch UnreadableFile and show its message, never silently skip the run. Pure Python.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sweeper.errors import not_text
from sweeper.run.files.atomic import open_nofollow


class UnreadableFile(ValueError):
    """A contract file exists but cannot be used; the message names the file, why, and what to do."""

    def __init__(self, path: Path, why: str, fix: str = ""):
        self.path, self.why = Path(path), why
        super().__init__(f"{path}: {why}" + (f"; {fix}" if fix else ""))


def load_json_file(path: Path, what: str, fix: str = "") -> Any:
    """The parsed file, None when it does not exist; UnreadableFile when it exists but is not JSON."""
    try:
        with os.fdopen(open_nofollow(path, os.O_RDONLY), encoding="utf-8") as f:   # never through a link
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UnreadableFile(path, f"cannot read the {what} ({e.strerror})", fix) from None
    except UnicodeDecodeError as e:
        raise UnreadableFile(path, f"the {what} is not UTF-8 text ({not_text(e)})", fix) from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise UnreadableFile(path, f"the {what} is not valid JSON ({e.msg} at line {e.lineno})", fix) from None


def json_object(value: Any, path: Path, what: str, fix: str) -> dict:
    if not isinstance(value, dict):
        raise UnreadableFile(path, f"the {what} is not a JSON object", fix)
    return value
