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
import os
import sys
from typing import Callable

from sweeper import interrupts
from sweeper.errors import UsageError, attempted, os_error_line, unicode_line, yaml_problem
from sweeper.pasted import pasted
from sweeper.run.files.reading import UnreadableFile
from sweeper.undecodable import RAW_OR_ESCAPE


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one UsageError line (exit 2 through run_command), like every sweeper error."""

    def error(self, message: str):
        raise UsageError(message)


def debugging(argv: list[str]) -> bool:
    return os.environ.get("SWEEPER_DEBUG", "") not in ("", "0") or "--debug" in argv


def interrupted(prog: str, sweep_dir=None) -> int:
    """The one line after Ctrl-C / SIGTERM, and exit status 130."""
    interrupts.quiet()
    resume = pasted("python", "-m", "sweeper.resume", sweep_dir) if sweep_dir is not None else ""
    where = (f"finished runs are kept. Resume with the same command or `{resume}`"
             if sweep_dir is not None else "nothing was started; run the same command again")
    print(f"{prog}: interrupted; {where}", file=sys.stderr, flush=True)
    return interrupts.INTERRUPTED


def one_line(text: str) -> str:
    """A message on one line whatever a value in it holds: control characters (a newline or carriage return in
    an override, a damaged file's bytes) are shown escaped."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _tolerant_streams() -> None:
    """stdout/stderr write undecodable bytes of a path back as those bytes, any other lone surrogate (a damaged
    file's) as an escape (sweeper.undecodable)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors=RAW_OR_ESCAPE)
        except (AttributeError, ValueError, OSError):    # not a text file (a test's StringIO): nothing to change
            pass


def run_command(prog: str, body: Callable[[list[str], dict], int], argv: list[str] | None = None) -> int:
    """Run body(argv, state) behind the boundary; the exit status."""
    interrupts.install()
    _tolerant_streams()
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
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return UsageError.exit_code
    line = yaml_problem(e)
    if line is not None:
        print(f"{prog}: error: {one_line(line)}", file=sys.stderr)
        return UsageError.exit_code
    if isinstance(e, UnicodeDecodeError):
        print(f"{prog}: error: {one_line(unicode_line(e))}", file=sys.stderr)
        return UsageError.exit_code
    if isinstance(e, OSError):
        print(f"{prog}: error: {one_line(os_error_line(e))}", file=sys.stderr)
        return 1
    if isinstance(e, RuntimeError) and str(e).startswith("Symlink loop from "):    # pathlib's resolve()
        print(f"{prog}: error: {one_line(str(e).removeprefix('Symlink loop from '))}: a symbolic link in it points "
              f"back at itself: fix the link or choose another path", file=sys.stderr)
        return UsageError.exit_code
    if isinstance(e, ValueError) and "null byte" in str(e):    # a path given with a NUL in it (os, pathlib)
        _, where = attempted(e)
        print(f"{prog}: error: {one_line(where or 'a path')}: a path cannot hold a NUL byte (\\x00); remove it",
              file=sys.stderr)
        return UsageError.exit_code
    print(f"{prog}: internal error: {type(e).__name__}: {(str(e).splitlines() or [''])[0]} "
          f"(a bug in sweeper; SWEEPER_DEBUG=1 shows the traceback)", file=sys.stderr)
    return 1
