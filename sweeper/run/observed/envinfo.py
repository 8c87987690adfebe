"""What a run actually saw: visible devices, threads, CPU affinity, host, versions, git commit. Torch-free.

    record = environment_record(device="cpu")   # written to RUN_DIR/env.json and the summary's "env"
    numbers_env()                 # what of the environment changes a run's numbers (the run's identity key)

Torch facts (thread count, CUDA devices) are read only when the run's code has imported torch itself.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata

from sweeper.run.observed.envrefs import as_written

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


NUMBERS_VARS = ("CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "NVIDIA_TF32_OVERRIDE")   # determinism settings
CUDA_DISTS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime")
CUDNN_DISTS = ("nvidia-cudnn-cu12", "nvidia-cudnn-cu11", "nvidia-cudnn")


def _first_version(dists: tuple[str, ...]) -> str | None:
    return next((v for v in map(_version, dists) if v is not None), None)


OWN_PACKAGES = ("sweeper", "sweeper.train", "sweeper.kernels", "sweeper.conf")   # what a run of ours executes


@functools.lru_cache(maxsize=1)
def own_code() -> str:
    """This installation of sweeper, to the byte: its version and a digest of every source file of the packages
    a run executes (the run API, the seed streams, the demo, the kernels, the configs). Part of a run's identity:
    a run made by other sweeper code (a new way to derive seeds, a fixed kernel) is never reused, whatever the
    version says; an editable checkout with edits is other code. About 20 ms, once per process."""
    digest = hashlib.sha256()
    for name in OWN_PACKAGES:
        spec = importlib.util.find_spec(name)           # imports the parent `sweeper` only, never torch
        for root in sorted(spec.submodule_search_locations or []) if spec else []:
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for f in sorted(f for f in files if f.endswith((".py", ".yaml"))):
                    path = os.path.join(folder, f)
                    digest.update(os.path.relpath(path, root).encode("utf-8", "surrogateescape") + b"\0")
                    try:
                        with open(path, "rb") as fh:
                            digest.update(fh.read())
                    except OSError:
                        digest.update(b"?")
    return f"{_version('seed-sweeper')}+src.{digest.hexdigest()[:12]}"


@functools.lru_cache(maxsize=1)
def host_devices() -> str:
    """The devices of this host a run can compute on: the distinct GPU models (nvidia-smi), else "cpu: MODEL"."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20)
            names = sorted({n.strip() for n in out.stdout.splitlines() if n.strip()}) if out.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            names = []
        if names:
            return "gpu: " + ", ".join(names)
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"cpu: {model}"


def numbers_env(threads: str | None = None, environ: dict | None = None) -> dict:
    """What of the environment changes a run's numbers, in the order a difference is named: library versions
    (python, torch, numpy, CUDA, cuDNN as installed: a CUDA torch names its CUDA in its version), this package's
    version and source digest (own_code), the host's device models, the determinism variables, the thread count
    (OMP_NUM_THREADS; `threads`: the one a planned run will get). A run records it at its start; a plan computes
    it for the runs it plans (sweeper.store.identity); both from the same installation when the run and the plan
    share one."""
    environ = os.environ if environ is None else environ
    return {"python": platform.python_version(), "torch": _version("torch"), "numpy": _version("numpy"),
            "cuda": _first_version(CUDA_DISTS), "cudnn": _first_version(CUDNN_DISTS),
            "sweeper": own_code(), "device": host_devices(),
            "determinism": {k: environ.get(k) for k in NUMBERS_VARS if environ.get(k) is not None},
            "threads": threads if threads is not None else environ.get("OMP_NUM_THREADS")}
