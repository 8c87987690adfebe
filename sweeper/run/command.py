"""`python -m sweeper.run.command [--metrics SRC]... [--prefix P] RUN_DIR -- PROGRAM ARGS...`: one run of a
task.command, as a sweep launches it (sweeper.config.task builds this command line).

    python -m sweeper.run.command sweeps/x-1a2b/runs/a/seed_0 -- python train.py --seed=0 --out=sweeps/.../out

A script that calls `sweeper.init()` itself (the run API) owns its run: what it records stands. A script that
does not (zero glue: arguments in, metrics out) gets its run recorded here: status `running` while it runs; at
its end, its final metrics are the last value of each key it reported (sweeper.run.observed.reported: JSON lines on
stdout, or the metrics files named by --metrics, or the documented metrics files under RUN_DIR/out/), with
where each was read (the summary's `metric_sources`), its lines with a "step" become the run's metrics curves;
exit 0 -> finished, any other exit status -> failed with the last line of its output. SIGTERM/SIGINT/SIGUSR1/
SIGUSR2 (Ctrl-C, preemption) stop it: status interrupted, exit 75; with no checkpoint of its own, such a run
restarts from scratch when the sweep resumes.

`python script.py ...` and `python -m module ...` run in THIS process (runpy, as `__main__`, with their argv and
sys.path[0] the script's folder): one interpreter per run, and a slot's warm launcher can fork it with the
script's imports already loaded (sweeper.backends.local.warm). Any other program (or python with interpreter
options) runs as a child process in this one's process group.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import re
import runpy
import signal
import stat
import subprocess
import sys
import time
from operator import itemgetter
from pathlib import Path

import yaml

from sweeper.run import init
from sweeper.run.files.atomic import atomic_write_text
from sweeper.run.files.logcap import MARK, LogMark, read_since_bytes
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import EXIT_CONFIG, EXIT_INTERRUPTED, KEEP, TERMINAL, Status
from sweeper.run.files.usage import REPORTED
from sweeper.run.observed.envrefs import resolve_env_refs
from sweeper.run.observed.evaluation import EVAL_KEY
from sweeper.run.observed.folder_watch import FolderWatch
from sweeper.run.observed.log_tail import LogTail
from sweeper.run.observed.provenance import script_of, set_project_sources, set_script
from sweeper.run.observed.reported import STDOUT, read_reported
from sweeper.run.observed.stdout_metrics import StdoutMetrics

OUT = "out"                      # RUN_DIR/out: the folder a zero-glue script writes to ({out_dir})
PYTHONS = ("python", "python3")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
USAGE = ("usage: python -m sweeper.run.command [--metrics SRC]... [--prefix P] [--metric NAME] "
         "[--config-file PATH [--config-seed]] RUN_DIR -- PROGRAM ARGS...")


class Stopped(BaseException):
    """A stop signal arrived while a zero-glue script ran (raised where it was, like KeyboardInterrupt)."""


def in_process(words: list[str]) -> bool:
    """True for `python script.py ...` and `python -m module ...` (no interpreter options): runpy can run them."""
    if len(words) < 2 or not (words[0] in PYTHONS or words[0] == sys.executable):
        return False
    return words[1].endswith(".py") or (words[1] == "-m" and len(words) >= 3)


def parse_args(argv: list[str]) -> tuple[list[str], str | None, str, list[str], tuple[str, bool] | None]:
    """(metrics sources, prefix, run dir, the program's words, (config file, with seed) or None); ValueError for a
    malformed command line. --metric NAME (the decision metric, so that large out/ files are read only when they
    can hold it) is read by decision_metric()."""
    if "--" not in argv:
        raise ValueError(USAGE)
    split = argv.index("--")
    head, words = argv[:split], argv[split + 1:]
    sources, prefix, rest, config_file, config_seed = [], None, [], None, False
    it = iter(head)
    for arg in it:
        if arg == "--metrics":
            sources.append(next(it, ""))
        elif arg == "--prefix":
            prefix = next(it, "")
        elif arg == "--config-file":
            config_file = next(it, "")
        elif arg == "--config-seed":
            config_seed = True
        elif arg == "--metric":
            next(it, "")
        else:
            rest.append(arg)
    if len(rest) != 1 or not words or config_file == "":
        raise ValueError(USAGE)
    return sources or ["stdout"], prefix, rest[0], words, (config_file, config_seed) if config_file else None


def write_task_config(rd: RunDir, path: str, with_seed: bool) -> None:
    """The run's merged copy of the script's own YAML (task.config_file): the run config (the file's keys with
    the experiment's and the variant's values), `seed` only when the file has one."""
    config = rd.read_config()
    if not with_seed:
        config.pop("seed", None)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(config, sort_keys=False, default_flow_style=False))


def _stop(signum, _frame):
    for sig in STOP_SIGNALS:                     # one Stopped: a second signal waits for the first's handling
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def run_python(words: list[str], tail: LogTail | None = None) -> int:
    """Run `python script.py ARGS` / `python -m module ARGS` as `__main__`, in a fork of this process (its
    imports kept): however the script ends (os._exit, sys.exit in an atexit handler, its stdout or stderr
    closed or pointed at /dev/null, a signal) this process outlives it and records what it reported. Its exit
    status as a subprocess gives it (-SIG when killed). In this process only when a fork would be unsafe here (a
    thread or CUDA already started). `tail`: started once the fork is made (a thread: never before a fork)."""
    if _unsafe_to_fork():
        with _streams_kept():
            return _run_here(words)
    sys.argv = [words[2], *words[3:]] if words[1] == "-m" else [words[1], *words[2:]]   # as the run records it
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:                                 # the script's own process: it ends here, whatever it does
        code = 1
        try:
            code = _run_here(words, in_fork=True)
            atexit._run_exitfuncs()              # what it registered, as its own interpreter's exit runs them
        finally:
            _flush_quietly()
            os._exit(code)
    if tail is not None:
        tail.start()
    return _wait(pid)


def _run_here(words: list[str], in_fork: bool = False) -> int:
    try:
        if words[1] == "-m":
            sys.argv = [words[2], *words[3:]]
            runpy.run_module(words[2], run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(words[1])
            if not os.path.isfile(script):
                print(f"python: can't open file {script!r}: [Errno 2] No such file or directory", file=sys.stderr)
                return 2
            sys.argv = [words[1], *words[2:]]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return _exit_code(e)
    except Stopped:
        if in_fork:
            return EXIT_INTERRUPTED
        raise
    except BaseException:  # noqa: BLE001 - the script's crash: its traceback in the log, exit 1 as python gives
        sys.excepthook(*sys.exc_info())      # as the interpreter would: a Run's crash hook records the exception
        return 1
    return 0


def _wait(pid: int) -> int:
    """The forked script's exit status; a stop signal that reaches only us is passed on to it as SIGTERM, and we
    wait for it to end (the launcher escalates to SIGKILL on the whole group). SIGTERM, not the signal we got: a
    run API script takes a second SIGINT as "terminate now" (sweeper.run.stopping), a repeated SIGTERM as
    nothing new, and a zero-glue script's handler here ignores any second signal."""
    try:
        _, status = os.waitpid(pid, 0)
    except Stopped:
        try:
            os.kill(pid, signal.SIGTERM)         # it may have had the group's signal too: a repeat is harmless
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status)


