"""Warm starts for the local pool: one warm launcher per slot forks a fresh, pinned child per run.

    warm = WarmStarts("sweeper.train:main", cwd, preload)  # the plan's task.entry (None: every run starts cold),
    task.preload
    warm.open(slots, env_of)                       # one `python -m sweeper.backends.local.warm_server` per slot,
    importing now
    proc = warm.start(job, slot, env)              # a WarmProc (pid, poll, wait, kill, fileno), None: start cold
    warm.close()

A python task.command (`python script.py ...`, run by sweeper.run.command in its own process) is warm too:
`warm = WarmStarts(COMMAND, cwd, command_preload(spec))`; its launcher imports the script's own third-party
imports (found by reading the script, never running it: modules outside the project folder) and task.preload,
and forks `python -m sweeper.run.command ...`, which runs the script as `__main__`.

A cold start pays the interpreter and its imports per run on the critical path (the built-in trainer: torch
1.0 s, torch._dynamo 1.4 s, which every torch.optim optimizer imports when it is built); a slot's warm launcher
(sweeper.backends.local.warm_server) pays them once, with the slot's environment and affinity fixed before it starts:
the
entry's module, the task's `preload` modules (what the entry imports inside its function) and, when those
brought torch in, torch._dynamo. It forks a clean child per run: its own session and process group, the run's
environment, the slot's cores, PR_SET_PDEATHSIG, its /proc cmdline and SWEEPER_JOB marker those of the cold start. Used
only when it
is the same process a cold start would give: the task is an entry point (a task.command starts cold), the run's
environment equals the launcher's apart from SWEEPER_* per-run variables (a resumed run with another thread
count starts cold), and the launcher has one thread and no CUDA (else it answers "cold"). Results are bitwise
those of a cold start (tests/test_warm.py). SWEEPER_COLD_START=1 turns warm starts off.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from sweeper.backends.local.pool import MARKER_ENV, WarmInterrupted, pin_and_watch
from sweeper.run.command import in_process

COLD_ENV = "SWEEPER_COLD_START"
COMMAND = "sweeper.run.command"      # the warm launcher of a python task.command (not an entry point)
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
            [sys.executable, "-m", "sweeper.backends.local.warm_server", entry, str(w), ",".join(preload), "." * PAD],
            cwd=cwd,
            env={**self.env, MARKER_ENV: "." * PAD},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(w,),
            start_new_session=True,
            preexec_fn=pin_and_watch(set(cores), os.getpid()),
        )
        os.close(w)

    def read(self, block: bool, wake: int | None = None) -> bool:
        """Take in what the launcher said (waiting for something when block); False once it is gone. wake: an
        fd (the pool's signal pipe) that ends the wait with WarmInterrupted when it turns readable first."""
        if self.gone:
            return False
        if block:
            ready, _, _ = select.select([self.replies, *([wake] if wake is not None else [])], [], [])
            if self.replies not in ready:
                raise WarmInterrupted("interrupted while the slot's launcher was still importing")
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
                self.answers.append(msg)  # {"pid": N} or {"cold": why}, for the request waiting on it
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

    def request(self, req: dict, wake: int | None = None) -> dict:
        """Send a run; its answer: {"pid": N} or {"cold": why} (also when the launcher is gone). WarmInterrupted
        when `wake` (the pool's signal pipe) turns readable first: the launcher is then closed, so the request it
        has not read yet never becomes a run."""
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            while self.read(block=True):  # it exited: what it said before (why) is still in the pipe
                pass
            self.gone = True
            return {"cold": self.why_gone or "the warm launcher is gone"}
        while not self.answers:
            try:
                alive = self.read(block=True, wake=wake)
            except WarmInterrupted:
                self.gone, self.why_gone = True, "interrupted"
                self.proc.kill()          # still importing: it must not read the request and fork the run
                raise
            if not alive:
                return {"cold": self.why_gone or "the warm launcher is gone"}
        return self.answers.pop(0)

    def hang_up(self) -> None:
        """Stdin at EOF: the launcher exits (close waits for it)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self, now: bool = False) -> None:
        """Let the launcher exit (up to 5 s); now: kill it (the sweep is stopping: it serves nothing more)."""
        self.hang_up()
        if now and self.proc.poll() is None:
            self.proc.kill()
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
        self.why_cold = f"{COLD_ENV}=1" if off else "warm starts need a task.entry or a python task.command"
        self.cwd, self.servers = cwd, {}
        self.forked, self.cold = 0, 0
        self.wake: int | None = None       # the pool's signal pipe: a wait for a launcher ends on a signal
        self.unavailable: set[str] = set()  # why a launcher could not serve (its import failed), for the log

    def open(self, slots, env_of, wake: int | None = None) -> None:
        """Start each slot's launcher now (they import while the sweeper goes on); env_of(slot): its env. wake:
        the pool's signal pipe: a start waiting on a launcher still importing ends when it turns readable."""
        self.wake = wake
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
        if (
            server is None
            or server.gone
            or (server.child is not None and server.child.poll() is None)
            or not self.serves(argv)
            or str(job.cwd or os.getcwd()) != self.cwd
            or shared_env(env) != server.env
            or len("\0".join(argv)) + 1 > PAD
            or len(job.marker) > PAD
        ):
            self.cold += 1
            return None
        answer = server.request(
            wake=self.wake,
            req={
                "argv": argv,
                "env": env,
                "cwd": self.cwd,
                "log": str(job.log_path),
                "marker": job.marker,
                "cores": list(slot.cores),
            }
        )
        if "pid" not in answer:
            self.cold += 1
            self.unavailable.add(server.why_gone or answer.get("cold", "no answer"))
            return None
        self.forked += 1
        server.child = WarmProc(server, answer["pid"])
        return server.child

    def serves(self, argv: list[str]) -> bool:
        """The job's command line is what this launcher forks: its entry's, or a python command's."""
        if self.entry == COMMAND:
            return (
                argv[:3] == [sys.executable, "-m", COMMAND]
                and "--" in argv
                and in_process(argv[argv.index("--") + 1 :])
            )
        return argv[:4] == [sys.executable, "-m", "sweeper.run", self.entry] and len(argv) == 5

    def summary(self) -> str:
        """One line for the sweep's log: how many starts were warm."""
        if self.entry is None:
            return f"cold starts: {self.why_cold}" if self.cold else ""
        if not self.forked + self.cold:
            return ""                          # no run started (stopped before the first)
        line = f"warm starts: {self.forked} of {self.forked + self.cold} run starts forked by a slot's warm launcher"
        why = sorted(self.unavailable | {s.why_gone for s in self.servers.values() if s.why_gone})
        return line + (f" ({'; '.join(why)})" if why else "")

    def close(self, now: bool = False) -> None:
        """Every slot's launcher ends (now: killed at once, when the sweep is stopping)."""
        for server in self.servers.values():
            server.hang_up()  # all at once: they exit side by side
        for server in self.servers.values():
            server.close(now)
            if server.why_gone:
                self.unavailable.add(server.why_gone)
        self.servers = {}


def warm_target(spec) -> tuple[str | None, tuple[str, ...]]:
    """(what a slot's warm launcher serves, what it preloads) for a task: its entry and task.preload; for a
    `python script.py` / `python -m module` command, COMMAND and task.preload plus the script's own imports of
    installed packages (command_preload); (None, ()) for any other program (every run starts cold)."""
    if spec.entry:
        return spec.entry, tuple(spec.preload)
    words = list(spec.command or ())
    if not in_process(words):
        return None, ()
    return COMMAND, tuple(spec.preload) + tuple(f"{m}?" for m in command_preload(words, spec.cwd))


def command_preload(words: list[str], cwd: str) -> list[str]:
    """The modules a python script imports (any `import x` / `from x import y`, read with ast, not run) that come
    from installed packages, not from the project (cwd or the script's folder): what the warm launcher may
    import once for every run. A name the script's folder or cwd holds is the project's, whatever else this
    process's own sys.path would find (the run imports it from there, as `python script.py` would). Only
    top-level names are looked up (find_spec of a dotted name would import its parents here)."""
    if len(words) < 2 or not words[1].endswith(".py"):
        return []
    script = Path(cwd) / words[1]
    try:
        tree = ast.parse(script.read_text(), str(script))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    project = {Path(cwd).resolve(), script.resolve().parent}
    out = []
    for name in dict.fromkeys(names):
        top = name.split(".")[0]
        if top in ("sweeper", "__future__") or top in sys.builtin_module_names:
            continue
        if importlib.machinery.PathFinder.find_spec(top, [str(p) for p in project]) is not None:
            continue
        try:
            spec = importlib.util.find_spec(top) if top not in sys.modules else sys.modules[top].__spec__
        except (ImportError, ValueError):
            continue
        origin = (
            Path(spec.origin).resolve()
            if spec is not None and spec.origin not in (None, "built-in", "frozen")
            else None
        )
        if spec is None or origin is None or any(p == origin.parent or p in origin.parents for p in project):
            continue
        out.append(name)
    return out
