"""The ranks of a multi-process (data-parallel) run, seen from one of its processes. Torch-free at import.

    ranks = Ranks.from_env(os.environ)   # RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; 1 rank without them
    backend = init_group(ranks)          # torch.distributed from MASTER_ADDR/MASTER_PORT: nccl on CUDA, else gloo
    any_rank(flag)                       # True on every rank when it is True on one rank
    gather_to_main(obj)                  # [obj of rank 0, obj of rank 1, ...] on rank 0, None on the others
    from_main(value)                     # rank 0's value on every rank
    barrier()

The variables are torchrun's: the local pool (sweeper.backends.local.ranks) and the Slurm task set them, with
MASTER_ADDR and a free MASTER_PORT, before each rank starts; a script started by torchrun works the same way.
Rank r of a run uses GPU cuda:LOCAL_RANK of the run's GPUs (CUDA_VISIBLE_DEVICES lists them all, in rank
order, as torchrun gives them). Once a process group exists (init_group, or the run API on first need), every
function below except Ranks.from_env is a collective: every rank must call it at the same point, in the same
order, or the run waits (until SWEEPER_DIST_TIMEOUT_S, default 300 s; the local pool ends a run as soon as one
of its ranks dies). Without a process group they act on this process alone.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
RENDEZVOUS_VARS = ("MASTER_ADDR", "MASTER_PORT")
TIMEOUT_ENV = "SWEEPER_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes the run's files (status, metrics, summary, health, checkpoints)."""
        return self.rank == 0

    @classmethod
    def from_env(cls, environ) -> "Ranks":
        """The ranks the launcher set (1 rank when it set none); ValueError naming a bad variable."""
        values = {}
        for var in RANK_VARS:
            raw = environ.get(var, "").strip()
            if raw and not raw.isdigit():
                raise ValueError(f"{var}={raw!r}: expected a non-negative integer (set by the launcher)")
            values[var] = int(raw) if raw else None
        world = values["WORLD_SIZE"] or 1
        rank = values["RANK"] or 0
        local = values["LOCAL_RANK"] if values["LOCAL_RANK"] is not None else rank
        local_world = values["LOCAL_WORLD_SIZE"] or world
        if not (rank < world and local < local_world <= world):
            raise ValueError(f"RANK={rank}, LOCAL_RANK={local}, WORLD_SIZE={world}, LOCAL_WORLD_SIZE={local_world}: "
                             f"expected RANK < WORLD_SIZE and LOCAL_RANK < LOCAL_WORLD_SIZE <= WORLD_SIZE")
        return cls(rank, local, world, local_world)

    @property
    def launched(self) -> bool:
        """True when a launcher gave this process a rendezvous (MASTER_ADDR and MASTER_PORT), even for 1 rank."""
        return all(os.environ.get(v) for v in RENDEZVOUS_VARS)


def _dist():
    """torch.distributed when torch is in use here (never imported on the user's behalf before that)."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    return dist if dist.is_available() else None


def grouped() -> bool:
    """True when this process belongs to an initialised torch.distributed process group."""
    dist = _dist()
    return dist is not None and dist.is_initialized()


def init_group(ranks: Ranks, backend: str | None = None, timeout_s: float | None = None) -> str:
    """Join the run's process group (env:// rendezvous): nccl when CUDA is visible, else gloo; on CUDA the
    current device becomes cuda:LOCAL_RANK first. Returns the backend; an existing group is kept."""
    import datetime

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_backend()
    missing = [v for v in RENDEZVOUS_VARS if not os.environ.get(v)]
    if missing:
        raise RuntimeError(f"{ranks.world_size} ranks but no {' and '.join(missing)} in the environment: start "
                           f"the run with sweeper (launcher.ranks_per_run) or torchrun")
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    timeout = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    kwargs = {}
    if backend == "nccl":
        torch.cuda.set_device(ranks.local_rank)
        kwargs["device_id"] = torch.device("cuda", ranks.local_rank)
    dist.init_process_group(backend, rank=ranks.rank, world_size=ranks.world_size,
                            timeout=datetime.timedelta(seconds=timeout_s or timeout), **kwargs)
    return backend


def _device():
    import torch
    import torch.distributed as dist

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def any_rank(flag: bool) -> bool:
    """The OR of `flag` over every rank (one all-reduce), e.g. a stop request that reached some ranks only."""
    if not grouped():
        return bool(flag)
    import torch
    import torch.distributed as dist

    t = torch.tensor([1.0 if flag else 0.0], device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def gather_to_main(obj):
    """Every rank's picklable `obj`, in rank order, on rank 0 (None on the other ranks)."""
    if not grouped():
        return [obj]
    import torch.distributed as dist

    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def from_main(value):
    """Rank 0's picklable `value` on every rank."""
    if not grouped():
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if grouped():
        import torch.distributed as dist

        dist.barrier()


def leave_group() -> None:
    """Destroy the process group (at the end of a run: no NCCL/gloo teardown warnings)."""
    dist = _dist()
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()
