"""What the local pool watches on every running run: its log's size and whether it still makes progress.

    watch = RunWatch(max_log_bytes=16 * 2**20, stall_s=30.0, stall_kill=False)
    for child in running: watch.check(child, progress)      # each pool tick; True: kill it (stall_kill)
    watch.ended(child)                                      # the last cut of its log; forget it

Log: stdout.log is cut to its head and newest tail past launcher.max_log_mb (sweeper.run.files.logcap).
Stall: a run shows progress by what it writes (its metrics, log, health and status files) or by CPU
time its process group uses. With none of these for launcher.stall_s seconds it is named stalled, once, in the
log and in the live view (with its process state: a stopped process, SIGSTOP, says so and how to resume it);
when it moves again that is said too. Nothing is killed unless launcher.stall_kill=true: then a stalled run's
group is killed and the pool's retry policy starts it again from its last checkpoint. The CPU time is read
from /proc only for runs whose files have been quiet for a while, so a run that logs costs one stat per file.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.run.files.logcap import cap_log, stopped_group
from sweeper.run.files.rundir import RunDir

CPU_CHECK_S = 2.0        # files quiet this long: read the group's CPU time too (once per interval)
STATES = {"T": "stopped (SIGSTOP or SIGTSTP): `kill -CONT {pid}` resumes it", "t": "stopped by a debugger",
          "D": "waiting on a disk or device (uninterruptible)", "S": "sleeping (waiting on something)",
          "Z": "a zombie (it has exited)", "R": "runnable"}


@dataclass
class _Seen:
    files: tuple = ()
    cpu: int | None = None
    moved: float = field(default_factory=time.monotonic)    # last time anything moved
    cpu_checked: float = 0.0
    stalled: bool = False


def _stamp(path: Path) -> tuple:
    try:
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns
    except OSError:
        return ()


def _proc_stats():
    """(pid, the fields of /proc/PID/stat after the command name) of every live process; fields[0] is the state,
    fields[2] the process group."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                yield int(name), f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue


def group_cpu_ticks(pgid: int) -> int | None:
    """CPU time (clock ticks) used by the live processes of a process group, with their reaped children's."""
    total, found = 0, False
    for _, fields in _proc_stats():
        if len(fields) > 14 and int(fields[2]) == pgid:      # fields[2]: pgrp; [11..14]: utime stime cutime cstime
            total += sum(int(x) for x in fields[11:15])
            found = True
    return total if found else None


def process_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


TELLING = "TtDZ"      # a member of the group in one of these states explains a stall better than a sleeping leader


def group_state(pgid: int) -> tuple[int, str | None]:
    """(pid, state) of the process that best explains why a run's process group does not move: one stopped
    (SIGSTOP: a user's script under a wrapper, e.g. sweeper.run.command, stops while the leader sleeps in
    wait()), traced, in uninterruptible wait or a zombie, else the leader itself."""
    found: list[tuple[int, str]] = []
    for pid, fields in _proc_stats():
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0].decode() in TELLING:
            found.append((pid, fields[0].decode()))
    if found:
        return min(found, key=lambda f: (TELLING.index(f[1]), f[0] != pgid, f[0]))
    return pgid, process_state(pgid)


class RunWatch:
    def __init__(self, max_log_bytes: int | None = None, stall_s: float = 0.0, stall_kill: bool = False):
        self.max_log_bytes, self.stall_s, self.stall_kill = max_log_bytes, float(stall_s or 0.0), stall_kill
        self.seen: dict[int, _Seen] = {}
        self.cap_failed: set[str] = set()

    def _files(self, job) -> tuple:
        rd = RunDir(job.run_dir) if job.run_dir is not None else None
        paths = [job.log_path] + ([rd.metrics_path, rd.health_path, rd.status_path] if rd is not None else [])
        return tuple(_stamp(p) for p in paths)

    def cap(self, child, progress, running: bool = True) -> None:
        if not self.max_log_bytes:
            return
        try:
            cap_log(child.job.log_path, self.max_log_bytes,
                    pause=stopped_group(child.proc.pid) if running else None)
        except OSError as e:           # the log is the run's: a failure to cut it is said once, never fatal
            if child.job.key not in self.cap_failed:
                self.cap_failed.add(child.job.key)
                progress.log(f"note: could not cut the log of {child.job.label} ({e.strerror or e}); it grows")

    def check(self, child, progress, now: float | None = None) -> bool:
        """Cut the log, update the run's progress; True when the run is stalled and must be killed."""
        self.cap(child, progress)
        if self.stall_s <= 0:
            return False
        now = time.monotonic() if now is None else now
        seen = self.seen.setdefault(child.proc.pid, _Seen(moved=now))
        files = self._files(child.job)
        moved = files != seen.files
        seen.files = files
        if not moved and now - seen.moved >= CPU_CHECK_S and now - seen.cpu_checked >= CPU_CHECK_S:
            seen.cpu_checked = now
            cpu = group_cpu_ticks(child.proc.pid)
            moved = cpu is not None and seen.cpu is not None and cpu != seen.cpu
            seen.cpu = cpu
        if moved:
            if seen.stalled:
                progress.stall_over(child.job, now - seen.moved)
            seen.moved, seen.stalled = now, False
            return False
        idle = now - seen.moved
        if idle < self.stall_s:
            return False
        if not seen.stalled:
            seen.stalled = True
            pid, state = group_state(child.proc.pid)
            why = STATES.get(state or "", "gone").format(pid=pid)
            then = ("killing it (launcher.stall_kill=true): it is retried from its last checkpoint"
                    if self.stall_kill else "nothing is killed (launcher.stall_kill=true would kill it)")
            progress.stalled(child.job, idle, f"process {pid} is {why}; {then}")
        return self.stall_kill

    def idle_s(self, child, now: float | None = None) -> float | None:
        """Seconds a stalled run has not moved (None when it is not stalled): for the live view."""
        seen = self.seen.get(child.proc.pid)
        if seen is None or not seen.stalled:
            return None
        return (time.monotonic() if now is None else now) - seen.moved

    def ended(self, child, progress) -> None:
        """The run's process has exited: the last cut of its log (no writer left), and forget it."""
        self.cap(child, progress, running=False)
        self.seen.pop(child.proc.pid, None)
