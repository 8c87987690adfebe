"""The ranks of a multi-process (data-parallel) run, seen from one of its processes. Torch-free at import.

    ranks = Ranks.from_env(os.environ)   # RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE; 1 rank without them
    run.rank, run.world_size, run.local_rank, run.is_main, run.distributed()   # RankedRun, a base of sweeper.run.Run
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

Loopback: a run whose ranks all sit on one node (LOCAL_WORLD_SIZE == WORLD_SIZE) listens on loopback only.
torch's TCPStore binds every interface (`::`) whatever MASTER_ADDR says, so rank 0 binds the rendezvous socket
itself on 127.0.0.1:MASTER_PORT and hands it to the store (master_listen_fd), every rank connects to
127.0.0.1, and gloo/NCCL are told to use the loopback interface (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME=lo,
unless already set). Under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE) and across nodes, torch's
env:// rendezvous is used as it is.
"""
from __future__ import annotations

import datetime
import os
import socket
import sys
from dataclasses import dataclass

from sweeper.run.checkpoint import Loaded, load_latest, read_checkpoint

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
    import torch.distributed as dist  # torch: already imported by the run's code (checked above)

    return dist if dist.is_available() else None


def grouped() -> bool:
    """True when this process belongs to an initialised torch.distributed process group."""
    dist = _dist()
    return dist is not None and dist.is_initialized()


def init_group(ranks: Ranks, backend: str | None = None, timeout_s: float | None = None) -> str:
    """Join the run's process group (env:// rendezvous): nccl when CUDA is visible, else gloo; on CUDA the
    current device becomes cuda:LOCAL_RANK first. Returns the backend; an existing group is kept."""
    import torch  # torch: only a run with ranks joins a group (the run API is torch-free)
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
    timeout = datetime.timedelta(seconds=timeout_s or timeout)
    if ranks.local_world_size == ranks.world_size and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        kwargs["store"] = loopback_store(ranks, int(os.environ["MASTER_PORT"]), timeout)
    dist.init_process_group(backend, rank=ranks.rank, world_size=ranks.world_size, timeout=timeout, **kwargs)
    return backend


LOOPBACK = "127.0.0.1"


def loopback_store(ranks: Ranks, port: int, timeout: datetime.timedelta):
    """The rendezvous store of a one-node run, listening on 127.0.0.1:port only (rank 0's); every rank connects
    there. gloo and NCCL are pointed at the loopback interface too (unless the user chose one)."""
    import torch.distributed as dist  # torch: only a run with ranks gets here

    if "lo" in {name for _, name in socket.if_nameindex()}:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    if not ranks.main:
        return dist.TCPStore(LOOPBACK, port, ranks.world_size, False, timeout=timeout)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)    # the launcher holds the port bound (HeldPort)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return dist.TCPStore(LOOPBACK, port, ranks.world_size, True, timeout=timeout, master_listen_fd=sock.detach())


def _device():
    import torch  # torch: a process group exists, so torch is in use
    import torch.distributed as dist  # deferred: torch (about 2 s to import), only when this runs

    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def any_rank(flag: bool) -> bool:
    """The OR of `flag` over every rank (one all-reduce), e.g. a stop request that reached some ranks only."""
    if not grouped():
        return bool(flag)
    import torch  # torch: a process group exists, so torch is in use
    import torch.distributed as dist  # deferred: torch (about 2 s to import), only when this runs

    t = torch.tensor([1.0 if flag else 0.0], device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def gather_to_main(obj):
    """Every rank's picklable `obj`, in rank order, on rank 0 (None on the other ranks)."""
    if not grouped():
        return [obj]
    import torch.distributed as dist  # torch: a process group exists, so torch is in use

    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def from_main(value):
    """Rank 0's picklable `value` on every rank."""
    if not grouped():
        return value
    import torch.distributed as dist  # torch: a process group exists, so torch is in use

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if grouped():
        import torch.distributed as dist  # torch: a process group exists, so torch is in use

        dist.barrier()


def leave_group() -> None:
    """Destroy the process group (at the end of a run: no NCCL/gloo teardown warnings)."""
    dist = _dist()
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()


class RankedRun:
    """The rank side of sweeper.run.Run (needs self.ranks: Ranks and self.dir: RunDir)."""
    ranks: Ranks

    @property
    def rank(self) -> int:
        return self.ranks.rank

    @property
    def world_size(self) -> int:
        return self.ranks.world_size

    @property
    def local_rank(self) -> int:
        """The index of this rank's GPU among the run's (cuda:LOCAL_RANK), and of its process on the node."""
        return self.ranks.local_rank

    @property
    def is_main(self) -> bool:
        return self.ranks.main

    def distributed(self, backend: str | None = None) -> str | None:
        """Join the run's process group (nccl on CUDA, gloo otherwise; on CUDA cuda:LOCAL_RANK becomes the
        current device) and return its backend; None for a one-process run started without a rendezvous."""
        if self.world_size == 1 and not self.ranks.launched:
            return None
        return init_group(self.ranks, backend)

    def _collective(self) -> bool:
        """True when the run API must agree with the other ranks (joining the group on first need)."""
        if self.world_size > 1 and not grouped():
            self.distributed()
        return grouped()

    def _load_latest(self) -> Loaded:
        """The newest valid checkpoint; several ranks: the one rank 0 found (only rank 0 moves files aside)."""
        if not self._collective():
            return load_latest(self.dir.ckpt_dir)
        loaded = load_latest(self.dir.ckpt_dir) if self.is_main else None
        name = from_main(loaded.path.name if loaded and loaded.path else None)
        if self.is_main:
            return loaded
        return Loaded(read_checkpoint(self.dir.ckpt_dir / name), self.dir.ckpt_dir / name) if name \
            else Loaded(None, None)
