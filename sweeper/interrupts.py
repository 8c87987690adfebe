"""Ctrl-C and SIGTERM in the sweeper's own process: one KeyboardInterrupt, at a moment that loses nothing.

    install()                        # SIGINT and SIGTERM raise KeyboardInterrupt once; later ones are ignored
    with deferred_interrupts():      # a signal here is held until the block is done (e.g. taking the lock)
        ...
    with held_interrupts() as pending:   # answered between steps: pending.check() (writing 10,000 run dirs)
        ...
    report = in_worker(hook, config)     # native code (torch) in a worker: Ctrl-C answered at once, in Python

`python -m sweeper` calls install() first thing, so Ctrl-C or SIGTERM at any moment (composing, writing the
plan, taking the lock, preflight, launching, reporting) ends in one KeyboardInterrupt that sweeper.cli.sweep turns
into one line and exit status 130. The local pool installs its own handlers while it runs (sweeper.backends.local.pool)
and
restores these afterwards. Only the main thread can set handlers; elsewhere both are no-ops.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED = 130                   # the exit status after Ctrl-C / SIGTERM
_fired = threading.Event()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_once(signum, frame) -> None:
    for sig in SIGNALS:             # a second Ctrl-C while the first unwinds must not raise in the handler
        signal.signal(sig, signal.SIG_IGN)
    _fired.set()
    raise KeyboardInterrupt


def fired() -> bool:
    """Whether install()'s handler has raised its KeyboardInterrupt: a library that caught it and raised
    another error instead (OmegaConf, interrupted while building a config, raises AttributeError) is still
    an interrupt to sweeper.cli.sweep."""
    return _fired.is_set()


def exit_with(code: int):
    """sys.exit(code) for a `python -m` entry point, except after an interrupt: exit 130 with os._exit.
    An interrupt that surfaced through code CPython ran via PyRun_* (Hydra's composition, some imports) leaves
    its "unhandled KeyboardInterrupt" flag set even though we caught it, and the interpreter would then kill
    itself with SIGINT at exit (status -2, not 130). Nothing is left to clean up by then: the pool has stopped
    its children and every file is written. The work is done by then, so a Ctrl-C that lands now is ignored
    (else it would raise during the interpreter's shutdown: status -2), and one that landed after the command's
    last step exits with the command's own status, the same way."""
    quiet()
    if code == INTERRUPTED or fired():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def start(prog: str, load) -> None:
    """The whole of a `python -m` command's module: `start("sweeper", lambda: import_main())`. Ctrl-C or
    SIGTERM while its imports run (Hydra, OmegaConf, which may swallow the interrupt into their own error) is
    one line and exit 130; then main()'s exit status, through exit_with."""
    install()
    try:
        main = load()
    except BaseException:
        if fired():
            print(f"{prog}: interrupted; nothing was started; run the same command again", file=sys.stderr)
            exit_with(INTERRUPTED)
        raise
    try:
        code = main()
    except KeyboardInterrupt:            # Ctrl-C in the instant between main's own handling and the exit
        code = INTERRUPTED
    exit_with(code)


def install() -> None:
    if _main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _raise_once)


def quiet() -> None:
    """Ignore further SIGINT/SIGTERM (while the process prints its last line and exits)."""
    if _main_thread():
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def in_worker(fn, *args, **kwargs):
    """fn(*args, **kwargs) in a worker thread while this (main) thread waits: Ctrl-C / SIGTERM raise their
    KeyboardInterrupt here, in the wait (pure Python), at once, never inside fn. For work that runs native code:
    importing torch, a user's preflight hook (a model's forward and backward, C++ thread pools, pybind11
    callbacks): a KeyboardInterrupt raised from there can end the process by SIGABRT (exit -6) with a traceback.
    After an interrupt the worker is left to the process's exit (a daemon thread; exit_with ends the process
    with os._exit). fn's result is returned, its exception raised here. Off the main thread: a plain call."""
    if not _main_thread():
        return fn(*args, **kwargs)
    done: dict = {}

    def work():
        try:
            done["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread, raised there
            done["error"] = e

    worker = threading.Thread(target=work, name=f"sweeper-{getattr(fn, '__name__', 'work')}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)               # a signal's handler runs here: the KeyboardInterrupt is raised here
    if "error" in done:
        raise done["error"]
    return done["value"]


class Pending:
    """What held_interrupts() yields: check() raises KeyboardInterrupt at a safe point once a signal came."""

    def __init__(self):
        self.got: list[int] = []

    def check(self) -> None:
        if self.got:
            self.got.clear()
            raise KeyboardInterrupt


@contextmanager
def held_interrupts():
    """Hold SIGINT/SIGTERM while the block runs, and answer them where the block says it is safe: a long loop of
    small atomic steps (writing 10,000 run dirs) calls pending.check() between steps, so Ctrl-C is answered within
    one step, never in the middle of one. One still pending when the block ends is raised then.

        with held_interrupts() as pending:
            for run in runs:
                pending.check()
                write(run)
    """
    pending = Pending()
    if not _main_thread():
        yield pending
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.got.append(signum)) for sig in SIGNALS}
    try:
        yield pending
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending.got and previous[signal.SIGINT] is not signal.SIG_IGN:
        raise KeyboardInterrupt


@contextmanager
def deferred_interrupts():
    """Hold SIGINT/SIGTERM until the block ends, then raise KeyboardInterrupt (if one came)."""
    if not _main_thread():
        yield
        return
    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if got:
        if previous[signal.SIGINT] is signal.SIG_IGN:
            return                   # interrupts were off around this block (already stopping)
        raise KeyboardInterrupt
