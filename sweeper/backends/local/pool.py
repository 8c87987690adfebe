"""The process pool under the local launcher and the Hydra plugin: pinned children, retries, clean teardown.

    outcomes = run_pool(jobs, slots, adapter, RetryPolicy(), progress, grace_s=20.0)   # key -> final status dict

Each job runs as a fresh child in its own session (its own process group) with the slot's environment and CPU
affinity set before exec, and PR_SET_PDEATHSIG=SIGTERM so that a child whose sweeper dies (even by SIGKILL)
checkpoints and stops instead of running on unsupervised. A slot frees the moment its child exits and the next
job starts there. The adapter turns an exit into a status and, for failures, a failures.Failure; transient ones
are retried after a backoff, deterministic ones repeated across a group (a variant) stop the group.

Teardown: while the pool runs this process is a child subreaper, so grandchildren that leave their group
(setsid daemons) are adopted and killed when their run ends. Ctrl-C / SIGTERM: SIGTERM to every group, SIGKILL
after grace_s, or at once on a second Ctrl-C; then KeyboardInterrupt is raised. Leftover processes of a job
from an earlier sweeper are stopped before the job starts again; they are found by what a pool gave them, never
by their command line (a user's `du RUN_DIR` or `tensorboard --logdir RUN_DIR` is not ours): SWEEPER_JOB=marker
in their environment (set before exec, inherited by every descendant), or the run's recorded owner process
(its status: pid and start time, so a reused pid is never taken for it).

A job of N ranks (Job.ranks) takes N slots at once, placed by sweeper.backends.local.placement (one NVLink/NUMA
island when there is one; the oldest waiting wide job reserves the slots it waits for, so narrow jobs cannot
starve it) and started by sweeper.backends.local.ranks (torchrun's environment, a held MASTER_PORT, one process
group; a rank that dies takes the job down at once, named in Job.rank_exit for the adapter). max_parallel caps
running jobs when the slots would allow more (slots are ranks' places).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sweeper.backends.failures import CrashLoops, Failure, RetryPolicy
from sweeper.backends.local.placement import choose, reserve
from sweeper.backends.local.ranks import RankGroup, SlotGroup
from sweeper.backends.local.slots import Slot
from sweeper.errors import UsageError
from sweeper.run.files.atomic import open_log
from sweeper.run.files.owner import alive
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir

MARKER_ENV = "SWEEPER_JOB"       # every child's environment carries its job's marker (found again in /proc)

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)     # loaded before any fork: preexec_fn only calls into it
except OSError:  # pragma: no cover - not Linux
    _LIBC = None


@dataclass
class Job:
    key: str                    # unique: the run id
    label: str                  # for people: variant/seed_k
    group: str                  # crash loops are detected per group: the variant
    argv: list[str]
    log_path: Path              # stdout and stderr of every attempt, appended
    marker: str                 # unique to this job: finds its leftover processes (argument or SWEEPER_JOB)
    cwd: Path | None = None
    run_dir: Path | None = None       # progress reads the run's metrics and health here
    total_steps: int | None = None
    threads: int | None = None        # thread count to keep (a resumed checkpoint's), else the slot's
    extra_env: dict = field(default_factory=dict)
    pythonpath: str = ""              # PYTHONPATH entries before the inherited ones (slots.run_env)
    ranks: int = 1                    # processes of the job (data-parallel ranks), one slot each
    rank_exit: object = None          # set by the pool when an attempt ended: the rank whose exit ended it, or None


class Adapter(Protocol):
    def settle(self, job: Job, returncode: int, interrupted: bool, attempt: int) -> tuple[dict, Failure | None]:
        """The job's final status dict for this attempt, and its Failure (None when it did not fail)."""

    def not_started(self, job: Job, reason: str) -> dict:
        """Record that the job will not start in this invocation (its group was stopped); returns its status."""


@dataclass
class Child:
    job: Job
    slots: list[Slot]
    proc: subprocess.Popen      # or a warm.WarmProc, or a ranks.RankGroup (the same interface)
    started: float
    attempt: int
    fd: int | None = None       # readable when the process has ended: its pidfd, or its warm launcher's pipe

    @property
    def slot(self):
        return self.slots[0] if len(self.slots) == 1 else SlotGroup(tuple(self.slots))

    def wait_fds(self) -> list[int]:
        if hasattr(self.proc, "wait_fds"):
            return self.proc.wait_fds()
        return [self.fd] if self.fd is not None else []

    def __post_init__(self):
        if hasattr(self.proc, "wait_fds"):
            self.owns_fd = False
            return
        if hasattr(self.proc, "fileno"):
            self.fd = self.proc.fileno()
        elif hasattr(os, "pidfd_open"):
            try:
                self.fd = os.pidfd_open(self.proc.pid)
            except OSError:      # an old kernel: the wait falls back to the tick
                self.fd = None
        self.owns_fd = self.fd is not None and not hasattr(self.proc, "fileno")

    def release(self) -> None:
        if self.owns_fd:
            os.close(self.fd)
            self.owns_fd = False