def _unsafe_to_fork() -> str | None:
    """Why a fork of this process would not be a clean one (None: one thread, no CUDA driver loaded)."""
    try:
        if len(os.listdir("/proc/self/task")) != 1:
            return "threads"
        with open("/proc/self/maps", "rb") as f:
            return "cuda" if b"/libcuda.so" in f.read() else None
    except OSError:
        return "no /proc"


@contextlib.contextmanager
def _streams_kept():
    """Our stdout and stderr as they were, whatever the script (run in this process) did to them."""
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    streams = sys.stdout, sys.stderr
    try:
        yield
    finally:
        _flush_quietly()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        sys.stdout, sys.stderr = (s if s is not None and not s.closed else open(fd, "w", closefd=False)
                                  for s, fd in zip(streams, (1, 2)))


def _flush_quietly() -> None:
    """Flush what the script left in our stream buffers; a stream it closed or broke is not an error of ours."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):
            pass


def run_program(words: list[str], tail: LogTail | None = None) -> int:
    """Any other program, as a child in this process group (a stop signal to the group reaches it too); `tail`
    started once it runs."""
    proc = subprocess.Popen(words, stdin=subprocess.DEVNULL)
    if tail is not None:
        tail.start()
    try:
        return proc.wait()
    except Stopped:
        try:
            proc.wait(timeout=30)                # it got the group's signal too: let it end
        except subprocess.TimeoutExpired:
            proc.kill()
        raise


def _log_path() -> str | None:
    """The file our stdout writes to (the run's log), None when stdout is not a file."""
    try:
        if not stat.S_ISREG(os.fstat(1).st_mode):
            return None
        return os.readlink("/proc/self/fd/1")
    except OSError:
        return None


def _read_from(log: str | None, mark: LogMark) -> bytes:
    """Our output since `mark`, cuts of the log included (sweeper.run.files.logcap.read_since: no race with
    the launcher cutting it, metric lines of a cut part kept)."""
    if log is None:
        return b""
    sys.stdout.flush()
    sys.stderr.flush()
    return read_since_bytes(log, mark)


def _last_line(data: bytes) -> str:
    text = data[-64 * 1024:].decode("utf-8", "replace")          # the last line is in the output's tail
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("=== sweeper")]
    return lines[-1][:300] if lines else ""


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def failure_line(code: int, last: str) -> str:
    """A failed run's error: the exception a crash ended with (`KeyError: 'col'`), else the exit status and the
    program's last line (`exit status 2: train.py: error: unrecognized arguments: --lr=0.1`)."""
    if last and EXCEPTION_LINE.match(last):
        return last
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"killed by {name}" + (f" after its last line: {last}" if last else "")
    return f"exit status {code}" + (f": {last}" if last else "")


