"""Graceful stop: SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 ask the loop to checkpoint at the next step boundary.

    with StopRequest() as stop:               # sweeper.run.init() installs one for every run
        for step in ...:
            if stop.requested: save a checkpoint, write status "interrupted", return

The launcher's Ctrl-C handling and Slurm preemption (submitit forwards its signal) both go through this.
A second Ctrl-C (SIGINT) while stopping is not caught again: the default action (termination) applies.
Repeated SIGTERM/SIGUSR1/SIGUSR2 change nothing (Slurm signals every process of a job, and the Slurm task
forwards its own signal too): re-arming their default action would kill the run before its checkpoint.
"""
from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


class StopRequest:
    def __init__(self):
        self.requested: str | None = None
        self._previous: dict = {}

    def _handle(self, signum, _frame):
        self.requested = self.requested or signal.Signals(signum).name
        signal.signal(signal.SIGINT, signal.SIG_DFL)    # a second Ctrl-C terminates at once

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
