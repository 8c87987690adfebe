"""The test suite's command helpers: the repo root, a tiny run, `python -m MODULE` as a user runs it.

    proc = run_sweeper("+experiment=rope", *TINY, "seeds=0-1", cwd=tmp_path)
    bad = sweeper_here("+experiment=rope", "seeds=3-1", cwd=tmp_path)   # bad input: the same main, this process

sweeper_here runs the command's main function in this test process (about 0.3 CPU-s instead of the 1+ of a
new interpreter importing Hydra) and records what it printed, its exit status, every process it started and
every file it wrote under cwd (tests.helpers.no_process). Use it for the many cases of a bad-input family;
keep one run_sweeper case per family, so the real exit status of `python -m ...` stays tested.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.no_process import Result, files_under, run_in_process

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


MAINS = {"sweeper": "sweeper.cli.sweep", "sweeper.resume": "sweeper.cli.resume", "sweeper.report": "sweeper.cli.report"}


def sweeper_here(*args: str, cwd: Path, module: str = "sweeper") -> Result:
    """`python -m <module> args...` run in this process by the command's own main(argv): its exit status,
    stdout, stderr, the processes it started and the files it wrote under cwd."""
    import importlib

    main = importlib.import_module(MAINS[module]).main
    path = list(sys.path)
    try:
        return run_in_process(main, list(args), cwd=cwd)
    finally:
        sys.path[:] = path          # a task hook's folder (sweeper.config.sweep.load_hook) leaves with the test


def sweeper_cli(*args: str, cwd: Path, real: bool = False, module: str = "sweeper") -> Result:
    """sweeper_here, or (real=True) `python -m <module>` in a subprocess with the same Result: started is None
    there (not recorded), written is what appeared under cwd. A bad-input family runs one case real."""
    if not real:
        return sweeper_here(*args, cwd=cwd, module=module)
    before = files_under(cwd)
    proc = run_sweeper(*args, module=module, cwd=cwd)
    return Result(proc.returncode, proc.stdout, proc.stderr, None, sorted(files_under(cwd) - before))
