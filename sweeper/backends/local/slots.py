"""Slots of the local pool: which GPU and which CPU cores each concurrent run gets.

    slots = make_slots(LocalLauncherConf(), n_runs=12)
    env = slots[0].child_env(os.environ)      # CUDA_VISIBLE_DEVICES, OMP/MKL threads, set BEFORE the child starts

GPUs are found without initialising CUDA in the parent (sweeper.backends.local.gpu_topology): `nvidia-smi -L` lists the
GPUs
and their MIG instances (each MIG instance is a slot of its own, addressed by its MIG UUID), `nvidia-smi topo -m`
gives each GPU's near CPU set ("CPU Affinity"). An existing CUDA_VISIBLE_DEVICES is honoured: indices, GPU UUIDs
(or unique prefixes) and MIG UUIDs; ids nvidia-smi does not know are passed on as they are. With no GPU (or
launcher.cpu_only=true) the pool runs CPU slots. A GPU slot's cores come from its GPU's near CPU set (the usable
cores of each set split among the slots near it); without topology, or when a slot's set has no usable core,
the cores of this process's affinity set are split contiguously. Either way the sets are disjoint, one per slot
(shared round-robin only when there are more slots than cores), and every run gets the same number
of threads: the size of the smallest set (idle OpenMP threads spin and steal cores from neighbours otherwise;
equal thread counts keep every run of a sweep bitwise reproducible, and a run resumed in another slot passes
the checkpoint's thread-count check). With runs_per_device > 1 the slots alternate devices (gpu0, gpu1, gpu0,
gpu1, ...), so max_parallel spreads runs over devices before it doubles them up.

A run of N ranks (launcher.ranks_per_run, experiment.resources) takes N slots on N distinct devices (or N CPU
slots) at once; make_slots(..., ranks=[...]) sizes the pool for the plan's runs (a slot is then one rank's
share: its GPU, cores and threads) and refuses a run wider than the devices. Each slot records its NUMA group
(its GPU's near CPU set, or the node of its first core) and the devices its GPU reaches over NVLink, which
sweeper.backends.local.placement uses to keep a run's ranks on one island.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sweeper.backends.local.gpu_topology import (
    Device,
    discover_devices,
    discover_memory,
    parse_cpu_list,
    resolve_visible,
    unknown_entries,
)
from sweeper.backends.local.schema import LocalLauncherConf
from sweeper.errors import UsageError

BUSY_MIB, BUSY_FRACTION = 1024, 0.05    # memory another process may hold on a GPU still counted free
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def run_env(base: dict, threads: int, pythonpath: str | Path = "") -> dict:
    """A run's environment, complete before it starts (torch reads thread counts at import); Slurm tasks too.

    pythonpath: what goes on PYTHONPATH before the inherited entries; for a run of a task
    `sweeper.config.task.python_path(task)` (the task's cwd; never sweeper's checkout: sweeper.config.import_path)."""
    env = dict(base)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")     # spinning OpenMP workers steal cores from neighbours
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), base.get("PYTHONPATH")) if p)
    return env


@dataclass(frozen=True)
class Slot:
    index: int
    gpu: str | None             # the id put in CUDA_VISIBLE_DEVICES; None = a CPU slot
    cores: tuple[int, ...]      # CPU affinity of the run
    threads: int                # OMP_NUM_THREADS / MKL_NUM_THREADS / torch threads
    numa: int | None = None     # its NUMA group: the GPU's near CPU set, or the node of its first core
    links: tuple[str, ...] = () # devices (slot.gpu ids) its GPU reaches over NVLink

    @property
    def name(self) -> str:
        return f"gpu{self.gpu}" if self.gpu is not None else f"cpu{self.index}"

    def child_env(self, base: dict, threads: int | None = None, pythonpath: str | Path = "") -> dict:
        """threads: a count to keep instead of the slot's (a resumed checkpoint's); pythonpath: see run_env."""
        env = run_env(base, threads or self.threads, pythonpath)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu if self.gpu is not None else ""
        if self.gpu is not None:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"   # an index means what nvidia-smi calls it
        env["SWEEPER_SLOT"] = str(self.index)
        return env


NO_GPU = ("", "-1")          # CUDA_VISIBLE_DEVICES values that say "no GPU" (honoured: CPU-core slots)


def available_cores(cfg: LocalLauncherConf) -> list[int]:
    mine = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if cfg.cores is None:
        return mine
    bad = [c for c in cfg.cores if c not in mine]
    if bad:
        raise UsageError(f"launcher.cores={list(cfg.cores)}: core(s) {bad} are not available to this process "
                         f"(available: {mine})")
    return sorted(cfg.cores)


def _env_refusal(value: str, known: list[Device]) -> str | None:
    """Why a preset CUDA_VISIBLE_DEVICES leaves the pool no GPU that exists, or None when it names only listed
    ones (or nvidia-smi lists none: nothing to check it against). Never a silent fall back to CPU cores."""
    if not known or value.strip() in NO_GPU:
        return None
    ids = [d.id for d in known]
    listed = ", ".join(ids[:6]) + (f", ... ({len(ids)} in all)" if len(ids) > 6 else "")
    fix = "unset it to use every GPU, or run on CPU cores with launcher.cpu_only=true"
    unknown = [e for e in unknown_entries(value, known) if e.isdigit() or e.startswith(("GPU-", "MIG-"))]
    if unknown:
        return (f"CUDA_VISIBLE_DEVICES={value} (set in your environment) names GPU(s) {', '.join(unknown)} that "
                f"nvidia-smi does not list on this node (it lists {listed}): set it to ids `nvidia-smi -L` shows, "
                f"{fix}")
    if not resolve_visible(value, known):
        return (f"CUDA_VISIBLE_DEVICES={value!r} (set in your environment) hides every GPU of this node (nvidia-smi "
                f"lists {listed}): {fix}")
    return None


def visible_devices(cfg: LocalLauncherConf, environ: dict | None = None, notes: list[str] | None = None) -> \
        list[Device]:
    """The GPU devices (whole GPUs or MIG instances) a child may be given, without initialising CUDA here. A
    preset CUDA_VISIBLE_DEVICES that names a device nvidia-smi does not list, or hides them all by other ids, is
    refused (UsageError); the usual way to say "no GPU" (CUDA_VISIBLE_DEVICES='' or -1) is honoured: no device,
    CPU-core slots, and a line in notes says so. The plan-time probe and the pool see the same devices, from this
    one function."""
    environ = os.environ if environ is None else environ
    if cfg.cpu_only:
        return []
    known = discover_devices()
    if environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in NO_GPU:
        if cfg.devices is None and known and notes is not None:
            notes.append(f"CUDA_VISIBLE_DEVICES={environ['CUDA_VISIBLE_DEVICES']!r} (set in your environment) hides "
                         f"this node's {len(known)} GPU(s): runs go to CPU-core slots only, each with "
                         f"CUDA_VISIBLE_DEVICES='' (unset it to use the GPUs)")
        visible = []
    elif "CUDA_VISIBLE_DEVICES" in environ:
        refusal = _env_refusal(environ["CUDA_VISIBLE_DEVICES"], known)
        if refusal:
            raise UsageError(refusal)
        visible = resolve_visible(environ["CUDA_VISIBLE_DEVICES"], known)
    else:
        visible = known
    if cfg.devices is None:
        return visible
    chosen, missing = [], []
    for want in (str(d) for d in cfg.devices):
        match = [d for d in visible if want == d.id or want in d.aliases]
        (chosen.append(match[0]) if match else missing.append(want))
    if missing:
        raise UsageError(f"launcher.devices={[str(d) for d in cfg.devices]}: device(s) {missing} are not visible "
                         f"(visible: {[d.id for d in visible] or 'none'}; CUDA_VISIBLE_DEVICES is honoured)")
    return chosen


def in_use(device: Device, memory: dict[int, tuple[int, int]]) -> str | None:
    """How much of a whole GPU another process fills now ("31.2 of 80.0 GiB"), or None when it is free (at most
    BUSY_MIB and BUSY_FRACTION of its memory used: a display server's share) or unknown (a MIG instance)."""
    if device.gpu_index is None or (device.uuid or "").startswith("MIG-") or device.gpu_index not in memory:
        return None
    used, total = memory[device.gpu_index]
    if used <= max(BUSY_MIB, BUSY_FRACTION * total):
        return None
    return f"{used / 1024:.1f} of {total / 1024:.1f} GiB"


def avoid_busy(devices: list[Device], chosen: bool, notes: list[str], need: int = 1) -> list[Device]:
    """The devices to use, leaving out GPUs another process fills while `need` others are free (named in notes);
    chosen: launcher.devices named them (then they are used, and named)."""
    memory = discover_memory() if devices else {}
    busy = {d.id: use for d in devices if (use := in_use(d, memory))}
    if not busy:
        return devices
    names = ", ".join(f"gpu{i} ({use} in use)" for i, use in busy.items())
    free = [d for d in devices if d.id not in busy]
    if len(free) >= need and not chosen:
        notes.append(f"another process fills {names}: runs go to {', '.join('gpu' + d.id for d in free)} only "
                     f"(launcher.devices=[...] to use it anyway)")
        return free
    notes.append(f"another process fills {names}: runs share it with that process and may run out of memory "
                 f"(free it, or choose other GPUs with launcher.devices=[...])")
    return devices


def _split(cores: list[int], n: int) -> list[tuple[int, ...]]:
    """n disjoint, contiguous, near-even sets of cores; round-robin single cores when n > len(cores)."""
    if n <= len(cores):
        return [tuple(cores[i * len(cores) // n:(i + 1) * len(cores) // n]) for i in range(n)]
    return [(cores[i % len(cores)],) for i in range(n)]


def _core_sets(owners: list[Device | None], cores: list[int]) -> list[tuple[int, ...]]:
    """Each slot's cores: from its GPU's near CPU set when every slot has usable near cores and the near sets
    are disjoint or equal (one socket, one set); otherwise a contiguous split of all usable cores."""
    usable = set(cores)
    near = [frozenset(d.cpus) & usable if d is not None and d.cpus else frozenset() for d in owners]
    groups = sorted(set(near), key=min if all(near) else len)
    if owners and all(near) and all(not (a & b) for a in groups for b in groups if a != b):
        sets: list[tuple[int, ...]] = [()] * len(owners)
        for g in groups:
            members = [i for i, n in enumerate(near) if n == g]
            for i, part in zip(members, _split(sorted(g), len(members))):
                sets[i] = part
        return sets
    return _split(cores, len(owners))


def make_slots(cfg: LocalLauncherConf, n_runs: int, environ: dict | None = None,
               cores: list[int] | None = None, ranks: Sequence[int] = (), notes: list[str] | None = None) -> list[Slot]:
    """The pool's slots for n_runs runs (cores: the usable cores, default launcher.cores or this process's;
    ranks: each run's ranks, default launcher.ranks_per_run each). A slot is one rank's place. GPUs another
    process fills are left out while others are free (avoid_busy); notes gets a line naming them."""
    ranks = sorted(ranks or [cfg.ranks_per_run] * max(1, n_runs), reverse=True)
    widest = ranks[0]
    notes = [] if notes is None else notes
    devices = avoid_busy(visible_devices(cfg, environ, notes), cfg.devices is not None, notes, need=widest)
    cores = available_cores(cfg) if cores is None else sorted(cores)
    if devices:
        if widest > len(devices):
            raise UsageError(f"a run of {widest} ranks needs {widest} GPUs, one per rank (launcher.ranks_per_run / "
                             f"experiment.resources); {len(devices)} visible ({', '.join(d.id for d in devices)}; "
                             f"launcher.devices and CUDA_VISIBLE_DEVICES are honoured)")
        owners: list[Device | None] = [d for _ in range(cfg.runs_per_device) for d in devices]
    else:
        per_run = cfg.threads_per_run or 1
        owners = [None] * max(1, len(cores) // per_run, widest)
    cap = sum(ranks[:cfg.max_parallel]) if cfg.max_parallel else len(owners)   # the widest max_parallel runs
    n = min(len(owners), max(widest, min(sum(ranks), cap)))
    owners = owners[:n]
    sets = _core_sets(owners, cores) if devices else _split(cores, n)
    threads = cfg.threads_per_run or min(len(s) for s in sets)
    groups = {g: i for i, g in enumerate(dict.fromkeys(frozenset(d.cpus) for d in devices if d.cpus))}
    by_index = {d.gpu_index: d.id for d in devices if not (d.uuid or "").startswith("MIG-")}
    nodes = numa_nodes()
    return [Slot(index=i, gpu=d.id if d is not None else None, cores=sets[i], threads=threads,
                 numa=(groups.get(frozenset(d.cpus)) if d is not None else nodes.get(sets[i][0])),
                 links=tuple(by_index[g] for g in (d.nvlink if d is not None else ()) if g in by_index))
            for i, d in enumerate(owners)]


def numa_nodes() -> dict[int, int]:
    """core -> NUMA node of this machine (/sys/devices/system/node); {} where it cannot be read."""
    out = {}
    try:
        names = [n for n in os.listdir("/sys/devices/system/node") if n.startswith("node") and n[4:].isdigit()]
    except OSError:
        return {}
    for name in names:
        try:
            with open(f"/sys/devices/system/node/{name}/cpulist") as f:
                out.update({c: int(name[4:]) for c in parse_cpu_list(f.read())})
        except OSError:
            continue
    return out
