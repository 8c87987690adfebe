"""Graceful stop: SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 ask the loop to checkpoint at the next step boundary.

    with StopRequest() as stop:
        for step in ...:
            if stop.requested: save a checkpoint, write status "interrupted", return

The launcher's Ctrl-C handling and Slurm preemption (submitit forwards its signal) both go through this.
A second signal while stopping is not caught again: the default action (termination) applies.
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
        self.requested = signal.Signals(signum).name
        for sig in STOP_SIGNALS:      # a second signal terminates at once
            signal.signal(sig, signal.SIG_DFL)

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
