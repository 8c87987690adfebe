"""The recipes of docs/your-own-code.md, run as a newcomer runs them: a copy of examples/hf_trainer (a Hugging Face
Trainer script) and of examples/lightning_script (a Lightning script), each swept with 0 changed lines from its
own folder. transformers, accelerate and pytorch-lightning are in the test extras (`pip install -e '.[test]'`, as
CI installs): without them these tests fail, naming the install, rather than skip.

    python -m pytest -q -n 0 tests/test_recipes.py
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow


def sweep(example: str, experiment: str, tmp_path: Path, *args: str) -> tuple[Path, subprocess.CompletedProcess]:
    project = tmp_path / example
    shutil.copytree(ROOT / "examples" / example, project, ignore=shutil.ignore_patterns("sweeps", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SWEEPER_RUN_DIR")}
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", f"+experiment={experiment}",
                           "seeds=0-1", "launcher.threads_per_run=1", "sweeper.dir=sw", *args], cwd=project,
                          env={**env, "SWEEPER_PROGRESS": "plain", "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return project / "sw", proc


def needs(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: the recipes need the test extras (pip install -e '.[test]')")


def summaries(sweep_dir: Path) -> dict[str, dict]:
    return {str(p.parent.relative_to(sweep_dir / "runs")): json.loads(p.read_text())
            for p in sorted((sweep_dir / "runs").glob("*/seed_*/summary.json"))}


def test_a_hugging_face_trainer_script_swept_as_it_is(tmp_path):
    needs("transformers", "accelerate")
    sweep_dir, proc = sweep("hf_trainer", "hf_lr", tmp_path, "max_steps=8")
    runs = summaries(sweep_dir)
    assert len(runs) == 4 and "paired" in (sweep_dir / "report.md").read_text()
    for run in runs.values():
        assert run["final"]["eval_loss"] > 0 and "n_embd" not in run["final"] and "vocab_size" not in run["final"]
        assert run["metric_sources"]["eval_loss"].startswith(("out/all_results.json", "out/eval_results.json",
                                                              "out/trainer_state.json, log_history"))
        assert len([ln for ln in (sweep_dir.parent / "sw" / "runs").glob("*")]) == 2


def test_a_lightning_script_swept_as_it_is(tmp_path):
    needs("pytorch_lightning")
    sweep_dir, proc = sweep("lightning_script", "lightning_width", tmp_path, "max_epochs=1")
    runs = summaries(sweep_dir)
    assert len(runs) == 4 and "paired" in (sweep_dir / "report.md").read_text()
    for run in runs.values():
        assert run["metric_sources"]["val_loss"].startswith("out/lightning_logs/version_0/metrics.csv, column val_loss")
