"""A run's stdout.log kept to a size: its head and a rolling tail stay, the cut is named in the log.

    cut = cap_log(run_dir / "stdout.log", limit=16 * 2**20)        # bytes cut now (0: under the limit)
    cap_log(path, limit, pause=stopped_group(pid))                 # a writer that must hold still for a rewrite

The run's process writes stdout.log itself (an inherited O_APPEND descriptor), so nothing sits between it and
its output. The launcher calls cap_log while the run runs (each tick of the local pool, each poll of a Slurm
task) and once after it ends. When the file is longer than `limit` bytes, its middle goes: the first HEAD bytes
(a quarter of the limit, at most 1 MiB) and the newest half of the limit stay, with this line where the cut is:

    === sweeper: 52428800 bytes of output cut here (the log keeps its first 1048576 and newest 8388608 bytes;
    launcher.max_log_mb) ===

How: FALLOC_FL_COLLAPSE_RANGE removes the middle in place (ext4, xfs: block-aligned, atomic against the
writer's appends, so no byte is lost or reordered), and the marker overwrites the head's last bytes. Where the
file system cannot collapse (tmpfs, NFS), the file is rewritten (head + marker + tail) while `pause` holds the
writer still (SIGSTOP of its process group), or at once when no writer is left. Torch-free, stdlib only.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import time

MiB = 2 ** 20
FALLOC_FL_KEEP_SIZE, FALLOC_FL_COLLAPSE_RANGE = 0x01, 0x08
MARK = re.compile(rb"=== sweeper: (\d+) bytes of output cut here")
_MARK_ROOM = 200                     # bytes of the head the marker line takes (padded)
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
    _LIBC.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _LIBC = None


def head_and_tail(limit: int) -> tuple[int, int]:
    """(bytes kept at the start, bytes kept at the end) for a log limited to `limit` bytes."""
    return min(limit // 4, MiB), limit // 2


def _marker(cut: int, head: int, tail: int, width: int) -> bytes:
    line = (f"\n=== sweeper: {cut} bytes of output cut here (the log keeps its first {head} and newest {tail} "
            f"bytes; launcher.max_log_mb; the next line may start mid-line) ===").encode()
    return (line + b" " * max(0, width - len(line) - 1) + b"\n")[:width]


def _cut_before(fd: int, head: int) -> int:
    """Bytes cut earlier (the marker already in the head), 0 when none."""
    m = MARK.search(os.pread(fd, _MARK_ROOM, max(0, head - _MARK_ROOM)))
    return int(m.group(1)) if m else 0


def _collapse(fd: int, offset: int, length: int) -> bool:
    if _LIBC is None or length <= 0:
        return False
    if _LIBC.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, offset, length) == 0:
        return True
    if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, errno.EPERM):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def cap_log(path, limit: int | None, pause=None) -> int:
    """Cut the middle of the log at `path` when it is longer than `limit` bytes; the bytes cut (0: nothing to
    do). pause: a context manager holding the writer still, for file systems that cannot collapse a range
    (None: the writer has ended, or there is none). OSError propagates (the caller decides)."""
    if not limit:
        return 0
    try:
        if os.stat(path).st_size <= limit:     # the common case, every tick of a running run: one stat
            return 0
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if size <= limit:
            return 0
        head, tail = head_and_tail(limit)
        block = os.fstat(fd).st_blksize or 4096
        start = -(-max(head, _MARK_ROOM) // block) * block          # the head, rounded up to a block
        end = (size - tail) // block * block                         # where the kept tail starts, rounded down
        if end <= start:
            return 0
        before = _cut_before(fd, start)
        if _collapse(fd, start, end - start):
            cut = end - start
        else:
            with pause if pause is not None else contextlib.nullcontext():
                size = os.fstat(fd).st_size                         # what the writer added until it held still
                end = max(start, size - tail)
                kept = os.pread(fd, size - end, end)
                os.pwrite(fd, kept, start)
                os.ftruncate(fd, start + len(kept))
                cut = end - start
        os.pwrite(fd, _marker(before + cut, start, tail, _MARK_ROOM), start - _MARK_ROOM)
        return cut
    finally:
        os.close(fd)


def _state(pid: int) -> bytes:
    """The process's state letter from /proc (R, S, T, Z, ...), b"?" when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"?"


@contextlib.contextmanager
def stopped_group(pgid: int):
    """Hold a process group still (SIGSTOP ... SIGCONT) while the block runs; a group already stopped (someone
    stopped it on purpose) is left stopped."""
    if _state(pgid) in (b"T", b"t", b"Z", b"?"):
        yield
        return
    try:
        os.killpg(pgid, 19)                                          # SIGSTOP
    except (ProcessLookupError, PermissionError):
        yield
        return
    try:
        for _ in range(200):                                         # until it has stopped (its last write done)
            if _state(pgid) in (b"T", b"t", b"Z", b"?"):
                break
            time.sleep(0.001)
        yield
    finally:
        try:
            os.killpg(pgid, 18)                                      # SIGCONT
        except (ProcessLookupError, PermissionError):
            pass
