"""Slots of the local pool: which GPU and which CPU cores each concurrent run gets.

    slots = make_slots(LauncherConfig(), n_runs=12)
    env = slots[0].child_env(os.environ)      # CUDA_VISIBLE_DEVICES, OMP/MKL threads, set BEFORE the child starts

GPUs are found without initialising CUDA in the parent: an existing CUDA_VISIBLE_DEVICES is honoured,
otherwise `nvidia-smi -L` is asked. With no GPU (or launcher.cpu_only=true) the pool runs CPU slots. The cores
of this process's affinity set are split into disjoint sets, one per slot, and each run gets as many threads
as it has cores (idle OpenMP threads spin and steal cores from neighbours otherwise).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sweeper.errors import UsageError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class LauncherConfig:
    name: str = "local"
    devices: list | None = None
    runs_per_device: int = 1
    cpu_only: bool = False
    max_parallel: int | None = None
    threads_per_run: int | None = None
    cores: list | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "LauncherConfig":
        known = set(cls.__dataclass_fields__)
        extra = sorted(set(d) - known)
        if extra:
            raise UsageError(f"unknown config key launcher.{extra[0]}; keys of launcher are {', '.join(sorted(known))}")
        cfg = cls(**d)
        for key in ("runs_per_device", "max_parallel", "threads_per_run"):
            v = getattr(cfg, key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise UsageError(f"launcher.{key}={v!r}: must be a positive integer")
        return cfg


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None             # the id put in CUDA_VISIBLE_DEVICES; None = a CPU slot
    cores: tuple[int, ...]      # CPU affinity of the run
    threads: int                # OMP_NUM_THREADS / MKL_NUM_THREADS / torch threads

    @property
    def name(self) -> str:
        return f"gpu{self.gpu}" if self.gpu is not None else f"cpu{self.index}"

    def child_env(self, base: dict) -> dict:
        env = dict(base)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu if self.gpu is not None else ""
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(self.threads)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # spinning OpenMP workers steal cores from neighbours
        env["SWEEPER_SLOT"] = str(self.index)
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), base.get("PYTHONPATH")) if p)
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


def make_slots(cfg: LauncherConfig, n_runs: int, environ: dict | None = None) -> list[Slot]:
    gpus = visible_gpus(cfg, environ)
    cores = available_cores(cfg)
    if gpus:
        owners: list[str | None] = [g for g in gpus for _ in range(cfg.runs_per_device)]
    else:
        per_run = cfg.threads_per_run or 1
        owners = [None] * max(1, len(cores) // per_run)
    n = min(len(owners), cfg.max_parallel or len(owners), max(1, n_runs))
    owners = owners[:n]
    slots = []
    for i, gpu in enumerate(owners):
        if n <= len(cores):   # disjoint, contiguous, as even as possible
            lo, hi = i * len(cores) // n, (i + 1) * len(cores) // n
            mine = tuple(cores[lo:hi])
        else:                 # more slots than cores: share round-robin
            mine = (cores[i % len(cores)],)
        threads = cfg.threads_per_run or len(mine)
        slots.append(Slot(index=i, gpu=gpu, cores=mine, threads=threads))
    return slots
