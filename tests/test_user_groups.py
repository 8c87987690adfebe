"""A user's config groups are their own (issue 46): with `task: custom`, a --config-dir may define any group,
the demo trainer's names included (model/small, data/stdlib, train/default, health/default), and each run gets
exactly what Hydra composes from it: no check against the trainer's schemas, no deprecation warning.

    python -m pytest -q -n 0 tests/test_user_groups.py
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow
GROUPS = {"model/small": {"width": 16, "depth": 2}, "data/stdlib": {"rows": 7, "shuffle": False},
          "train/default": {"epochs": 1, "optimizer": "sgd"}, "health/default": {"probe": "none"},
          "optim/adam": {"beta1": 0.8}}
EXPERIMENT = """# @package _global_
defaults:
  - /model: small
  - /data: stdlib
  - /train: default
  - /health: default
  - /optim: adam
  - override /task: custom
task:
  command: [python, t.py]
  args: flags
experiment:
  name: mine
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
    wide: [model.width=32]
"""
SCRIPT = "import json, sys\nprint(json.dumps({'val_loss': 1.0}))\n"


def test_a_user_group_named_like_the_demos_gets_exactly_its_file(tmp_path):
    for path, values in GROUPS.items():
        (tmp_path / "conf" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / f"{path}.yaml").write_text(yaml.safe_dump(values))
    (tmp_path / "conf" / "experiment").mkdir()
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text(EXPERIMENT)
    (tmp_path / "t.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=mine", "seeds=0",
                           "sweeper.dir=sw", "launcher.threads_per_run=1", "sweeper.report=false"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "schema" not in proc.stderr, proc.stderr              # no automatic schema matching, no warning
    config = yaml.safe_load((tmp_path / "sw" / "runs" / "wide" / "seed_0" / "config.yaml").read_text())
    want = {path.split("/")[0]: values for path, values in GROUPS.items()}
    want["model"] = {**want["model"], "width": 32}
    assert {k: config[k] for k in want} == want


def test_the_demo_keeps_its_typed_groups(tmp_path):
    """The built-in trainer's groups are still checked against its schemas (its own names, no user file)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "sweeper", "+experiment=rope", "model.width=3",
                           "sweeper.dry_run=true", f"sweeper.dir={tmp_path / 'sw'}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "unknown config key 'model.width'" in proc.stderr, proc.stderr
