"""Warm starts for the local pool: one warm launcher per slot forks a fresh, pinned child per run.

    warm = WarmStarts("sweeper.train:main", cwd, preload)  # the plan's task.entry (None: every run starts cold), task.preload
    warm.open(slots, env_of)                       # one `python -m sweeper.backends.local.warm_server` per slot, importing now
    proc = warm.start(job, slot, env)              # a WarmProc (pid, poll, wait, kill, fileno), None: start cold
    warm.close()

A cold start pays the interpreter and its imports per run on the critical path (the built-in trainer: torch
1.0 s, torch._dynamo 1.4 s, which every torch.optim optimizer imports when it is built); a slot's warm launcher
(sweeper.backends.local.warm_server) pays them once, with the slot's environment and affinity fixed before it starts: the
entry's module, the task's `preload` modules (what the entry imports inside its function) and, when those
brought torch in, torch._dynamo. It forks a clean child per run: its own session and process group, the run's
environment, the slot's cores, PR_SET_PDEATHSIG, its /proc cmdline and SWEEPER_JOB marker those of the cold start. Used only when it
is the same process a cold start would give: the task is an entry point (a task.command starts cold), the run's
environment equals the launcher's apart from SWEEPER_* per-run variables (a resumed run with another thread
count starts cold), and the launcher has one thread and no CUDA (else it answers "cold"). Results are bitwise
those of a cold start (tests/test_warm.py). SWEEPER_COLD_START=1 turns warm starts off.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

from sweeper.backends.local.pool import MARKER_ENV, pin_and_watch

COLD_ENV = "SWEEPER_COLD_START"
PAD = 8192                     # bytes the warm child's cmdline and marker may take (a run dir path fits)


def per_run(key: str) -> bool:
    """Variables that may differ between runs of one warm launcher: read after start, never at import."""
    return key.startswith("SWEEPER_") and key != "SWEEPER_SLOT"


def shared_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if not per_run(k)}


class WarmProc:
    """A child forked by a warm launcher, seen as a subprocess.Popen: pid, returncode, poll, wait, kill."""

    def __init__(self, server: "Server", pid: int):
        self.server, self.pid, self.args = server, pid, None

    @property
    def returncode(self) -> int | None:
        return self.server.exits.get(self.pid)

    def fileno(self) -> int:
        return self.server.replies

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.read(block=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        while self.returncode is None and self.server.read(block=True):
            pass
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class Server:
    """One slot's warm launcher process and its reply pipe."""

    def __init__(self, entry: str, cwd: str, env: dict, cores: tuple[int, ...], preload: tuple[str, ...] = ()):
        self.env = shared_env(env)
        r, w = os.pipe()
        os.set_blocking(r, False)
        self.replies, self.buf, self.answers, self.exits, self.child = r, b"", [], {}, None
        self.gone, self.why_gone = False, ""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sweeper.backends.local.warm_server", entry, str(w), ",".join(preload), "." * PAD], cwd=cwd,
            env={**self.env, MARKER_ENV: "." * PAD}, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, pass_fds=(w,), start_new_session=True,
            preexec_fn=pin_and_watch(set(cores), os.getpid()))
        os.close(w)

    def read(self, block: bool) -> bool:
        """Take in what the launcher said (waiting for something when block); False once it is gone."""
        if self.gone:
            return False
        if block:
            select.select([self.replies], [], [])
        try:
            data = os.read(self.replies, 65536)
        except BlockingIOError:
            return True
        if not data:
            self._gone()
            return False
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for msg in map(json.loads, lines):
            if "exit" in msg:
                self.exits[msg["exit"]] = msg["code"]
            elif "ok" not in msg:
                self.answers.append(msg)         # {"pid": N} or {"cold": why}, for the request waiting on it
                if "unavailable" in msg.get("cold", ""):
                    self.gone, self.why_gone = True, msg["cold"]
        return True

    def _gone(self) -> None:
        """The launcher died (killed): its running child got SIGTERM (PR_SET_PDEATHSIG) and is ours now
        (subreaper) or gone; its exit status is taken when it ends."""
        self.gone = True
        child = self.child
        if child is not None and child.pid not in self.exits:
            try:
                _, status = os.waitpid(child.pid, 0)
                self.exits[child.pid] = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.exits[child.pid] = -signal.SIGKILL

    def request(self, req: dict) -> dict:
        """Send a run; its answer: {"pid": N} or {"cold": why} (also when the launcher is gone)."""
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            while self.read(block=True):         # it exited: what it said before (why) is still in the pipe
                pass
            self.gone = True
            return {"cold": self.why_gone or "the warm launcher is gone"}
        while not self.answers:
            if not self.read(block=True):
                return {"cold": self.why_gone or "the warm launcher is gone"}
        return self.answers.pop(0)

    def hang_up(self) -> None:
        """Stdin at EOF: the launcher exits (close waits for it)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        self.hang_up()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.replies)


class WarmStarts:
    def __init__(self, entry: str | None, cwd: str, preload: tuple[str, ...] = ()):
        off = os.environ.get(COLD_ENV, "") not in ("", "0")
        self.entry, self.preload = None if off else entry, tuple(preload)
        self.why_cold = f"{COLD_ENV}=1" if off else "warm starts need a task.entry"
        self.cwd, self.servers = cwd, {}
        self.forked, self.cold = 0, 0
        self.unavailable: set[str] = set()       # why a launcher could not serve (its import failed), for the log

    def open(self, slots, env_of) -> None:
        """Start each slot's launcher now (they import while the sweeper goes on); env_of(slot): its env."""
        if self.entry is None:
            return
        for slot in slots:
            self.servers[slot.index] = Server(self.entry, self.cwd, env_of(slot), slot.cores, self.preload)

    def pids(self) -> set[int]:
        return {s.proc.pid for s in self.servers.values()}

    def start(self, job, slot, env: dict) -> WarmProc | None:
        """The job forked by its slot's launcher, or None when it must start cold (see the module doc)."""
        if self.entry is None:
            self.cold += 1
            return None
        server = self.servers.get(slot.index)
        argv = list(job.argv)
        if server is None or server.gone or (server.child is not None and server.child.poll() is None) \
                or argv[:4] != [sys.executable, "-m", "sweeper.run", self.entry] or len(argv) != 5 \
                or str(job.cwd or os.getcwd()) != self.cwd or shared_env(env) != server.env \
                or len("\0".join(argv)) + 1 > PAD or len(job.marker) > PAD:
            self.cold += 1
            return None
        answer = server.request({"argv": argv, "env": env, "cwd": self.cwd, "log": str(job.log_path),
                                 "marker": job.marker, "cores": list(slot.cores)})
        if "pid" not in answer:
            self.cold += 1
            self.unavailable.add(server.why_gone or answer.get("cold", "no answer"))
            return None
        self.forked += 1
        server.child = WarmProc(server, answer["pid"])
        return server.child

    def summary(self) -> str:
        """One line for the sweep's log: how many starts were warm."""
        if self.entry is None:
            return f"cold starts: {self.why_cold}" if self.cold else ""
        line = f"warm starts: {self.forked} of {self.forked + self.cold} run starts forked by a slot's warm launcher"
        why = sorted(self.unavailable | {s.why_gone for s in self.servers.values() if s.why_gone})
        return line + (f" ({'; '.join(why)})" if why else "")

    def close(self) -> None:
        for server in self.servers.values():
            server.hang_up()                     # all at once: they exit side by side
        for server in self.servers.values():
            server.close()
            if server.why_gone:
                self.unavailable.add(server.why_gone)
        self.servers = {}
