"""`python -m sweeper.backends.local.warm_server ENTRY FD PRELOAD PADDING`: a slot's warm launcher; started by
sweeper.backends.local.warm only.

ENTRY is an entry point (module:function), or `sweeper.run.command` for a python task.command: its children run
`sweeper.run.command.run_command(argv)`, which runs the script as `__main__`; PRELOAD names ending in `?` are
the script's own imports, imported when they can be (one that fails is left to the run).

It starts with the slot's complete environment (thread counts, CUDA_VISIBLE_DEVICES, PYTHONPATH) and CPU
affinity, imports sweeper.run and ENTRY's module ONCE and, in a one-thread slot, the PRELOAD modules
(comma-separated: task.preload) and, when torch is loaded by then, torch._dynamo (every torch.optim optimizer
imports it when built: 1.4 s); only imports, no tensor work (that would start OpenMP). In a slot of more threads
numpy's OpenBLAS and torch's OpenMP start thread pools at import, after which a fork is unsafe: no preload there.
Then it serves one request at a time from stdin (a JSON line: argv, env, cwd, log, marker, cores) by forking a
fresh child per run:

    child: setsid (its own process group), affinity, PR_SET_PDEATHSIG, stdin /dev/null, stdout+stderr -> log,
           the run's environment, its /proc cmdline and environ rewritten to the cold start's (ps shows the
           run's command; a later sweeper finds it by its SWEEPER_JOB marker, never by command line), then
           run_entry(ENTRY, RUN_DIR) and _exit(code)

Replies on fd FD, one JSON line each: {"ok": true} once imported, {"pid": N} per fork, {"exit": N, "code": C}
(C as subprocess gives it: -SIG when killed), or {"cold": "why"} when a fork would be unsafe (a thread, an
OpenMP team or CUDA already started here: forking then is undefined) or not the same (a sitecustomize or
usercustomize hook, which a fresh interpreter runs per run) and the caller starts that run cold.
Stdin at EOF ends the server (os._exit: no teardown); SIGTERM (also from PR_SET_PDEATHSIG when the sweeper dies)
kills it, and its running child gets SIGTERM through its own PR_SET_PDEATHSIG, as a cold child would.
"""
from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import random
import signal
import sys
import traceback

import sweeper.run
from sweeper.backends.local.slots import THREAD_VARS
from sweeper.run import command
from sweeper.run.entry import load_entry, run_entry
from sweeper.run.files.atomic import open_nofollow

PR_SET_PDEATHSIG = 1
MARKER_ENV = "SWEEPER_JOB"
COMMAND = "sweeper.run.command"     # ENTRY for a python task.command (sweeper.backends.local.warm.COMMAND)
WITH_TORCH = ("torch._dynamo",)     # imported lazily by torch itself in every run that builds an optimizer


