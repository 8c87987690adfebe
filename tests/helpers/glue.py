"""A tiny zero-glue project for tests: one script, one experiment, the real CLI.

    project = glue_project(tmp_path, "print('{\"val_loss\": 0.5}')")      # writes job.py and conf/
    proc = sweep(project, "seeds=0", "launcher.max_log_mb=1")             # python -m sweeper ... (plain progress)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.commands import ROOT

EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, job.py, --out, "{{out_dir}}", "--seed={{seed}}"{words}]
{extra}
experiment:
  name: glue
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
"""


def glue_project(tmp_path: Path, script: str, extra: str = "", words: str = "") -> Path:
    """A project folder with job.py (`script`, after an argparse of --out and --seed, and parse_known_args: any
    other words are in `rest`) and +experiment=glue; `extra`: more YAML at the top level (run-config keys);
    `words`: more words of the command (YAML, each after a comma)."""
    project = tmp_path / "proj"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "conf" / "experiment" / "glue.yaml").write_text(EXPERIMENT.format(extra=extra, words=words))
    (project / "job.py").write_text("import argparse, json, os, sys\np = argparse.ArgumentParser()\n"
                                    "p.add_argument('--out'); p.add_argument('--seed', type=int)\n"
                                    "args, rest = p.parse_known_args()\n" + script)
    return project


def sweep(project: Path, *args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("SWEEPER_RUN_DIR",)}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full.get("PYTHONPATH")) if p)
    full["SWEEPER_PROGRESS"] = "plain"
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=glue",
                           f"sweeper.dir={project / 'sweep'}", "launcher.threads_per_run=1", *args], cwd=project,
                          env=full, capture_output=True, text=True, timeout=timeout)
