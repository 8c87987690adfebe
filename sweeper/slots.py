"""Slots of the local pool: which GPU and which CPU cores each concurrent run gets.

    slots = make_slots(LauncherConfig(), n_runs=12)
    env = slots[0].child_env(os.environ)      # CUDA_VISIBLE_DEVICES, OMP/MKL threads, set BEFORE the child starts

GPUs are found without initialising CUDA in the parent: an existing CUDA_VISIBLE_DEVICES is honoured,
otherwise `nvidia-smi -L` is asked. With no GPU (or launcher.cpu_only=true) the pool runs CPU slots. The cores
of this process's affinity set are split into disjoint sets, one per slot, and every run gets the same number
of threads: the size of the smallest set (idle OpenMP threads spin and steal cores from neighbours otherwise;
equal thread counts keep every run of a sweep bitwise reproducible, and a run resumed in another slot passes
the checkpoint's thread-count check). With runs_per_device > 1 the slots alternate devices (gpu0, gpu1, gpu0,
gpu1, ...), so max_parallel spreads runs over devices before it doubles them up.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sweeper.errors import UsageError
from sweeper.launcher_schema import LocalLauncherConf

PROJECT_ROOT = Path(__file__).resolve().parent.parent
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def run_env(base: dict, threads: int, pythonpath: str | Path = PROJECT_ROOT) -> dict:
    """A run's environment, complete before it starts (torch reads thread counts at import); Slurm tasks too.

    pythonpath: what goes on PYTHONPATH before the inherited entries: sweeper's own root by default, for a
    run of a task `sweeper.task.python_path(task, str(PROJECT_ROOT))` (the task's cwd first, then ours)."""
    env = dict(base)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # spinning OpenMP workers steal cores from neighbours
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), base.get("PYTHONPATH")) if p)
    return env


# The `launcher=local` schema is the pool's config type (keys, defaults and ranges: sweeper.launcher_schema).
LauncherConfig = LocalLauncherConf


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None             # the id put in CUDA_VISIBLE_DEVICES; None = a CPU slot
    cores: tuple[int, ...]      # CPU affinity of the run
    threads: int                # OMP_NUM_THREADS / MKL_NUM_THREADS / torch threads

    @property
    def name(self) -> str:
        return f"gpu{self.gpu}" if self.gpu is not None else f"cpu{self.index}"

    def child_env(self, base: dict, threads: int | None = None, pythonpath: str | Path = PROJECT_ROOT) -> dict:
        """threads: a count to keep instead of the slot's (a resumed checkpoint's); pythonpath: see run_env."""
        env = run_env(base, threads or self.threads, pythonpath)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu if self.gpu is not None else ""
        env["SWEEPER_SLOT"] = str(self.index)
        return env


def available_cores(cfg: LauncherConfig) -> list[int]:
    mine = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cfg.cores is None:
        return mine
    bad = [c for c in cfg.cores if c not in mine]
    if bad:
        raise UsageError(f"launcher.cores={list(cfg.cores)}: core(s) {bad} are not available to this process "
                         f"(available: {mine})")
    return sorted(cfg.cores)


def visible_gpus(cfg: LauncherConfig, environ: dict | None = None) -> list[str]:
    """GPU ids a child may be given, without initialising CUDA here."""
    environ = os.environ if environ is None else environ
    if cfg.cpu_only:
        return []
    if "CUDA_VISIBLE_DEVICES" in environ:
        visible = [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    else:
        visible = [str(i) for i in range(_nvidia_smi_count())]
    if cfg.devices is None:
        return visible
    wanted = [str(d) for d in cfg.devices]
    missing = [d for d in wanted if d not in visible]
    if missing:
        raise UsageError(f"launcher.devices={wanted}: device(s) {missing} are not visible "
                         f"(visible: {visible or 'none'}; CUDA_VISIBLE_DEVICES is honoured)")
    return wanted


def _nvidia_smi_count() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def make_slots(cfg: LauncherConfig, n_runs: int, environ: dict | None = None,
               cores: list[int] | None = None) -> list[Slot]:
    """The pool's slots for n_runs runs (cores: the usable cores, default launcher.cores or this process's)."""
    gpus = visible_gpus(cfg, environ)
    cores = available_cores(cfg) if cores is None else sorted(cores)
    if gpus:
        owners: list[str | None] = [g for _ in range(cfg.runs_per_device) for g in gpus]
    else:
        per_run = cfg.threads_per_run or 1
        owners = [None] * max(1, len(cores) // per_run)
    n = min(len(owners), cfg.max_parallel or len(owners), max(1, n_runs))
    owners = owners[:n]
    if n <= len(cores):   # disjoint, contiguous, as even as possible
        sets = [tuple(cores[i * len(cores) // n:(i + 1) * len(cores) // n]) for i in range(n)]
    else:                 # more slots than cores: share round-robin
        sets = [(cores[i % len(cores)],) for i in range(n)]
    threads = cfg.threads_per_run or min(len(s) for s in sets)
    return [Slot(index=i, gpu=gpu, cores=sets[i], threads=threads) for i, gpu in enumerate(owners)]
