"""A secret passed the usual Hydra way, `${oc.env:WANDB_API_KEY}`, reaches the run's process but is never written
to disk, and rotating it does not make a new sweep (issue 40). The real CLI, a real zero-glue script.

    python -m pytest -q -n 0 tests/test_secrets.py
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from sweeper.run import init
from tests.helpers.glue import glue_project, sweep

CHECK = ("want = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'want')).read()\n"
         "assert rest == ['--key=' + want, 'Bearer ' + want], rest     # the value, resolved in the run\n"
         "print(json.dumps({'val_loss': 0.5}))\n")


def on_disk(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.slow
def test_an_env_secret_reaches_the_run_is_never_on_disk_and_rotating_it_keeps_the_sweep(tmp_path):
    project = glue_project(tmp_path, CHECK, extra="key: ${oc.env:WANDB_API_KEY}\nheader: Bearer ${key}",
                           words=', "--key={key}", "{header}"')
    (project / "want").write_text("sekrit-one")
    proc = sweep(project, "seeds=0", env={"WANDB_API_KEY": "sekrit-one"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = project / "sweep" / "runs" / "a" / "seed_0"
    assert on_disk(project / "sweep", "sekrit-one") == [] and "sekrit" not in proc.stdout + proc.stderr
    assert "${oc.env:WANDB_API_KEY}" in (run / "config.yaml").read_text()
    summary = json.loads((run / "summary.json").read_text())
    (project / "want").write_text("sekrit-two")                               # the key is rotated
    proc = sweep(project, "seeds=0-1", "sweeper.extend=true", env={"WANDB_API_KEY": "sekrit-two"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text()) == summary          # the same sweep: seed 0 is kept
    assert (project / "sweep" / "runs" / "a" / "seed_1" / "summary.json").exists()
    assert on_disk(project / "sweep", "sekrit-two") == []


def test_the_run_api_writes_the_reference_and_resolves_it_in_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "sekrit-3")
    cfg = OmegaConf.create({"seed": 0, "wandb": {"key": "${oc.env:WANDB_API_KEY}"}, "n": 3})
    run = init(run_dir=tmp_path / "run", config=cfg, record_crashes=False)
    assert run.config.wandb.key == "sekrit-3"                               # resolved where the run reads it
    assert on_disk(tmp_path, "sekrit-3") == []
    assert cfg.wandb._get_node("key")._value() == "${oc.env:WANDB_API_KEY}"   # the caller's config untouched
    monkeypatch.setenv("WANDB_API_KEY", "sekrit-4")
    again = init(run_dir=tmp_path / "run2", config=cfg, record_crashes=False)
    assert again.config_hash == run.config_hash                            # rotating the key: the same identity
    run.close()
    again.close()
    assert oct(os.stat(tmp_path / "run" / "config.yaml").st_mode & 0o777) != "0o777"


def test_the_hydra_plugin_writes_the_reference(monkeypatch):
    from hydra_plugins.sweeper_pool._contract import config_hash, task_config

    monkeypatch.setenv("WANDB_API_KEY", "sekrit-5")
    cfg = OmegaConf.create({"hydra": {"x": 1}, "wandb": {"key": "${oc.env:WANDB_API_KEY}"}, "lr": 0.1})
    written = task_config(cfg)
    assert written == {"wandb": {"key": "${oc.env:WANDB_API_KEY}"}, "lr": 0.1}
    monkeypatch.setenv("WANDB_API_KEY", "sekrit-6")
    assert config_hash(task_config(cfg)) == config_hash(written)
