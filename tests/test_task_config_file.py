"""A script that takes `--config path.yaml`, swept with its own YAML as the base of the experiment
(task.config_file): the experiment, the command line and each variant override the file's keys, and every run
gets its own merged copy at {config_file}.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_task_config_file.py
"""
from __future__ import annotations

import json

import pytest
import yaml

from sweeper.config.composition.argv import with_config_dirs
from sweeper.config.sweep import compose_sweep
from sweeper.errors import UsageError
from tests.helpers.commands import run_sweeper

SCRIPT = """\
import argparse, json, yaml
p = argparse.ArgumentParser()
p.add_argument("--config", required=True)
cfg = yaml.safe_load(open(p.parse_args().config))
print(json.dumps({"config": cfg}))
print(json.dumps({"loss": cfg["lr"] + cfg["model"]["width"] / 1000 + cfg["seed"] / 100}))
"""
OWN_YAML = "seed: 0\nlr: 0.5\nsteps: 3\nmodel:\n  width: 8\n  act: relu\n"
EXPERIMENT = """\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, train.py, --config, "{config_file}"]
  config_file: configs/train.yaml
model:
  width: 16                 # the experiment's value wins over the file's
experiment:
  name: own
  baseline: base
  metric: loss
  lower_is_better: true
  variants: {base: [], fast: [lr=0.1], wide: [model.width=64]}
"""


def project(root, own_yaml=OWN_YAML):
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "own.yaml").write_text(EXPERIMENT)
    (root / "configs").mkdir()
    (root / "configs" / "train.yaml").write_text(own_yaml)
    (root / "train.py").write_text(SCRIPT)
    return root / "conf"


@pytest.mark.slow
def test_the_scripts_yaml_is_the_base_and_every_override_applies_on_top(tmp_path, monkeypatch):
    conf = project(tmp_path)
    monkeypatch.chdir(tmp_path)
    sweep = compose_sweep(with_config_dirs(["+experiment=own", "steps=5"], [conf]), start_checks=False)
    base = {"seed": 0, "lr": 0.5, "steps": 5, "model": {"width": 16, "act": "relu"}}
    assert sweep.variant_configs == {"base": base, "fast": {**base, "lr": 0.1},
                                     "wide": {**base, "model": {"width": 64, "act": "relu"}}}
    assert sweep.task.config_file == str(tmp_path / "configs" / "train.yaml") and sweep.task.config_seed
    words = sweep.task.argv(tmp_path / "runs" / "fast" / "seed_1", sweep.variant_configs["fast"])
    copy = str(tmp_path / "runs" / "fast" / "seed_1" / "task_config" / "train.yaml")
    assert words[-3:] == ["train.py", "--config", copy]
    assert words[words.index("--config-file"):words.index("--config-file") + 3] == ["--config-file", copy,
                                                                                  "--config-seed"]


@pytest.mark.slow
@pytest.mark.parametrize("own_yaml, needle", [
    (None, "task.config_file={path}: cannot be read"),
    ("- a\n- b\n", "task.config_file={path}: expected a mapping of keys to values at the top level"),
    ("lr: 0.1\nseeds: 3\n", "task.config_file={path}: its key 'seeds' is one of sweeper's own"),
])
def test_a_bad_config_file_is_one_line(tmp_path, monkeypatch, own_yaml, needle):
    conf = project(tmp_path, own_yaml or OWN_YAML)
    if own_yaml is None:
        (tmp_path / "configs" / "train.yaml").unlink()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        compose_sweep(with_config_dirs(["+experiment=own"], [conf]), start_checks=False)
    assert needle.format(path=tmp_path / "configs" / "train.yaml") in str(e.value)


@pytest.mark.slow
def test_each_run_gets_its_merged_copy_and_reports_from_it(tmp_path):
    project(tmp_path, OWN_YAML.replace("seed: 0\n", ""))        # no seed in the file: none in the copies
    (tmp_path / "train.py").write_text(SCRIPT.replace('cfg["seed"] / 100', "0"))
    proc = run_sweeper("--config-dir", "conf", "+experiment=own", "seeds=0-1", "launcher.threads_per_run=1",
                       "sweeper.dir=sw", cwd=tmp_path, env={"SWEEPER_PROGRESS": "plain"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp_path / "sw" / "runs" / "wide" / "seed_1"
    copy = yaml.safe_load((run / "task_config" / "train.yaml").read_text())
    assert copy == {"lr": 0.5, "steps": 3, "model": {"width": 64, "act": "relu"}}
    assert json.loads((run / "summary.json").read_text())["final"]["loss"] == pytest.approx(0.5 + 0.064)
    assert yaml.safe_load((tmp_path / "configs" / "train.yaml").read_text())["model"]["width"] == 8   # untouched
