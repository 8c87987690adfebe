"""What a run actually saw: visible devices, threads, CPU affinity, host, versions, git commit. Torch-free.

    record = environment_record(device="cpu")   # written to RUN_DIR/env.json and the summary's "env"

Torch facts (thread count, CUDA devices) are read only when the run's code has imported torch itself.
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata

from sweeper.run.envrefs import as_written

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")


def git_state(folder: str | None = None) -> dict:
    """Commit and dirtiness of the git checkout holding `folder` (default: the working directory)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", folder or os.getcwd(), *args], capture_output=True, text=True,
                                  timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = git("rev-parse", "HEAD")
    return {"commit": commit or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))
            if commit else None}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    torch = sys.modules.get("torch")
    return {"python": platform.python_version(), "torch": torch.__version__ if torch else _version("torch"),
            "triton": _version("triton"), "numpy": _version("numpy")}


def thread_count() -> int | None:
    """torch's intra-op thread count when torch is in use, else OMP_NUM_THREADS (what numpy's BLAS honours)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.get_num_threads()
    raw = os.environ.get("OMP_NUM_THREADS", "")
    return int(raw) if raw.isdigit() else None


def cuda_device_count() -> int:
    torch = sys.modules.get("torch")
    return torch.cuda.device_count() if torch is not None and torch.cuda.is_available() else 0


def device_model() -> str | None:
    """The model of the GPU this process computes on (CUDA RNG streams and kernels depend on it: a bitwise
    resume holds on the same model only); "cpu" when torch sees no GPU; None when unknown (no torch, or CUDA
    not initialised yet: asking would initialise it on the caller's behalf)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda.is_initialized():
        return torch.cuda.get_device_name(torch.cuda.current_device())
    return None if torch.cuda.is_available() else "cpu"


def environment_record(device: str | None = None) -> dict:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device_count": cuda_device_count(),
        "device": device,
        "torch_num_threads": thread_count(),
        "rank": {k.lower(): os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT")
                 if os.environ.get(k) is not None} or None,
        "cpu_affinity": affinity,
        "env": {k: os.environ.get(k) for k in THREAD_VARS},
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "versions": versions(),
        "git": git_state(),
        "argv": as_written(sys.argv),            # ${oc.env:SECRET} words as written, never their values
    }
