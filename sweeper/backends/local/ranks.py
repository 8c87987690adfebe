"""The ranks of one run as the local pool (and a Slurm task) starts them: torchrun's environment, inside our pool.

    port = HeldPort()                                    # a free MASTER_PORT, held until the run ends
    group = RankGroup.start(job, slots, env_of, port)    # N processes, one process group; a Popen to the pool
    group.poll(); group.wait(); group.kill(); group.cause   # cause: the rank whose exit ended the run, or None

Each rank r of a run of N gets, set before it starts: MASTER_ADDR=127.0.0.1, MASTER_PORT (the run's own),
RANK=LOCAL_RANK=r, WORLD_SIZE=LOCAL_WORLD_SIZE=N (and torchrun's GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE), its
slot's cores as CPU affinity and OMP/MKL threads, and CUDA_VISIBLE_DEVICES = the run's GPUs in rank order (as
torchrun gives them: rank r computes on cuda:LOCAL_RANK, its own GPU; "" on CPU, where ranks use gloo). Rank 0
writes to the run's log, rank r > 0 to stdout.rank<r>.log beside it.

Ports: HeldPort binds 127.0.0.1:0 with SO_REUSEADDR and keeps that socket, bound but not listening, until the
run ends. The kernel gives a bound port to no other bind(0) on the machine (ours: 50 runs starting at once; other
programs), while rank 0's rendezvous store (torch's TCPStore sets SO_REUSEADDR) may still bind and listen on it;
torchrun's bind-then-close leaves a window in which a second run can draw the same port (pytorch #73320).

One process group: rank 0 starts in a new process group (not a new session: the ranks must share one) and the
others join it, so the pool's group signals (Ctrl-C: SIGTERM, then SIGKILL) reach every rank and their own
children; PR_SET_PDEATHSIG stops each rank when the sweeper dies, as for one-process runs. A rank that exits
with a status other than 0 or 75 (stopped with a checkpoint) takes its run down at once: the pool SIGKILLs the
other ranks (a rank blocked in a gloo/NCCL collective with a dead peer would wait for its timeout), and the
run's exit is that rank's (`cause`, named in the run's status). A rank still running RANK_GRACE_S after another
one exited normally is killed too (a collective that the finished rank skipped would never return).
Multi-rank runs start cold (fresh interpreters): a slot's warm launcher forks into a session of its own, and
the ranks must share a process group.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sweeper.backends.failures import Failure, classify, signal_name
from sweeper.run.files.atomic import open_log, read_tail
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import EXIT_INTERRUPTED

RANK_GRACE_S = 60.0          # a rank still running this long after another exited normally is stopped
HOST = "127.0.0.1"


class HeldPort:
    """A TCP port free on this machine, held (bound, SO_REUSEADDR, not listening) until close()."""

    def __init__(self, host: str = HOST):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.host, self.port = host, self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


@dataclass(frozen=True)
class SlotGroup:
    """The slots of one multi-rank run, as Progress shows it (name, cores, threads)."""
    slots: tuple

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.slots)

    @property
    def cores(self) -> tuple[int, ...]:
        return tuple(c for s in self.slots for c in s.cores)

    @property
    def threads(self) -> int:
        return self.slots[0].threads


def rank_env(env: dict, rank: int, world: int, port: int, gpus: list[str | None], host: str = HOST) -> dict:
    """Rank `rank`'s environment: its slot's (`env`) plus torchrun's variables and the run's GPUs."""
    out = dict(env)
    out.update(MASTER_ADDR=host, MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
               LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0", ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world))
    out["CUDA_VISIBLE_DEVICES"] = ",".join(g for g in gpus if g is not None) if all(gpus) else ""
    return out


def rank_log(log_path: Path, rank: int) -> Path:
    return RunDir(Path(log_path).parent).rank_path(Path(log_path), rank)


@dataclass(frozen=True)
class RankExit:
    rank: int
    world: int
    pid: int
    returncode: int

    def describe(self) -> str:
        how = f"was killed by {signal_name(self.returncode)}" if signal_name(self.returncode) and \
            self.returncode < 0 else f"exited with status {self.returncode}"
        return f"rank {self.rank} of {self.world} (pid {self.pid}) {how}; the run's other ranks were stopped"

    def failure(self, failure, log_path: Path):
        """The run's Failure named by this rank: classified from its own exit and log when it is not rank 0
        (rank 0 records its own error in the run's status, which `failure` was classified from)."""
        if self.rank:
            failure = classify(self.returncode, None, read_tail(rank_log(log_path, self.rank)))
        message = f"rank {self.rank} of {self.world}: {failure.message} (pid {self.pid}; the other ranks were stopped)"
        return Failure(failure.kind, message, f"{failure.kind}: rank {self.rank}: {failure.signature}")


class RankGroup:
    """The N processes of one run, seen by the pool as one subprocess.Popen (pid = rank 0's = the group id)."""

    def __init__(self, procs: list[subprocess.Popen], port: HeldPort | None, log_path: Path | None = None):
        self.procs, self.port, self.log_path = procs, port, log_path
        self.pid, self.pids, self.args = procs[0].pid, [p.pid for p in procs], None
        self.returncode: int | None = None
        self.cause: RankExit | None = None
        self.first_exit: float | None = None
        self._fds = {p.pid: _pidfd(p.pid) for p in procs}

    @classmethod
    def start(cls, argv: list[str], cwd, env_of, slots: list, log_path: Path, in_child, port: HeldPort | None = None,
              header: str = "") -> "RankGroup":
        """Start a rank per slot: env_of(slot) is the slot's environment, in_child(slot) what runs between fork
        and exec (affinity, PR_SET_PDEATHSIG). A rank that cannot start stops those already started."""
        port = port or HeldPort()
        gpus = [s.gpu for s in slots]
        procs: list[subprocess.Popen] = []
        try:
            for r, slot in enumerate(slots):
                path = rank_log(log_path, r)
                if r and header:
                    with open_log(path) as log:
                        log.write(header.encode("utf-8", "surrogateescape"))
                with open_log(path) as log:
                    procs.append(subprocess.Popen(
                        argv, cwd=cwd, env=rank_env(env_of(slot), r, len(slots), port.port, gpus, port.host),
                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                        process_group=0 if r == 0 else procs[0].pid, preexec_fn=in_child(slot)))
        except (OSError, subprocess.SubprocessError):
            for p in procs:
                p.kill()
                p.wait()
            port.close()
            raise
        return cls(procs, port, log_path)

    # -- what the pool calls -----------------------------------------------------------------------------------
    def wait_fds(self) -> list[int]:
        """fds that become readable when a rank still running exits (the pool's event wait)."""
        return [fd for p in self.procs if p.returncode is None and (fd := self._fds.get(p.pid)) is not None]

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        codes = [p.poll() for p in self.procs]
        if self.first_exit is None and any(c is not None for c in codes):
            self.first_exit = time.monotonic()
        failed = [r for r, c in enumerate(codes) if c is not None and c not in (0, EXIT_INTERRUPTED)]
        if failed and self.cause is None:
            # seen together: a rank killed by a signal is the cause, the others' errors (a collective whose
            # peer vanished) its consequence; else the lowest rank
            r = min(failed, key=lambda r: (codes[r] >= 0, r))
            self.cause = RankExit(r, len(self.procs), self.procs[r].pid, codes[r])
            self._kill_rest()
        if self.cause is None and self.first_exit is not None and None in codes \
                and time.monotonic() - self.first_exit > RANK_GRACE_S:
            r = codes.index(None)
            self.cause = RankExit(r, len(self.procs), self.procs[r].pid, -signal.SIGKILL)
            self._note(f"rank {r} still ran {RANK_GRACE_S:g}s after another rank exited: stopped")
            self._kill_rest()
        if None in codes:
            return None
        self.returncode = self.cause.returncode if self.cause else codes[0]
        self._release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        for p in self.procs:
            p.wait()
        return self.poll()

    def kill(self) -> None:
        self._kill_rest()

    def send_signal(self, sig: int) -> None:
        """`sig` to every rank (not to their children: a DataLoader worker dies of SIGUSR1)."""
        for p in self.procs:
            if p.returncode is None:
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass

    def _kill_rest(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)         # every rank and what they started
        except (ProcessLookupError, PermissionError):
            pass
        self.send_signal(signal.SIGKILL)                # a rank that left the group

    def _note(self, line: str) -> None:
        if self.log_path is not None:
            with open_log(self.log_path) as log:
                log.write(f"=== sweeper: {line} ===\n".encode("utf-8", "surrogateescape"))

    def _release(self) -> None:
        if self.cause is not None:
            self._note(self.cause.describe())
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds = {}
        if self.port is not None:
            self.port.close()
            self.port = None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    except OSError:
        return None
