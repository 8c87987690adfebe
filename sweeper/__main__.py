"""python -m sweeper +experiment=NAME seeds=0-3: plan, launch and report a seed sweep (sweeper.cli.main)."""
import os
import signal
import sys

INTERRUPTED = 130


def _exit_interrupted() -> None:
    """Exit 130 without sys.exit: an interrupt that surfaced through code CPython ran via PyRun_* (Hydra's
    composition, some imports) leaves its "unhandled KeyboardInterrupt" flag set even though we caught it, and
    the interpreter would then kill itself with SIGINT at exit (status -2, not 130). Nothing is left to clean up
    here: the pool has stopped its children and every file is written."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)


signal.signal(signal.SIGTERM, signal.default_int_handler)   # SIGTERM during the imports: KeyboardInterrupt too
try:
    from sweeper.cli import main
except KeyboardInterrupt:
    print("sweeper: interrupted; nothing was started; run the same command again", file=sys.stderr)
    _exit_interrupted()

code = main()
if code == INTERRUPTED:
    _exit_interrupted()
sys.exit(code)
