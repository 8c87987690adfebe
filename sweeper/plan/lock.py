"""One sweeper per sweep directory: an exclusive, non-blocking flock on SWEEP_DIR/.lock.

    with sweep_lock(sweep_dir):   # raises SweepLocked naming the holder's pid if another sweeper has it
        ...

flock is released by the kernel when the holder dies, so a SIGKILLed sweeper never leaves a stale lock.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from sweeper.errors import UsageError


class SweepLocked(UsageError):
    """Another sweeper holds the sweep dir (exit 2: run again once it has finished)."""
    pass


@contextmanager
def sweep_lock(sweep_dir: Path):
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(sweep_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise SweepLocked(f"{sweep_dir} is in use by another sweeper (pid {holder}); wait for it to finish "
                              f"or stop it, then run again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
