"""Ctrl-C during the baseline's health preflight (issue 40): the preflight imports torch and runs the model's
forward and backward; a SIGINT that landed inside that native code ended the sweeper by SIGABRT (exit -6) with a
KeyboardInterrupt traceback. The hook and its import now run in a worker thread (sweeper.interrupts.in_worker):
the signal is answered in the main thread's wait, at once, as every other Ctrl-C: one line, exit 130.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_interrupt_preflight.py
"""
from __future__ import annotations

import random
import threading
import time

import pytest

from sweeper import interrupts
from tests.helpers.commands import TINY
from tests.helpers.interrupt_at import interrupt_after


def test_in_worker_returns_raises_and_runs_off_the_main_thread():
    assert interrupts.in_worker(lambda x: (x, threading.current_thread().name), 3) == (3, "sweeper-<lambda>")
    with pytest.raises(ZeroDivisionError):
        interrupts.in_worker(lambda: 1 / 0)


def test_a_signal_during_in_worker_is_raised_in_the_wait_at_once():
    """A real SIGINT (from a timer thread) while the worker is still busy: KeyboardInterrupt in this thread
    within a fraction of a second, while the worker has not finished."""
    import os
    import signal

    interrupts.install()
    try:
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            interrupts.in_worker(time.sleep, 5)
        assert time.monotonic() - t0 < 1.5
    finally:
        for sig in interrupts.SIGNALS:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        interrupts._fired.clear()


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(3))
def test_ctrl_c_at_a_random_moment_of_the_baseline_preflight_is_one_line_exit_130(tmp_path, trial):
    args = ["+experiment=rope", *[o for o in TINY if "baseline_first" not in o], "sweeper.baseline_first=true",
            "seeds=0", f"sweeper.dir={tmp_path / 's'}", "sweeper.report=false", "sweeper.journal=off"]
    t = interrupt_after("sweep dir ", random.Random(trial).uniform(0.0, 2.5), args, cwd=tmp_path)
    lines = [line for line in t.output.splitlines() if "interrupted" in line]
    assert t.code == 130, (t.code, t.output[-3000:])
    assert "Traceback" not in t.output and "KeyboardInterrupt" not in t.output, t.output[-3000:]
    # the baseline's seed may have started beside its preflight (sweeper.execute.preflight_gate): the pool then
    # says it stops it; the command's last word is the one line, and the stopped preflight is no verdict
    assert lines[-1].startswith("sweeper: interrupted;") and len(lines) <= 2, t.output[-3000:]
    assert all("stopping" in line for line in lines[:-1]), t.output[-3000:]
    assert "preflight rope: FAIL" not in t.output, t.output[-3000:]
    assert t.answered_s < 5.0, t     # 1.5 s on an idle machine (benchmarks/interrupt_preflight.py)
