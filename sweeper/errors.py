"""The one error type for bad input (UsageError: one line, exit status 2), and how a fault is told in one line.

    raise UsageError("train.steps='abc': expected an integer")
    os_error_line(e)      # `creating the folder sweeps/x: Read-only file system; the file system is read-only: ...`
    unicode_line(e)       # `sweeps/journal.jsonl is not UTF-8 text (byte 0xff at offset 12); restore it, ...`

An OSError says what failed on which path and the fix; when it names no path (f.write() on a full disk) and
for a UnicodeDecodeError, the path and the operation are read from the traceback (attempted()).
"""
from __future__ import annotations

import errno
import linecache
import os
import re
import sys


class UsageError(ValueError):
    """Bad input: the message names the key or value and says what is accepted."""

    exit_code = 2


FIXES = {errno.EACCES: "check its permissions (or run from a folder you can write)",
         errno.EPERM: "check its permissions (or run from a folder you can write)",
         errno.EROFS: "the file system is read-only: use a writable folder (a sweep: run from one or set sweeper.dir)",
         errno.ENOSPC: "the disk is full: free some space, then run the same command again (finished work is kept)",
         errno.EDQUOT: "the disk quota is used up: free some space, then run the same command again",
         errno.ENAMETOOLONG: "a name in it is too long for the file system: use a shorter name",
         errno.ENOENT: "it does not exist: check the path",
         errno.ENOTDIR: "a part of it is a file, not a folder: check the path",
         errno.EISDIR: "it is a folder, not a file: check the path",
         errno.ELOOP: "a symbolic link in it points back at itself: fix the link or choose another path"}


# What a failing call was doing, by the name it is called with in the innermost frames' source lines.
ACTIONS = (("makedirs", "creating the folder"), ("mkdir", "creating the folder"), ("mkstemp", "creating a file in"),
           ("mkdtemp", "creating a folder in"), ("rmtree", "removing"), ("unlink", "removing"),
           ("replace", "replacing"), ("rename", "renaming"), ("savefig", "writing"), ("write", "writing"),
           ("fsync", "writing"), ("truncate", "writing"), ("flock", "locking"), ("chmod", "changing the mode of"),
           ("read", "reading"), ("load", "reading"), ("open", "opening"), ("stat", "looking up"),
           ("scandir", "listing"), ("listdir", "listing"), ("iterdir", "listing"), ("glob", "listing"))
PATH_LOCALS = ("full_path", "path", "tmp", "filename", "file", "target", "log_path", "folder", "out_dir",
               "sweep_dir", "run_dir", "root")


def _frames(e: BaseException):
    """(frame, the line it was at when e passed through) of e's traceback, innermost first."""
    tb, frames = e.__traceback__, []
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return reversed(frames)


def attempted(e: BaseException) -> tuple[str | None, str | None]:
    """(what the failing call was doing, the path it worked on) read from the traceback: the innermost source
    line that calls a known file operation, and the innermost frame's local naming a path (an OSError of
    f.write() or a UnicodeDecodeError carries no file name)."""
    what = where = None
    for frame, lineno in _frames(e):
        if what is None:
            line = linecache.getline(frame.f_code.co_filename, lineno)
            what = next((w for name, w in ACTIONS if re.search(rf"\b{name}\w*\(", line)), None)
        if where is None:
            where = next((str(frame.f_locals[n]) for n in PATH_LOCALS
                          if isinstance(frame.f_locals.get(n), (str, os.PathLike)) and str(frame.f_locals[n])), None)
        if what and where:
            break
    return what, where


def os_error_line(e: OSError) -> str:
    """`creating the folder sweeps/x: Read-only file system; the file system is read-only: run from ...`"""
    what, found = attempted(e)
    where = e.filename if e.filename is not None else found
    temp = re.fullmatch(r"(.*/)?\.(.+?)(\.[^./]{8})?\.tmp", str(where or ""))   # an atomic write's temporary file
    if temp:
        what, where = "writing", f"{temp.group(1) or ''}{temp.group(2)}"
    error = e.strerror or type(e).__name__
    fix = FIXES.get(e.errno, "")
    head = " ".join(str(p) for p in (what if what and where else None, where) if p)
    return f"{head + ': ' if head else ''}{error}" + (f"; {fix}" if fix else "")


def unicode_line(e: UnicodeDecodeError) -> str:
    """A file that is not UTF-8 text, named when the traceback says which."""
    _, where = attempted(e)
    return (f"{where or 'a file'} is not UTF-8 text ({not_text(e)}); restore it, or save it as UTF-8 "
            f"(SWEEPER_DEBUG=1 shows where it was read)")


def not_text(e: UnicodeDecodeError) -> str:
    """Where a file stops being UTF-8 text: `byte 0xff at offset 40`."""
    bad = e.object[e.start:e.start + 1] if isinstance(e.object, (bytes, bytearray)) else b""
    return f"byte 0x{bad.hex() or '??'} at offset {e.start}"


def chain(e: BaseException | None, depth: int = 8):
    """e and the exceptions it was raised from (its __cause__ / __context__), at most `depth`."""
    while e is not None and depth:
        yield e
        e, depth = e.__cause__ or e.__context__, depth - 1


def yaml_problem(e: BaseException) -> str | None:
    """A YAML error (in e or what it was raised from) as one line naming the file and the line:
    `conf/experiment/x.yaml, line 4: not valid YAML (found duplicate key name; while constructing a mapping at
    line 3)`; None when there is none. yaml is looked up only if something loaded it."""
    yaml = sys.modules.get("yaml")
    found = next((c for c in chain(e) if yaml is not None and isinstance(c, yaml.YAMLError)), None)
    if found is None:
        return None
    mark, context = getattr(found, "problem_mark", None), getattr(found, "context_mark", None)
    name = mark.name if mark is not None else (context.name if context is not None else None)
    where = f"{name}, line {(mark or context).line + 1}" if name and name != "<unicode string>" else (
        f"a YAML value, line {(mark or context).line + 1}" if mark or context else "a YAML file")
    problem = getattr(found, "problem", None) or (str(found).splitlines() or [type(found).__name__])[0]
    if getattr(found, "context", None):
        problem += f"; {found.context}" + (f" at line {context.line + 1}" if context is not None else "")
    return f"{where}: not valid YAML ({' '.join(problem.split())})"
