"""Failure classes and the retry policy: retry what looks transient, never what is deterministic, stop crash loops.

    status, failure = attempt_outcome(RunDir(run_dir), returncode)   # what one attempt of a run came to
    failure = classify(returncode=-9, error=None, tail=read_tail(rd.log_path))   # kind "signal"
    policy = RetryPolicy(max_retries=2, backoff_s=5.0, crash_loop_after=2)
    policy.delay_s(attempt=1)                              # 5.0, then 10.0, 20.0 ... (capped)
    loops = CrashLoops(policy.crash_loop_after)
    if loops.record("nope", failure): ...                  # True: this variant keeps failing the same way

Transient (retried with backoff, the run resumes from its checkpoint): killed or stopped by a signal (OOM
killer, a stray `kill`, preemption), CUDA out of memory, a lost node. Deterministic (never retried): exit
status 2 (config error, refused resume), a failed health check, any other exception in user code, and a
process that exits 0 without ending its run (no run.finish(): "no_result", it never reported its metrics).
The same final failure (deterministic, or transient with its retries used up) across `crash_loop_after` runs of one
variant stops that variant's queued runs. Pure Python: the local pool and the Slurm task judge an attempt the same
way (attempt_outcome), and the Slurm backend classifies its job ends with the same classes (e.g. NODE_FAIL ->
lost_node).
"""
from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field

from sweeper.backends.import_hint import import_hint
from sweeper.health.result import HealthReport
from sweeper.run.files.atomic import read_tail
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import EXIT_CONFIG, EXIT_INTERRUPTED, KEEP, TERMINAL, Status

SIGNAL, OOM, LOST_NODE = "signal", "out_of_memory", "lost_node"
CONFIG, HEALTH, EXCEPTION = "config_error", "health_check", "exception"
NO_RESULT = "no_result"          # exit 0, no exception, and the run never reported its result (no run.finish())
TRANSIENT = frozenset({SIGNAL, OOM, LOST_NODE})
UNFINISHED = "exited 0 without calling run.finish()"
GONE = ("exited 0, but its run status was deleted while it ran (the run dir holds sweeper's records: write "
        "outputs elsewhere)")

_OOM_PATTERNS = ("CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
                 "HIP out of memory")
_LOST_NODE_PATTERNS = ("NODE_FAIL", "node failure", "lost node", "GPU is lost", "fallen off the bus",
                       "uncorrectable ECC error")


@dataclass(frozen=True)
class Failure:
    kind: str              # one of the class names above
    message: str           # one line, for people
    signature: str         # message with numbers and paths blanked: equal signatures = the same error

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT

    def to_dict(self) -> dict:
        return {"failure_class": self.kind, "transient": self.transient}


def signal_name(returncode: int) -> str | None:
    """The signal that ended a process: Popen's negative codes and shells' 128+N both count."""
    num = -returncode if returncode < 0 else returncode - 128 if 128 < returncode < 128 + 65 else None
    if num is None:
        return None
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def classify(returncode: int | None, error: str | None = None, tail: str = "",
             health_verdict: str | None = None) -> Failure:
    """The class of one failed attempt from its exit status, its recorded error and the end of its log."""
    text = f"{error or ''}\n{tail}"
    message = (error or "").strip().splitlines()[0] if (error or "").strip() else ""
    sig = signal_name(returncode) if returncode is not None else None
    if any(p in text for p in _OOM_PATTERNS):
        kind, message = OOM, message or "CUDA out of memory"
    elif any(p.lower() in text.lower() for p in _LOST_NODE_PATTERNS):
        kind, message = LOST_NODE, message or "lost node"
    elif returncode == EXIT_CONFIG:
        kind, message = CONFIG, message or "config error (exit status 2)"
    elif sig is not None:        # before health: a killed run is transient even if its health.json says fail
        kind, message = SIGNAL, f"killed by {sig}"
    elif returncode == EXIT_INTERRUPTED:
        kind, message = SIGNAL, message or "stopped by a signal (checkpoint saved)"
    elif health_verdict == "fail" or message.lower().startswith(("health", "preflight")):
        kind, message = HEALTH, message or "health check failed"
    else:
        kind = EXCEPTION
        message = message or _last_exception_line(tail) or f"exit status {returncode}"
        hint = import_hint(message)
        message = f"{message} ({hint})" if hint and hint not in message else message
    return Failure(kind=kind, message=message, signature=f"{kind}: {_normalise(message)}")


