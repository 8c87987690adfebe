"""Tiny projects for the checks across runs (issue 37): a numpy regression "training" run at the two integration
levels (a plain argparse script through task.command; a script on the run API), each with a bug switch, swept
through the real CLI from a fresh project folder.

    project = make_project(tmp_path, level="command", order="np.random.default_rng()", controls=["again"])
    proc, sweep_dir = sweep(project, "seeds=0-1")
    findings_of(sweep_dir)            # [Finding(...)]: every check's findings (sweeper.analysis.integrity)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.commands import ROOT

HEAD = '''"""A tiny numpy regression run (tests/helpers/integrity_projects.py)."""
import argparse
import hashlib
import json
import os

import numpy as np
'''
ARGS = '''
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--width", type=int, default=4)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--val_size", type=int, default=64)
p.add_argument("--out", default=".")
cfg = p.parse_args()
'''
API = '''
import sweeper

run = sweeper.init()
cfg = run.config
'''
BODY = '''
data = np.random.default_rng(1234)                     # the data: the same for every run
X = data.normal(size=(256, 8))
Y = X @ data.normal(size=8) + 0.1 * data.normal(size=256)
TRAIN = np.arange(128)
VAL = {val}                                            # the validation examples' ids
w = np.random.default_rng(cfg.seed).normal(size=8) * 0.1 * cfg.width / 4
order = {order}                                        # the batch order
ckpt = {ckpt}
start = 0
if ckpt and os.path.exists(ckpt):                      # resume
    saved = np.load(ckpt)
    w, start = saved["w"], int(saved["step"])
{extra}
for step in range(start + 1, cfg.steps + 1):
    idx = order.choice(TRAIN, 16)
    w = w - 0.05 * X[idx].T @ (X[idx] @ w - Y[idx]) / 16
    loss = float(np.mean((X[idx] @ w - Y[idx]) ** 2))
    {log}
    if ckpt:
        os.makedirs(os.path.dirname(ckpt) or ".", exist_ok=True)
        np.savez(ckpt, w=w, step=step)
val_loss = float(np.mean((X[VAL] @ w - Y[VAL]) ** 2))
{finish}
'''
LEVELS = {
    "command": dict(head=ARGS, log='print(json.dumps({{"step": step, "train_loss": loss}}), flush=True)',
                    finish='print(json.dumps({{"val_loss": val_loss, "eval_fingerprint": '
                           'hashlib.sha256(VAL.tobytes()).hexdigest()[:16]}}))'),
    "api": dict(head=API, log="run.log(step, train_loss=loss)",
                finish="run.eval_fingerprint(VAL)\nrun.finish(val_loss=val_loss)"),
}
SEEDED = "np.random.default_rng(cfg.seed + 1)"
VAL = "np.arange(128, 128 + cfg.val_size)"


def script(level: str, order: str = SEEDED, val: str = VAL, ckpt: str = "None", extra: str = "") -> str:
    lv = LEVELS[level]
    body = BODY.format(val=val, order=order, ckpt=ckpt, extra=extra, log=lv["log"].format(),
                       finish=lv["finish"].format())
    return HEAD + lv["head"] + body


def make_project(root: Path, level: str = "command", variants: dict | None = None, controls: list | None = None,
                 command: list | None = None, name: str = "proj", **bugs) -> Path:
    """A project folder: train_np.py (with the given bug switches) and conf/experiment/tiny.yaml."""
    project = root / name
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "train_np.py").write_text(script(level, **bugs))
    if command is None:
        command = ["python", "train_np.py", "--out", "{out_dir}"] if level == "command" else ["python", "train_np.py"]
    exp = {"name": "tiny", "baseline": "base", "metric": "val_loss", "lower_is_better": True,
           "variants": variants or {"base": [], "wide": ["width=8"]}}
    if controls:
        exp["controls"] = controls
    conf = {"defaults": [{"override /task": "custom"}],
            "task": {"command": command, **({"args": "flags"} if level == "command" else {})},
            "width": 4, "steps": 6, "val_size": 64, "experiment": exp}
    (project / "conf" / "experiment" / "tiny.yaml").write_text("# @package _global_\n" + yaml.safe_dump(conf))
    return project


def user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SWEEPER_RUN_DIR",)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["SWEEPER_PROGRESS"] = "plain"
    return env


def sweep(project: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, Path]:
    """`python -m sweeper --config-dir conf +experiment=tiny ARGS` in the project; (process, sweep dir)."""
    sweep_dir = project / "sweeps" / "tiny"
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=tiny",
                           "launcher.threads_per_run=1", "sweeper.journal=off", f"sweeper.dir={sweep_dir}", *args],
                          cwd=project, env=user_env(), capture_output=True, text=True, timeout=timeout)
    return proc, sweep_dir


def findings_of(sweep_dir: Path) -> list:
    """Every check's findings on the sweep dir, as a report reads them (sweeper.analysis.integrity)."""
    from sweeper.analysis.integrity import SweepEvidence, check_sweep
    from sweeper.analysis.results import load_curves, load_experiment, load_manifest, load_runs, load_variant_changes

    manifest = load_manifest(sweep_dir)
    experiment, _ = load_experiment(sweep_dir, manifest)
    runs = load_runs(sweep_dir, manifest)
    changes, _ = load_variant_changes(sweep_dir, manifest, experiment.baseline)
    return check_sweep(SweepEvidence(sweep_dir, experiment, runs, load_curves(sweep_dir, runs), changes))