# -- processes ---------------------------------------------------------------------------------------------

def pin_and_watch(cores: set[int], parent: int):
    """What a child does between fork and exec: its affinity, and stop when the sweeper (parent) dies."""
    def in_child() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:     # the sweeper died before prctl: stop now
                os.kill(os.getpid(), signal.SIGTERM)
    return in_child


class WarmInterrupted(Exception):
    """A signal reached the pool while a warm launcher (sweeper.backends.local.warm) was still importing and
    had not started the job: the job goes back to the queue, not started."""


def start_child(job: Job, slot: Slot | list[Slot], warm=None):
    """The job's process: forked by the slot's warm launcher (sweeper.backends.local.warm) when it can, else a cold
    Popen; a job of several ranks (a list of slots) as a ranks.RankGroup, always cold."""
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    slots = slot if isinstance(slot, list) else [slot]
    where = slots[0].name if len(slots) == 1 else f"{SlotGroup(tuple(slots)).name} ({len(slots)} ranks)"
    header = f"\n=== sweeper: start on {where} at {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n"
    with open_log(job.log_path) as log:            # never through a link planted in the run dir
        log.write(header.encode("utf-8", "surrogateescape"))
    if len(slots) > 1:
        return RankGroup.start(job.argv, job.cwd, lambda s: job_env(job, s), slots, job.log_path,
                               lambda s: pin_and_watch(set(s.cores), os.getpid()), header=header)
    slot = slots[0]
    env = job_env(job, slot)
    proc = warm.start(job, slot, env) if warm is not None else None
    if proc is not None:
        return proc
    log = open_log(job.log_path)
    try:
        return subprocess.Popen(job.argv, cwd=job.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=pin_and_watch(set(slot.cores), os.getpid()))
    finally:
        log.close()


def job_env(job: Job, slot: Slot) -> dict:
    """The complete environment of the job's process in this slot."""
    env = slot.child_env(os.environ, job.threads, job.pythonpath)
    env.update(job.extra_env)
    env[MARKER_ENV] = job.marker
    return env


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _proc_stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, pgid, state) of a process from /proc, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return int(rest[1]), int(rest[2]), rest[0].decode()
    except (OSError, IndexError, ValueError):
        return None


def _all_pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def children_of(pid: int) -> set[int]:
    return {p for p in _all_pids() if (st := _proc_stat(p)) is not None and st[0] == pid}


def job_processes(marker: str, run_dir: Path | None = None) -> list[int]:
    """Live processes (zombies excluded) a pool started for a job and their descendants: SWEEPER_JOB=marker in
    their environment, or the owner process the run recorded in `run_dir`'s status (alive: same pid, same start
    time). Never matched by command line."""
    tag, me, found = os.fsencode(f"{MARKER_ENV}={marker}"), os.getpid(), []
    for pid in _all_pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        if _alive(pid):
            found.append(pid)
    owner = _recorded_owner(run_dir) if run_dir is not None else None
    if owner is not None and owner not in found and owner != me:
        found.append(owner)
    return found


def _recorded_owner(run_dir: Path) -> int | None:
    """The pid of the process the run recorded as running it, when that very process (pid and start time)
    still runs on this host."""
    try:
        owner = RunDir(run_dir).read_status().owner
    except (UnreadableFile, OSError):
        return None
    return owner["pid"] if alive(owner) and _alive(owner["pid"]) else None


def stop_processes(pids: list[int], grace_s: float) -> None:
    """SIGTERM the processes and their groups, SIGKILL what is left after grace_s."""
    groups = {st[1] for p in pids if (st := _proc_stat(p))} - {os.getpgrp()}   # never our own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            signal_group(pgid, sig)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            _reap(pids)
            time.sleep(0.05)
        _reap(pids)