def run_command(argv: list[str]) -> int:
    """The run's exit status: a script killed by a signal (its fork's -SIG) exits as a shell gives it, 128+SIG
    (an exit status of -9 would read 247: a crash, never retried; 137 the launcher names SIGKILL, transient)."""
    code = _run_command(argv)
    return 128 - code if code < 0 else code


def _run_command(argv: list[str]) -> int:
    try:
        sources, prefix, run_dir, words, task_config = parse_args(argv)
    except ValueError as e:
        print(e, file=sys.stderr)
        return EXIT_CONFIG
    rd = RunDir(run_dir)
    if rd.outcome() in KEEP:
        print(f"{run_dir}: already {rd.outcome().value}; nothing to do", flush=True)
        return 0
    out_dir = rd.path / OUT
    out_dir.mkdir(parents=True, exist_ok=True)
    if task_config is not None:
        write_task_config(rd, *task_config)
    log = _log_path()
    mark = LogMark.now(log) if log is not None else LogMark()
    t0 = time.time()
    rd.update_status(Status.RUNNING, started=t0, ended=None, error=None, exit_code=None, pid=os.getpid(),
                     glue="command")
    words = [resolve_env_refs(w) for w in words]     # ${oc.env:SECRET}: resolved here, never on disk
    set_script(script_of(words))                 # the code it runs, for its summary (sweeper.run.observed.provenance)
    set_project_sources()                        # ... all of the project's sources: its imports are not ours to see
    watch = FolderWatch(rd.path)                  # what it changes outside its run dir (isolation.json)
    ours = _files(rd)                                # what the run dir holds: a script that deletes it is named
    parsed = StdoutMetrics(prefix) if STDOUT in sources else None   # its stdout lines, parsed as they come:
    tail = LogTail(log, mark.size, parsed.feed) if log is not None and parsed is not None else None
    previous = {sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS}
    stopped = None
    try:
        code = run_python(words, tail) if in_process(words) else run_program(words, tail)
    except Stopped as e:
        stopped, code = str(e), EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        watch.done()
        if tail is not None:
            tail.stop()
    _flush_quietly()
    gone = sorted(ours - _files(rd))
    if gone:
        return _deleted(rd, gone, code, stopped)
    record = rd.read_status()
    text = _read_from(log, mark)                     # the run's output (bytes)
    if record.started != t0 or record.status is not Status.RUNNING:     # the script ran its own run (the run API)
        return _api_exit(rd, code, stopped, _last_line(text))
    if stopped:
        rd.update_status(Status.INTERRUPTED, ended=time.time(), exit_code=EXIT_INTERRUPTED,
                         error=f"stopped by {stopped}; this run has no checkpoint of its own (task.command without "
                               f"the run API), so it restarts from scratch")
        return EXIT_INTERRUPTED
    if code != 0:
        rd.update_status(Status.FAILED, ended=time.time(), exit_code=code, error=failure_line(code, _last_line(text)))
        return code
    if parsed is not None:
        rest = tail.stop(text) if tail is not None else None
        if rest is None:                             # no thread ran, or the log changed under it: all again
            parsed, rest = StdoutMetrics(prefix), text
        parsed.feed(rest)
    return _finish(rd, text, parsed, sources, prefix, out_dir, t0, decision_metric(argv))


