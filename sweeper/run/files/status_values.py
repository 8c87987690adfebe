"""A run's states and exit codes: the values its status record holds and a launcher acts on. Pure Python.

    Status("finished") is Status.FINISHED; str(Status.RUNNING) == "running"; STATUSES lists the spellings
    state in KEEP           # finished or diverged: a later launch does not redo the run
    state in TERMINAL       # the run ended (KEEP, failed or interrupted)
    sys.exit(EXIT_INTERRUPTED)   # stopped by a signal with a checkpoint saved: run it again to resume
    RunDir.liveness() in (LIVE, STALE, UNKNOWN); stale_hint(sweep_dir) is what a reader shows for STALE

The records that carry these values are sweeper.run.files.records; RunDir (sweeper.run.files.rundir) reads and
writes them.
"""
from __future__ import annotations

import enum
from pathlib import Path

from sweeper.pasted import pasted

EXIT_INTERRUPTED = 75   # a run stopped by a signal with a checkpoint saved (EX_TEMPFAIL): run it again to resume
EXIT_CONFIG = 2         # bad config or refused resume: never retried


class Status(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    DIVERGED = "diverged"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


STATUSES = tuple(s.value for s in Status)
LOST_SUMMARY = "its result is lost"     # in the error outcome() records for a finished run without its summary
TERMINAL = frozenset({Status.FINISHED, Status.FAILED, Status.DIVERGED, Status.INTERRUPTED})  # the run ended
KEEP = frozenset({Status.FINISHED, Status.DIVERGED})   # outcomes a later launch does not redo

LIVE, STALE, UNKNOWN = "live", "stale", "unknown"     # RunDir.liveness() of a `running` run
STALE_NOTE = "stale (the sweeper was killed; nothing runs it)"


def stale_hint(sweep_dir: str | Path) -> str:
    """What a reader shows for a stale run: what happened and the command that resumes it."""
    return f"{STALE_NOTE}; resume with `{pasted('python', '-m', 'sweeper.resume', sweep_dir)}` or the same command"
