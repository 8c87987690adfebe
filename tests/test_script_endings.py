"""Scripts that end oddly (issue 48): however a zero-glue script ends or handles its streams (os._exit after its
metric, sys.exit in an atexit handler, a metrics file written at exit, stdout closed then a file written, print
then close, fds 1 and 2 closed, stdout and stderr pointed at /dev/null, stderr closed), its run ends as the script
alone does; a script killed after printing its metric is a failed run named for the signal, never a result.
Warm (forked) and cold starts alike.

    python -m pytest -q tests/test_script_endings.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow
ENDINGS = ["osexit", "atexit_exit", "atexit_file", "closed_then_file", "print_close", "fd_closed", "devnull",
           "stderr_closed"]
JOB = Path(__file__).with_name("fixtures") / "job_endings.py"
EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, job.py, --out, "{out_dir}", "--seed={seed}", "--how={how}"]
how: osexit
experiment:
  name: endings
  baseline: osexit
  metric: val_loss
  lower_is_better: true
  variants:
%s
"""


def project(tmp_path: Path, endings: list[str]) -> Path:
    proj = tmp_path / "proj"
    (proj / "conf" / "experiment").mkdir(parents=True)
    variants = "\n".join(f"    {how}: [how={how}]" for how in endings)
    (proj / "conf" / "experiment" / "endings.yaml").write_text(EXPERIMENT % variants)
    (proj / "job.py").write_text(JOB.read_text())
    return proj


def sweep(proj: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "SWEEPER_RUN_DIR"}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    full.update(SWEEPER_PROGRESS="plain", **(env or {}))
    return subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=endings",
                           f"sweeper.dir={proj / 'sweep'}", "launcher.threads_per_run=1", "sweeper.report=false",
                           *args], cwd=proj, env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_every_odd_ending_keeps_the_metric_the_script_reported(tmp_path, start):
    proj = project(tmp_path, ENDINGS)
    proc = sweep(proj, "seeds=0-1", env={"SWEEPER_COLD_START": "1"} if start == "cold" else {})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for how in ENDINGS:
        for seed in (0, 1):
            summary = json.loads((proj / "sweep" / "runs" / how / f"seed_{seed}" / "summary.json").read_text())
            assert summary["status"] == "finished", (how, summary)
            assert summary["final"]["val_loss"] == 0.5 + seed, (how, summary["final"])
    assert "I/O operation on closed file" not in out and "no_result" not in out, out[-3000:]


def test_a_script_killed_after_its_metric_fails_named_for_the_signal(tmp_path):
    proj = project(tmp_path, ["osexit", "killed"])
    proc = sweep(proj, "seeds=0")
    status = json.loads((proj / "sweep" / "runs" / "killed" / "seed_0" / "status.json").read_text())
    assert status["status"] == "failed", status
    assert status["error"].startswith("killed by SIGKILL"), status
    assert "killed by SIGKILL" in proc.stdout + proc.stderr
    done = json.loads((proj / "sweep" / "runs" / "osexit" / "seed_0" / "summary.json").read_text())
    assert done["final"]["val_loss"] == 0.5