def _files(rd: RunDir) -> set[str]:
    """The records of the run dir that nothing of sweeper's deletes while a run runs (its config and status)."""
    return {p.name for p in (rd.config_path, rd.status_path) if os.path.lexists(p)}


def _deleted(rd: RunDir, gone: list[str], code: int, stopped: str | None) -> int:
    """The script deleted files of its run dir (sweeper's records): the run fails, named for what happened."""
    what = ", ".join(gone)
    error = (f"the script deleted its run's files ({what}) while it ran (exit status {code}"
             f"{f', stopped by {stopped}' if stopped else ''}); the run dir holds sweeper's records: write outputs "
             f"into {{out_dir}} ({rd.path / OUT}) only; this run starts again from scratch")
    print(f"sweeper: {error}", file=sys.stderr, flush=True)
    rd.path.mkdir(parents=True, exist_ok=True)
    rd.update_status(Status.FAILED, ended=time.time(), exit_code=1, error=error)
    return 1


def _api_exit(rd, code: int, stopped: str | None, last: str = "") -> int:
    """The script used sweeper.init(): its record stands; fill in what it could not write (a crash here)."""
    state = rd.read_status().status
    if state in TERMINAL:
        return EXIT_INTERRUPTED if state is Status.INTERRUPTED else (code if state is Status.FAILED else 0)
    if stopped:
        rd.update_status(Status.INTERRUPTED, ended=time.time(), exit_code=EXIT_INTERRUPTED,
                         error=f"stopped by {stopped} before the run could checkpoint; resumes from its last "
                               f"checkpoint")
        return EXIT_INTERRUPTED
    if code != 0:
        rd.update_status(Status.FAILED, ended=time.time(), exit_code=code, error=failure_line(code, last))
    return code


def decision_metric(argv: list[str]) -> str | None:
    """The value of --metric before `--` (None without it)."""
    head = argv[:argv.index("--")] if "--" in argv else argv
    return head[head.index("--metric") + 1] if "--metric" in head[:-1] else None


def _finish(rd, text: bytes, parsed: StdoutMetrics | None, sources: list[str], prefix: str | None, out_dir: Path,
            t0: float, metric: str | None = None) -> int:
    """Exit 0 without the run API: final metrics and curves from what the script reported (`parsed`: its
    stdout lines, already parsed); status finished."""
    got = read_reported(parsed if parsed is not None else b"", sources, prefix, base=out_dir, out_dir=out_dir,
                        metric=metric)
    for note in got.notes:
        print(f"sweeper: {note}", flush=True)
    evaluated = got.final.pop(EVAL_KEY, None)        # the documented key: what it was evaluated on, not a metric
    run = init(rd.path, record_crashes=False)
    run._t0 = t0                                     # wall time of the script, not of this bookkeeping
    rd.update_status(started=t0)                     # the status record too: started when the script did
    run._reads = None                                # the script got its config as arguments: reads not known
    if evaluated is not None:
        run.eval_fingerprint(fingerprint=str(evaluated))
    drop = (EVAL_KEY, *REPORTED)                     # documented keys: what it was evaluated on and used, not metrics
    last = max(map(itemgetter("step"), got.steps), default=None)
    run.log_lines(got.metrics_lines(drop), last)   # one write: the stdout lines as they came, not re-encoded
    run.extra["reported_by"] = "command output (zero glue)"
    run.extra["metric_sources"] = got.sources        # the summary's record of where each final was read
    cut = MARK.search(text)
    if cut:
        run.extra["log_cut_bytes"] = int(cut.group(1))    # named by a "no decision metric" stop (metric_check)
    run.finish(got.final, steps=max((r["step"] for r in got.steps), default=None))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
