"""The test suite's command helpers: the repo root, a tiny run, `python -m MODULE` as a user runs it.

    proc = run_sweeper("+experiment=rope", *TINY, "seeds=0-1", cwd=tmp_path)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A run that takes a second or two on one core: same code paths as the default, smaller numbers.
TINY = ["train.steps=20", "model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.context=32",
        "train.batch_size=8", "train.eval_interval=10", "train.log_interval=5", "train.ckpt_interval=10",
        "train.eval_batches=2", "train.warmup_steps=2", "data.n_files=8", "health.preflight=false",
        "sweeper.baseline_first=false"]   # the baseline's sweep preflight: tests/test_ablation.py


def run_sweeper(*args: str, module: str = "sweeper", env: dict | None = None, timeout: float = 300,
                cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m <module> args...` in a subprocess, as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), full_env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or ROOT)
