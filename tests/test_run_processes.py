"""Processes are found by what the pool started, never by their command line (issue 40): a user's own process
whose arguments name a run dir (`du RUN_DIR`, `tensorboard --logdir RUN_DIR`) survives that run's restart.

    python -m pytest -q -n 0 tests/test_run_processes.py
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.glue import glue_project, sweep


@pytest.mark.slow
def test_a_users_process_naming_the_run_dir_survives_the_runs_restart(tmp_path):
    project = glue_project(tmp_path, "print(json.dumps({'val_loss': 0.5}))\n"
                                     "sys.exit(0 if os.path.exists('ok') else 1)\n")
    assert sweep(project, "seeds=0").returncode == 1                   # failed: the same command restarts it
    run = project / "sweep" / "runs" / "a" / "seed_0"
    users = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])
             for args in ([str(run)], ["--logdir", str(run)], [str(run / "out")])]
    try:
        (project / "ok").write_text("")
        proc = sweep(project, "seeds=0")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "left by an earlier sweeper" not in proc.stdout
        assert [u.poll() for u in users] == [None, None, None]        # all still running
    finally:
        for u in users:
            u.kill()
            u.wait()
