"""The one error boundary of every command: `sys.exit(run_command("sweeper.report", body, argv))`.

    def body(argv: list[str], state: dict) -> int: ...      # raise UsageError for bad input; set
    #                                                         state["sweep_dir"] once a sweep dir is in use
    raise SystemExit(run_command("sweeper.resume", body))

What the user sees, and the exit status, for whatever a command raises, printed once, on one line:
    UsageError (bad input), UnreadableFile (a damaged file, named), YAML and
    text-encoding errors of a file given                                       `PROG: error: ...`        2
    Ctrl-C / SIGTERM (or a library's error raised in place of our interrupt)    `PROG: interrupted; ...`  130
    OSError (a path we cannot read or write: permissions, disk full, ...)       `PROG: error: ...`        1
    anything else (a bug of ours)                                               `PROG: internal error:`   1
SWEEPER_DEBUG=1 (or --debug on the command line) re-raises, so the traceback shows.
"""
from __future__ import annotations

import argparse
import errno
import linecache
import os
import re
import sys
from typing import Callable

from sweeper import interrupts
from sweeper.config.hydra_errors import yaml_problem
from sweeper.errors import UsageError
from sweeper.run.rundir import UnreadableFile, not_text

FIXES = {errno.EACCES: "check its permissions (or run from a folder you can write)",
         errno.EPERM: "check its permissions (or run from a folder you can write)",
         errno.EROFS: "the file system is read-only: run from a writable folder or set sweeper.dir",
         errno.ENOSPC: "the disk is full: free some space, then run the same command again (finished work is kept)",
         errno.EDQUOT: "the disk quota is used up: free some space, then run the same command again",
         errno.ENAMETOOLONG: "a name in it is too long for the file system: use a shorter name",
         errno.ENOENT: "it does not exist: check the path",
         errno.ENOTDIR: "a part of it is a file, not a folder: check the path",
         errno.EISDIR: "it is a folder, not a file: check the path"}


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one UsageError line (exit 2 through run_command), like every sweeper error."""

    def error(self, message: str):
        raise UsageError(message)


def debugging(argv: list[str]) -> bool:
    return os.environ.get("SWEEPER_DEBUG", "") not in ("", "0") or "--debug" in argv


def interrupted(prog: str, sweep_dir=None) -> int:
    """The one line after Ctrl-C / SIGTERM, and exit status 130."""
    interrupts.quiet()
    where = (f"finished runs are kept. Resume with the same command or `python -m sweeper.resume {sweep_dir}`"
             if sweep_dir is not None else "nothing was started; run the same command again")
    print(f"{prog}: interrupted; {where}", file=sys.stderr, flush=True)
    return interrupts.INTERRUPTED


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
    """The frames of e's traceback, innermost first."""
    tb, frames = e.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return reversed(frames)


def attempted(e: BaseException) -> tuple[str | None, str | None]:
    """(what the failing call was doing, the path it worked on) read from the traceback: the innermost source
    line that calls a known file operation, and the innermost frame's local naming a path (an OSError of
    f.write() or a UnicodeDecodeError carries no file name)."""
    what = where = None
    for frame in _frames(e):
        if what is None:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
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
    error = e.strerror or type(e).__name__
    fix = FIXES.get(e.errno, "")
    head = " ".join(str(p) for p in (what if what and where else None, where) if p)
    return f"{head + ': ' if head else ''}{error}" + (f"; {fix}" if fix else "")


def unicode_line(e: UnicodeDecodeError) -> str:
    """A file that is not UTF-8 text, named when the traceback says which."""
    _, where = attempted(e)
    return (f"{where or 'a file'} is not UTF-8 text ({not_text(e)}); restore it, or save it as UTF-8 "
            f"(SWEEPER_DEBUG=1 shows where it was read)")


def run_command(prog: str, body: Callable[[list[str], dict], int], argv: list[str] | None = None) -> int:
    """Run body(argv, state) behind the boundary; the exit status."""
    interrupts.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    state: dict = {}
    debug = debugging(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        return body(argv, state)
    except KeyboardInterrupt:
        return interrupted(prog, state.get("sweep_dir"))
    except Exception as e:
        if interrupts.fired():        # a library (OmegaConf, Hydra) turned our KeyboardInterrupt into its error
            return interrupted(prog, state.get("sweep_dir"))
        if debug:
            raise
        return report_error(prog, e)


def report_error(prog: str, e: Exception) -> int:
    """Print the one line for an error raised by a command; its exit status."""
    if isinstance(e, (UsageError, UnreadableFile)):     # bad input, or a damaged file named with its fix
        print(f"{prog}: error: {e}", file=sys.stderr)
        return UsageError.exit_code
    line = yaml_problem(e)
    if line is not None:
        print(f"{prog}: error: {line}", file=sys.stderr)
        return UsageError.exit_code
    if isinstance(e, UnicodeDecodeError):
        print(f"{prog}: error: {unicode_line(e)}", file=sys.stderr)
        return UsageError.exit_code
    if isinstance(e, OSError):
        print(f"{prog}: error: {os_error_line(e)}", file=sys.stderr)
        return 1
    print(f"{prog}: internal error: {type(e).__name__}: {(str(e).splitlines() or [''])[0]} "
          f"(a bug in sweeper; SWEEPER_DEBUG=1 shows the traceback)", file=sys.stderr)
    return 1