def _alive(pid: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[2] != "Z"


def _reap(pids) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


class Subreaper:
    """Adopt orphaned descendants while the pool runs (Linux); kill_adopted() ends them."""

    def __enter__(self) -> "Subreaper":
        self.mine: set[int] = set()            # our own Popen children: never touched here
        self.before = children_of(os.getpid())  # children the host process had already (Hydra plugin case)
        self.enabled = _LIBC is not None and _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        return self

    def adopted(self) -> list[int]:
        return sorted(children_of(os.getpid()) - self.before - self.mine) if self.enabled else []

    def kill_adopted(self) -> int:
        orphans = self.adopted()
        for pid in orphans:
            st = _proc_stat(pid)
            if st is not None and st[1] != os.getpgrp():
                signal_group(st[1], signal.SIGKILL)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        return len(orphans)

    def __exit__(self, *exc) -> None:
        for _ in range(3):     # a grandchild's own children are adopted once it dies
            if not self.kill_adopted():
                break
            time.sleep(0.05)
        if self.enabled:
            _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


class Interrupts:
    """Counts SIGINT/SIGTERM while the pool runs (each also wakes the pool's wait: self.fd becomes readable);
    restores the previous handlers afterwards."""

    def __init__(self):
        self.count = 0
        self._old: dict = {}

    def __enter__(self) -> "Interrupts":
        self.fd, self._w = os.pipe()
        os.set_blocking(self._w, False)
        os.set_blocking(self.fd, False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, *_) -> None:
        self.count += 1
        try:
            os.write(self._w, b"!")
        except OSError:
            pass

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        os.close(self.fd)
        os.close(self._w)


def wait_for_events(fds: list[int], timeout: float) -> None:
    """Sleep until one of fds is readable (a process ended, a signal came) or timeout seconds passed."""
    try:
        select.select([fd for fd in fds if fd is not None], [], [], max(0.0, timeout))
    except (OSError, ValueError):      # an fd closed under us: the caller looks again
        pass


# -- scheduling ----------------------------------------------------------------------------------------------

def run_pool(jobs: list[Job], slots: list[Slot], adapter: Adapter, policy: RetryPolicy, progress,
             grace_s: float = 20.0, tick_s: float = 0.2, warm=None, max_parallel: int | None = None,
             watch=None, gate=None) -> dict[str, dict]:
    """Run every job; returns key -> final status dict. Raises KeyboardInterrupt after a clean stop.

    Waits are events (a child's pidfd or its warm launcher's pipe, the signal pipe); tick_s bounds a wait so
    that progress is shown. warm: a sweeper.backends.local.warm.WarmStarts (opened on these slots), None: cold
    starts only. max_parallel: the most jobs running at once (None: as many as the slots hold). watch: a
    sweeper.backends.local.watch.RunWatch (logs cut to size, stalled runs named or killed), None: none.
    gate: a sweeper.execute.preflight_gate.PreflightGate (a preflight running beside the pool: the groups it holds
    wait, the slots it keeps stay free; its outcome drops groups or stops the pool), None: none."""
    queue, ready_at, attempts, waiting = list(jobs), {}, {}, {}    # waiting: key -> status of a failed try
    free, running, outcomes = sorted(slots, key=lambda s: s.index), [], {}
    loops = CrashLoops(policy.crash_loop_after)
    with Interrupts() as intr, Subreaper() as reaper:
        if warm is not None:
            warm.open(slots, lambda slot: job_env(jobs[0], slot) if jobs else {}, wake=intr.fd)
            reaper.mine |= warm.pids()
        halt = None                              # the adapter's stop (a run without the decision metric)
        while (queue or running) and not intr.count and not halt:
            now = time.monotonic()
            reserved: set[int] = set()           # slots kept for the oldest ready job that does not fit
            kept = set(gate.kept_slots()) if gate is not None else set()   # the running preflight's slot
            if gate is not None:
                with gate.spawning:
                    reaper.mine |= gate.pids()
                outcome = gate.outcome()
                if outcome is not None:
                    halt, dropped = outcome
                    queue = [j for j in queue if j.group not in dropped]   # their status is written already
                    gate = None
                    if halt:
                        break
            for job in list(queue):
                if job.group in loops.stopped:
                    queue.remove(job)
                    if job.key in waiting:       # it ran and failed: that stays its outcome, no retry now
                        outcomes[job.key] = waiting.pop(job.key)
                        continue
                    outcomes[job.key] = adapter.not_started(job, loops.stopped[job.group])
                    progress.not_started(job, outcomes[job.key])
                    continue
                if not free or ready_at.get(job.key, 0.0) > now or \
                        (max_parallel is not None and len(running) >= max_parallel) or \
                        (gate is not None and gate.holds(job.group)):
                    continue
                picked = choose([s for s in free if s.index not in reserved | kept], job.ranks)
                if picked is None:
                    if job.ranks > 1 and not reserved:
                        busy = {s.index for c in running for s in c.slots}
                        reserved = {s.index for s in reserve(slots, busy, job.ranks) or []}
                    continue
                leftovers = job_processes(job.marker, job.run_dir)
                if leftovers:
                    progress.log(f"stop   {job.label}: {len(leftovers)} process(es) left by an earlier sweeper "
                                 f"(pids {', '.join(map(str, leftovers))})")
                    stop_processes(leftovers, grace_s)
                queue.remove(job)
                waiting.pop(job.key, None)
                for s in picked:
                    free.remove(s)
                try:
                    proc = start_child(job, picked if job.ranks > 1 else picked[0], warm)
                except WarmInterrupted:          # Ctrl-C / SIGTERM while its launcher imported: not started
                    queue.insert(0, job)
                    free = sorted(free + picked, key=lambda s: s.index)
                    break
                attempts[job.key] = attempts.get(job.key, 0) + 1
                child = Child(job, picked, proc, time.monotonic(), attempts[job.key])
                reaper.mine |= set(getattr(proc, "pids", [proc.pid]))
                running.append(child)
                progress.started(job, child.slot)
            for child in [c for c in running if c.proc.poll() is None] if watch is not None else ():
                if watch.check(child, progress):                # stalled, and launcher.stall_kill=true
                    signal_group(child.proc.pid, signal.SIGKILL)
            for child in [c for c in running if c.proc.poll() is not None]:
                running.remove(child)
                child.release()
                if watch is not None:
                    watch.ended(child, progress)
                signal_group(child.proc.pid, signal.SIGKILL)    # what is left of its group (stuck workers)
                with gate.spawning if gate is not None else contextlib.nullcontext():
                    reaper.mine |= gate.pids() if gate is not None else set()     # the preflight's: not orphans
                    reaper.kill_adopted()
                free.extend(child.slots)
                free.sort(key=lambda s: s.index)
                job, wall = child.job, time.monotonic() - child.started
                job.rank_exit = getattr(child.proc, "cause", None)
                status, failure = adapter.settle(job, child.proc.returncode, False, child.attempt)
                if failure is not None and policy.should_retry(failure, child.attempt):
                    delay = policy.delay_s(child.attempt)
                    ready_at[job.key] = time.monotonic() + delay
                    waiting[job.key] = status
                    queue.insert(0, job)
                    progress.retrying(job, status, failure, child.attempt, policy.max_retries + 1, delay)
                    continue
                outcomes[job.key] = status
                progress.ended(job, status, wall)
                if failure is not None and loops.record(job.group, failure):
                    progress.log(f"STOP   variant {job.group}: {loops.stopped[job.group]}")
                halt = halt or getattr(adapter, "stop", None)
            if halt:
                break
            progress.tick([(c.job, c.slot) for c in running], queued=len(queue))
            if not (queue or running) or any(c.proc.poll() is not None for c in running):
                continue                         # done (no last tick's wait), or another child has ended
            due = [ready_at.get(j.key, 0.0) - time.monotonic() for j in queue if free and j.group not in loops.stopped]
            wait_for_events([intr.fd, *(fd for c in running for fd in c.wait_fds())], min([tick_s, *due]))
        if (intr.count or halt) and running:
            progress.log(f"{'stopping the sweep' if halt else 'interrupted'}: stopping {len(running)} running "
                         f"run(s) (SIGTERM; SIGKILL after {grace_s:g}s; Ctrl-C again to kill now)")
            _stop_all(running, intr, grace_s)
            for child in running if watch is not None else ():
                watch.ended(child, progress)
            for child in running:
                child.job.rank_exit = getattr(child.proc, "cause", None)
                status, _ = adapter.settle(child.job, child.proc.returncode, True, child.attempt)
                outcomes[child.job.key] = status
                progress.ended(child.job, status, time.monotonic() - child.started)
        for child in running:
            child.release()
        if warm is not None:
            warm.close(now=bool(intr.count or halt))
            if warm.summary():
                progress.log(warm.summary())
    progress.close()
    if intr.count:
        raise KeyboardInterrupt
    if halt:
        raise UsageError(halt)               # one line, exit 2; the stopped runs are interrupted (resumable)
    return outcomes


def _stop_all(running: list[Child], intr: Interrupts, grace_s: float) -> None:
    first = intr.count
    for child in running:
        signal_group(child.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(c.proc.poll() is None for c in running) and time.monotonic() < deadline and intr.count == first:
        time.sleep(0.05)
    for child in running:
        signal_group(child.proc.pid, signal.SIGKILL)   # the rest of each group, e.g. DataLoader workers
        child.proc.kill() if child.proc.poll() is None else None
        child.proc.wait()
