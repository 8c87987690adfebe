"""A zero-glue script that deletes its own run dir's records is told so, not that it "exited 0 without calling
run.finish()" (issue 40). The real CLI, a real script.

    python -m pytest -q -n 0 tests/test_deleted_records.py
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.glue import glue_project, sweep

CLEAN = ("import shutil\nrun_dir = os.path.dirname(os.path.abspath(args.out))\n"
         "for name in os.listdir(run_dir):                # 'cleaning up' everything beside out/\n"
         "    path = os.path.join(run_dir, name)\n"
         "    if name not in ('out', 'stdout.log'):\n"
         "        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)\n"
         "print(json.dumps({'val_loss': 0.5}))\n")


@pytest.mark.slow
def test_a_script_that_deletes_its_run_records_is_told_what_happened(tmp_path):
    project = glue_project(tmp_path, CLEAN)
    proc = sweep(project, "seeds=0", "launcher.max_retries=0")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "without calling run.finish()" not in out, out
    assert "the script deleted its run's files (config.yaml, status.json) while it ran" in out, out
    status = json.loads((project / "sweep" / "runs" / "a" / "seed_0" / "status.json").read_text())
    assert status["status"] == "failed" and "deleted its run's files" in status["error"]
