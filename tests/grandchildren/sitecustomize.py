"""Test fixture, active only when a test puts this folder on PYTHONPATH and sets SWEEPER_TEST_GRANDCHILDREN=1.

Every run of the built-in trainer (`python -m sweeper.run sweeper.train:main RUN_DIR`) then leaves two descendants, like
a
data-loading stack that does not clean up:
  1. a forked worker in the run's process group that ignores SIGTERM and SIGINT (a stuck DataLoader worker);
  2. a daemon in its own session (outside the run's process group) that ignores SIGTERM, with RUN_DIR in its
     command line.
The launcher must still leave no process behind.
"""
import os
import signal
import subprocess
import sys
import time


def _args() -> list:
    with open("/proc/self/cmdline", "rb") as f:
        return f.read().split(b"\0")


if os.environ.get("SWEEPER_TEST_GRANDCHILDREN") == "1":
    args = _args()
    if b"-m" in args and b"sweeper.run" in args and args.index(b"sweeper.run") + 2 < len(args):
        run_dir = args[args.index(b"sweeper.run") + 2].decode()
        if os.fork() == 0:          # the stuck worker: never returns into the interpreter's startup
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            while True:
                time.sleep(1)
        subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)", run_dir], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
