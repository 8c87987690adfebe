"""Runs of several ranks on Slurm: one array task per run, with every rank's resources, starting its ranks itself.

    cfg2 = for_ranks(cfg, 2)                   # the sbatch resources of a 2-rank run (per-rank keys times 2)
    slots = task_slots(os.environ, 2, True)    # in the task: each rank's GPU and cores within the allocation

launcher.cpus_per_task, gpus_per_node, gpus_per_task, the GPU count of gres (gpu:N, gpu:TYPE:N) and mem_gb are
per rank: a run of N ranks (launcher.ranks_per_run, or its variant's experiment.resources) is one array task
asking N times each (cpus_per_gpu, mem_per_gpu and mem_per_cpu scale by themselves). Runs of different widths
go in different arrays (an array has one set of resources); MaxArraySize splitting applies to each.

Inside the task (sweeper.backends.slurm.task.RunTask), the ranks are started as the local pool starts them
(sweeper.backends.local.ranks: torchrun's variables, a held MASTER_PORT on the node, one process group, a rank
that dies ends the run): rank r gets the r-th of the allocation's GPUs (CUDA_VISIBLE_DEVICES lists all of them
in rank order; rank r uses cuda:LOCAL_RANK) and the r-th contiguous share of the task's CPUs, with that many
threads. A run spans one node.
"""
from __future__ import annotations

import dataclasses
import os
import re

from sweeper.backends.local.slots import Slot, _split


def for_ranks(cfg, ranks: int):
    """The launcher config whose per-rank resources are multiplied for a run of `ranks` ranks."""
    if ranks == 1:
        return cfg
    times = {k: getattr(cfg, k) * ranks for k in ("cpus_per_task", "gpus_per_node", "gpus_per_task", "mem_gb")
             if getattr(cfg, k)}
    gres = cfg.gres
    if gres:
        gres = re.sub(r"(^|,)(gpu(?::[^:,]+)?):(\d+)", lambda m: f"{m.group(1)}{m.group(2)}:{int(m.group(3)) * ranks}",
                      gres)
    return dataclasses.replace(cfg, gres=gres, ranks_per_run=ranks, **times)


def task_slots(environ, ranks: int, use_gpus: bool, cpus: int | None = None) -> list[Slot]:
    """One slot per rank: the allocation's GPUs (CUDA_VISIBLE_DEVICES as Slurm set it) and its CPUs (this
    process's affinity, `cpus` of them when Slurm says how many) split contiguously."""
    gpus = [g.strip() for g in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()] if use_gpus else []
    if use_gpus and len(gpus) < ranks:
        raise RuntimeError(f"a run of {ranks} ranks needs {ranks} GPUs; the Slurm allocation shows "
                           f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')!r}")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    sets = _split(cores[:cpus] if cpus and cpus <= len(cores) else cores, ranks)
    threads = max(1, min(len(s) for s in sets))
    return [Slot(index=r, gpu=gpus[r] if use_gpus else None, cores=sets[r], threads=threads) for r in range(ranks)]