def attempt_outcome(rd: RunDir, returncode: int) -> tuple[Status, Failure | None]:
    """What one ended attempt of a run came to, from its exit status and what the run recorded.

    finished/diverged (exit 0, or a summary that says so): no failure. Stopped by a signal with a checkpoint
    (recorded interrupted, exit 0 or 75): interrupted, a transient "signal" failure (the pool retries it, the
    run resumes). Exit 0 with the run still running: failed, UNFINISHED, never retried. Anything else: failed,
    classified from the recorded error, the log's tail and the run's health verdict."""
    state = rd.outcome()
    if state in KEEP:
        return state, None
    try:
        record = rd.read_status()
    except UnreadableFile:
        record = None
    error = record.error if record is not None and state in (Status.FAILED, Status.INTERRUPTED) else None
    if state is Status.INTERRUPTED and returncode in (0, EXIT_INTERRUPTED):
        return Status.INTERRUPTED, classify(EXIT_INTERRUPTED, error)
    if returncode == 0 and state not in TERMINAL:
        why = UNFINISHED if rd.status_path.exists() else GONE     # a script that deleted its run dir's records
        return Status.FAILED, Failure(NO_RESULT, why, f"{NO_RESULT}: {why}")
    return Status.FAILED, classify(returncode, error, read_tail(rd.log_path), health_verdict(rd))


def health_verdict(rd: RunDir) -> str | None:
    """The run's health verdict (pass/warn/fail), None when it has none or it cannot be read."""
    if not rd.health_path.exists():
        return None

    try:
        return HealthReport.read(rd.health_path).verdict
    except (ValueError, OSError):
        return None


def _last_exception_line(tail: str) -> str:
    for line in reversed(tail.strip().splitlines()):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line.strip()):
            return line.strip()
    return ""


def _normalise(message: str) -> str:
    """Blank what differs between runs of one variant: paths, addresses, numbers."""
    s = re.sub(r"(/[^\s:'\"]+)+", "<path>", message)
    s = re.sub(r"0x[0-9a-fA-F]+", "<addr>", s)
    s = re.sub(r"\d+(\.\d+)?([eE][-+]?\d+)?", "#", s)
    return s.strip()


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2            # extra attempts for a transient failure (0 = never retry)
    backoff_s: float = 5.0          # delay before the first retry; doubles each time
    max_backoff_s: float = 300.0
    crash_loop_after: int = 2       # this many runs of a variant failing with one signature stop the variant

    def should_retry(self, failure: Failure, attempt: int) -> bool:
        """attempt: 1 for the first try of this invocation."""
        return failure.transient and attempt <= self.max_retries

    def delay_s(self, attempt: int) -> float:
        return min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))


@dataclass
class CrashLoops:
    """Counts final failures per (variant, signature); a variant is stopped at the threshold."""
    threshold: int
    counts: dict = field(default_factory=dict)
    stopped: dict = field(default_factory=dict)      # variant -> the message why

    def record(self, variant: str, failure: Failure) -> bool:
        """Count one run that failed for good; True when this makes `variant` a crash loop (first time only)."""
        key = (variant, failure.signature)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.threshold and self.counts[key] >= self.threshold and variant not in self.stopped:
            self.stopped[variant] = (f"crash loop: {self.counts[key]} runs of variant {variant} failed with the "
                                     f"same error ({failure.kind}: {failure.message}); its queued runs are not "
                                     f"started. Fix the error and resume the sweep")
            return True
        return False
