"""Durations follow the monotonic clock, never the wall clock (issue 40): the clock stepping back a day during a
retry's backoff does not wait a day, and stepping forward 2 h (a laptop resumed from sleep) does not name a
healthy run stalled and kill it. A clock shim (tests/clock_shim/sitecustomize.py) steps time.time in the
sweeper's process one second after a file the run writes appears.

    python -m pytest -q -n 0 tests/test_clock_steps.py
"""
from __future__ import annotations

import json
import os

import pytest

from tests.helpers.commands import ROOT
from tests.helpers.glue import glue_project, sweep

pytestmark = pytest.mark.slow
SHIM = ROOT / "tests" / "clock_shim"


def shim(step_file, step_s: float) -> dict:
    return {"PYTHONPATH": os.pathsep.join([str(SHIM), str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "CLOCK_SHIM_FILE": str(step_file), "CLOCK_SHIM_STEP_S": str(step_s)}


def test_a_clock_stepped_back_a_day_during_a_backoff_does_not_wait_a_day(tmp_path):
    step = tmp_path / "step"
    project = glue_project(tmp_path, f"if not os.path.exists({str(step)!r}):\n"
                                     f"    open({str(step)!r}, 'w').close()\n"
                                     "    os.kill(os.getpid(), 9)              # a transient failure: retried\n"
                                     "print(json.dumps({'val_loss': 0.5}))\n")
    proc = sweep(project, "seeds=0", "launcher.retry_backoff_s=3", "launcher.max_retries=1",
                 env=shim(step, -86400), timeout=90)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "retrying in 3s" in proc.stdout and "val_loss=0.5" in proc.stdout, proc.stdout


def test_a_clock_stepped_forward_2_h_does_not_kill_a_healthy_run_as_stalled(tmp_path):
    step = tmp_path / "step"
    project = glue_project(tmp_path, f"open({str(step)!r}, 'w').close()\n"
                                     "import time; time.sleep(0.5)            # the step lands between prints\n"
                                     "for i in range(6):                      # healthy: a line every second\n"
                                     "    print('step', i, flush=True); time.sleep(1)\n"
                                     "print(json.dumps({'val_loss': 0.5}))\n")
    proc = sweep(project, "seeds=0", "launcher.stall_s=3", "launcher.stall_kill=true", "launcher.max_retries=0",
                 env=shim(step, 7200), timeout=90)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "STALL" not in proc.stdout and "val_loss=0.5" in proc.stdout, proc.stdout
    summary = json.loads((project / "sweep" / "runs" / "a" / "seed_0" / "summary.json").read_text())
    assert summary["final"] == {"val_loss": 0.5}
