"""Shared test setup: the Triton interpreter on CPU-only machines, tiny-run overrides, a CLI runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Triton kernels run in the interpreter when there is no GPU; this must be set before triton is imported.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent

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


def slurm_problem() -> str | None:
    """Why no local Slurm cluster answers (None when one does): `bash tests/slurm/cluster.sh up` starts it."""
    import shutil

    if shutil.which("sinfo") is None:
        return "sinfo not found"
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    if out.returncode != 0 or not {"idle", "mixed", "allocated"} & set(out.stdout.split()):
        return "no usable Slurm node"
    return None


@pytest.fixture
def slurm_cluster() -> None:
    """Skip (with the reason) without a local Slurm cluster; with SWEEPER_REQUIRE_SLURM=1 (CI) fail instead."""
    problem = slurm_problem()
    if problem:
        if os.environ.get("SWEEPER_REQUIRE_SLURM") == "1":
            pytest.fail(f"SWEEPER_REQUIRE_SLURM=1 but no Slurm cluster ({problem})")
        pytest.skip(f"no Slurm cluster ({problem}); start one with `bash tests/slurm/cluster.sh up`")


@pytest.fixture
def tiny() -> list[str]:
    return list(TINY)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny in-process models: a second OpenMP thread only spins (and crawls when the machine is busy).
    Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
