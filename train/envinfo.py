"""What a run actually saw: visible devices, threads, CPU affinity, host, versions, git commit.

    record = environment_record()   # written to RUN_DIR/env.json and summary.json["env"]
"""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def git_state() -> dict:
    repo = Path(__file__).resolve().parent.parent
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                                  timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = git("rev-parse", "HEAD")
    return {"commit": commit or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))
            if commit else None}


def versions() -> dict:
    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton
        out["triton"] = triton.__version__
    except Exception:  # triton is optional off Linux
        out["triton"] = None
    return out


def environment_record(device: torch.device | None = None) -> dict:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "device": device_name(device) if device is not None else None,
        "torch_num_threads": torch.get_num_threads(),
        "cpu_affinity": affinity,
        "env": {k: os.environ.get(k) for k in THREAD_VARS},
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "versions": versions(),
        "git": git_state(),
        "argv": sys.argv,
    }
