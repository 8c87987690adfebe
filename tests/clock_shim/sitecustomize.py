"""A clock shim for tests (issue 40): the wall clock (time.time) of every Python process started with this folder
on PYTHONPATH steps by CLOCK_SHIM_STEP_S seconds, one second after the file CLOCK_SHIM_FILE appears (its mtime),
as a laptop resumed from sleep or an NTP correction does; time.monotonic is left alone.

    env = {"PYTHONPATH": "tests/clock_shim:...", "CLOCK_SHIM_FILE": "/tmp/x/step", "CLOCK_SHIM_STEP_S": "-86400"}
"""
import os
import time

_FILE, _STEP = os.environ.get("CLOCK_SHIM_FILE"), float(os.environ.get("CLOCK_SHIM_STEP_S") or 0)
if _FILE and _STEP:
    _real = time.time

    def _shifted() -> float:
        now = _real()
        try:
            stepped = now > os.stat(_FILE).st_mtime + 1.0
        except OSError:
            stepped = False
        return now + _STEP if stepped else now

    time.time = _shifted