def _mm_ranges() -> tuple[tuple[int, int], tuple[int, int]]:
    """(arg_start, arg_end), (env_start, env_end) of this process (/proc/self/stat fields 48-51)."""
    with open("/proc/self/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return (int(rest[45]), int(rest[46])), (int(rest[47]), int(rest[48]))


def _rewrite(start: int, end: int, words: list[bytes]) -> None:
    """Overwrite [start, end) of this process's memory with the NUL-joined words, NUL-padded."""
    data = b"\0".join(words) + b"\0"
    if len(data) > end - start:
        raise ValueError("does not fit")
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(data + b"\0" * (end - start - len(data)))


def rewrite_identity(argv: list[str], marker: str) -> None:
    """/proc/self/cmdline becomes the cold start's argv, /proc/self/environ holds SWEEPER_JOB=marker."""
    (a0, a1), (e0, e1) = _mm_ranges()
    _rewrite(a0, a1, [os.fsencode(w) for w in argv])
    with open("/proc/self/environ", "rb") as f:
        env = f.read()
    tag = f"{MARKER_ENV}=".encode()
    i = env.index(tag) if env.startswith(tag) else env.index(b"\0" + tag) + 1
    j = env.index(b"\0", i)
    _rewrite(e0 + i, e0 + j + 1, [tag + os.fsencode(marker)])


def unsafe_to_fork() -> str | None:
    """Why a fork here would not give a clean child (None: one thread, no CUDA)."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return f"the warm launcher has {threads} threads (a thread pool started)"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the warm launcher"
    if _driver_loaded():
        return "the CUDA driver (libcuda) is loaded in the warm launcher (an import called into CUDA)"
    return None


def _driver_loaded() -> bool:
    """libcuda mapped here: something ran cuInit (torch.cuda.is_available() does), which a fork does not survive."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return b"/libcuda.so" in f.read()
    except OSError:
        return False


def child(req: dict, entry: str, libc, parent: int) -> int:
    """In the forked child: become the run's own process, then run it (returns its exit status)."""
    os.setsid()
    os.sched_setaffinity(0, set(req["cores"]))
    if libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:     # the server died before prctl: stop now
            return 128 + signal.SIGTERM
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    rewrite_identity(req["argv"], req["marker"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    log = open_nofollow(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)   # never through a link
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 1 << 16)          # also the ready pipe: the server now tells the sweeper our pid
    random.seed()                      # a fresh interpreter's seeding, not the server's state
    if entry == COMMAND:               # a python task.command: sweeper.run.command runs its script as __main__
        sys.argv = [command.__file__, *req["argv"][3:]]
        code = command.run_command(req["argv"][3:])
        atexit._run_exitfuncs()        # what the script registered, as its own interpreter's exit would run
        return code
    sys.argv = [os.path.join(os.path.dirname(sweeper.run.__file__), "__main__.py"), *req["argv"][3:]]
    return run_entry(entry, req["argv"][-1])


def preload(modules: list[str]) -> None:
    """Import the task's preload modules, then what torch would import lazily in every run (ImportError names
    the task.preload module that failed). Only in a one-thread slot: with more, numpy's OpenBLAS and torch's
    OpenMP start their thread pools at import, after which no fork is safe (the runs would all start cold)."""
    if any(os.environ.get(var) != "1" for var in THREAD_VARS):
        return
    for name in modules:
        optional = name.endswith("?")        # a python command's own import (read from its script): best effort
        try:
            importlib.import_module(name.rstrip("?"))
        except Exception as e:
            if optional:
                continue
            raise ImportError(f"task.preload module {name} does not import ({type(e).__name__}: {e})") from e
    if "torch" in sys.modules:
        for name in WITH_TORCH:
            importlib.import_module(name)


def serve(entry: str, fd: int, modules: list[str] = ()) -> int:
    replies = os.fdopen(fd, "w", buffering=1)
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        hooks = [m for m in ("sitecustomize", "usercustomize") if m in sys.modules]
        if hooks:                          # it ran here once; each run's own interpreter would run it again
            raise RuntimeError(f"{hooks[0]} ({sys.modules[hooks[0]].__file__}) runs at interpreter start")
        (a0, a1), _ = _mm_ranges()
        with open("/proc/self/cmdline", "rb") as f:
            _rewrite(a0, a1, [w for w in f.read().split(b"\0") if w])      # /proc/self/mem writable here
        if entry == COMMAND:
            import sweeper.run.command  # noqa: F401  deferred: only a python-command slot loads its runner
        else:
            load_entry(entry)              # ENTRY's module and everything it imports, once
        preload(list(modules))             # what the entry imports inside its function (torch), once
    except Exception as e:  # noqa: BLE001 - whatever fails, the caller starts its runs cold
        print(json.dumps({"cold": f"warm start unavailable: {type(e).__name__}: {e}"}), file=replies)
        return 0
    print(json.dumps({"ok": True}), file=replies)
    for line in sys.stdin:
        req = json.loads(line)
        why = unsafe_to_fork()
        if why:
            print(json.dumps({"cold": why}), file=replies)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        me = os.getpid()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            code = 1
            try:
                code = child(req, entry, libc, me)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - the run's crash is in its log; the exit status says it
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        os.close(ready_w)
        os.read(ready_r, 1)                # EOF: the child is in its own group, pinned, named as a cold start
        os.close(ready_r)
        print(json.dumps({"pid": pid}), file=replies)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}), file=replies)
    return 0


if __name__ == "__main__":
    code = serve(sys.argv[1], int(sys.argv[2]), [m for m in sys.argv[3].split(",") if m])
    sys.stdout.flush()
    os._exit(code)          # nothing to clean up: an interpreter exit that tears down torch takes 0.7 s of a core
