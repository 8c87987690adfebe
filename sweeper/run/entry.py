"""`python -m sweeper.run MODULE:FUNCTION RUN_DIR`: one run of an entry point, FUNCTION(run), in this process.

    python -m sweeper.run sweeper.train:main sweeps/rope-1a2b/runs/rope/seed_0     # what task.entry launches
    python -m sweeper.run my_pkg.train:main runs/debug                     # by hand (RUN_DIR/config.yaml)

FUNCTION gets the `sweeper.run.Run`; it ends the run with run.finish(...) (or returns a mapping of final
metrics, which is the same). Exit status: 0 finished or diverged (also when RUN_DIR had already finished),
75 stopped by a signal with a checkpoint saved (run again to resume), 2 an entry point that does not import,
a bad config (sweeper.run.ConfigError) or a refused resume, 1 a crash (traceback in the log, status "failed").
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import traceback
from collections.abc import Mapping
from typing import Callable

from sweeper.run import ConfigError, FingerprintMismatch, init
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import EXIT_CONFIG, EXIT_INTERRUPTED, Status
from sweeper.run.observed.folder_watch import FolderWatch
from sweeper.run.observed.provenance import set_script

ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def load_entry(entry: str) -> Callable:
    """The function an entry point "package.module:function" names; ImportError/ValueError say what is wrong."""
    if not ENTRY.match(entry):
        raise ValueError(f"{entry!r} is not an entry point: expected package.module:function")
    module_name, _, attr = entry.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{entry!r}: module {module_name} has no function {attr}")
    return fn


CALLED_WITH = {"entry": "run", "validate": "config", "preflight": "config"}   # what sweeper passes each hook


def call_problem(fn: Callable, key: str, entry: str) -> str | None:
    """Why sweeper cannot call `fn` (task.KEY=entry) as it does, or None: task.entry as fn(run), task.validate as
    fn(config) (or fn(config, launcher=...) when it has a `launcher` parameter), task.preflight as fn(config).
    A coroutine or generator function is refused too (calling it would run nothing). Checked at plan time (the
    task's import probe, sweeper.config.task), so a wrong signature is one line, not a failure of every run."""
    what = CALLED_WITH[key]
    name = getattr(fn, "__name__", entry.rpartition(":")[2])
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return (f"task.{key}={entry!r}: {name} is an async function; sweeper calls it as {name}({what}) and would "
                f"get a coroutine that never runs: make it a plain def (run asyncio.run(...) inside it)")
    if inspect.isgeneratorfunction(fn):
        return (f"task.{key}={entry!r}: {name} is a generator function (it yields); sweeper calls it as "
                f"{name}({what}), which would run none of its body: make it a plain function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None                   # a builtin or C function: no signature to check
    launcher = key == "validate" and "launcher" in sig.parameters
    try:
        sig.bind(object(), **({"launcher": {}} if launcher else {}))
    except TypeError as e:
        call = f"{name}({what}{', launcher=...' if launcher else ''})"
        return (f"task.{key}={entry!r}: {name}{sig} cannot be called as {call} ({e}); sweeper calls it with the "
                f"{what} only: def {name}({what}{', launcher=None' if key == 'validate' else ''}): ...")
    return None


def run_entry(entry: str, run_dir: str) -> int:
    try:
        fn = load_entry(entry)
    except Exception as e:  # noqa: BLE001 - whatever the import raised, the run fails with it named
        traceback.print_exc()
        RunDir(run_dir).update_status(Status.FAILED, error=f"entry point {entry} does not load: "
                                      f"{type(e).__name__}: {e}", exit_code=EXIT_CONFIG)
        return EXIT_CONFIG
    set_script(_source_file(fn))                  # the code it runs, for its summary (sweeper.run.observed.provenance)
    watch = FolderWatch(run_dir)                  # what it changes outside its run dir (isolation.json)
    try:
        return _run(fn, entry, run_dir)
    finally:
        watch.done()


def _source_file(fn: Callable) -> str | None:
    try:
        return inspect.getsourcefile(fn)
    except TypeError:                             # a builtin: no file of the user's
        return None


def _run(fn: Callable, entry: str, run_dir: str) -> int:
    try:
        run = init(run_dir, record_crashes=False)
    except (ConfigError, UnreadableFile) as e:
        print(f"sweeper.run: error: {e}", file=sys.stderr)
        RunDir(run_dir).update_status(Status.FAILED, error=str(e), exit_code=EXIT_CONFIG)
        return EXIT_CONFIG
    if run.finished:
        print(f"{run_dir}: already {run.outcome.value}; nothing to do", flush=True)
        return 0
    try:
        result = fn(run)
        if run.outcome is None:
            if isinstance(result, Mapping):
                run.finish(result)
            else:
                run.fail(f"entry point {entry} returned {type(result).__name__} without calling run.finish(); "
                         f"end it with run.finish(metric=value) or return a dict of final metrics")
                print(f"sweeper.run: error: entry point {entry} returned without finishing the run", file=sys.stderr)
                return 1
    except (ConfigError, FingerprintMismatch) as e:
        run.fail(str(e), EXIT_CONFIG)
        print(f"sweeper.run: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except Exception as e:  # noqa: BLE001 - the user's code crashed: record it, the launcher decides on retries
        traceback.print_exc()
        run.fail(f"{type(e).__name__}: {e}".splitlines()[0], 1)
        return 1
    finally:
        run.close()
    return EXIT_INTERRUPTED if run.outcome is Status.INTERRUPTED else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print("usage: python -m sweeper.run MODULE:FUNCTION RUN_DIR   (RUN_DIR/config.yaml holds the run's config)",
              file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"sweeper.run: error: {argv[1]}: no such run dir (a folder holding the run's config.yaml)",
              file=sys.stderr)
        return 2
    try:
        return run_entry(argv[0], argv[1])
    except (OSError, UnicodeDecodeError, UnreadableFile) as e:   # the run dir itself: not the entry's own error
        if os.environ.get("SWEEPER_DEBUG", "") not in ("", "0"):
            raise
        where = getattr(e, "filename", None) or argv[1]
        what = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        print(f"sweeper.run: error: {where}: {what} (SWEEPER_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 2 if isinstance(e, (UnicodeDecodeError, UnreadableFile)) else 1
