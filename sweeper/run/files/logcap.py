"""A run's stdout.log kept to a size: its head and a rolling tail stay, the cut is named in the log.

    cut = cap_log(run_dir / "stdout.log", limit=16 * 2**20)        # bytes cut now (0: under the limit)
    cap_log(path, limit, pause=stopped_group(pid))                 # a writer that must hold still for a rewrite
    mark = LogMark.now(path); ...; text = read_since(path, mark)   # a run's own output since `mark`, cuts or not
    read_since_bytes(path, mark)                                   # the same, as bytes

The run's process writes stdout.log itself (an inherited O_APPEND descriptor), so nothing sits between it and
its output. The launcher calls cap_log while the run runs (each tick of the local pool, each poll of a Slurm
task) and once after it ends. When the file is longer than `limit` bytes, its middle goes: the first HEAD bytes
(a quarter of the limit, at most 1 MiB) and the newest half of the limit stay, with this line where the cut is:

    === sweeper: 52428800 bytes of output cut here (the log keeps its first 1048576 and newest 8388608 bytes;
    launcher.max_log_mb) ===

How: FALLOC_FL_COLLAPSE_RANGE removes the middle in place (ext4, xfs: block-aligned, atomic against the
writer's appends, so no byte is lost or reordered), and the marker overwrites the head's last bytes. Where the
file system cannot collapse (tmpfs, NFS), the file is rewritten (head + marker + tail) while `pause` holds the
writer still (SIGSTOP of its process group), or at once when no writer is left.

Nothing a run reports is lost to a cut: the lines of the cut part that look like metrics (a `{...}` JSON
object, with or without a prefix) are appended, in order, to stdout.kept.log beside the log (itself bounded: past
the limit it keeps, per key, the line with the key's last value). read_since() gives a run its own output back
as one text: the part still in the log, with the marker and the kept lines where the cut was. Reader and cutter
never race: read_since holds a shared flock on the log while it reads, and cap_log cuts only under an exclusive
one, taken without waiting (a busy log is cut at the next tick). Links are never followed (open_nofollow).
Torch-free, stdlib only.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from sweeper.run.files.atomic import LinkRefused, atomic_write_bytes, open_log, open_nofollow

MiB = 2 ** 20
FALLOC_FL_KEEP_SIZE, FALLOC_FL_COLLAPSE_RANGE = 0x01, 0x08
MARK = re.compile(rb"=== sweeper: (\d+) bytes of output cut here \(the log keeps its first (\d+) ")
KEPT = "kept"                        # stdout.log -> stdout.kept.log: the metric lines of the cut parts
_CHUNK = 4 * MiB                     # the cut part is scanned for metric lines this much at a time
_LONGEST_LINE = MiB                  # a metric line straddling a cut is looked for this far
_LINE_END = re.compile(rb"\}[ \t\r]*\n")       # where a metric line may end
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


def kept_path(path) -> Path:
    """Where the metric lines of a log's cut parts go: stdout.log -> stdout.kept.log."""
    path = Path(path)
    return path.with_name(f"{path.stem}.{KEPT}{path.suffix}")


def cap_log(path, limit: int | None, pause=None) -> int:
    """Cut the middle of the log at `path` when it is longer than `limit` bytes; the bytes cut (0: nothing to
    do, or a reader holds the log: the next call cuts). pause: a context manager holding the writer still, for
    file systems that cannot collapse a range (None: the writer has ended, or there is none). A link at
    `path` is never cut (0). OSError propagates (the caller decides)."""
    if not limit:
        return 0
    try:
        st = os.lstat(path)
        if st.st_size <= limit or not stat.S_ISREG(st.st_mode):   # every tick of a running run: one lstat
            return 0
        fd = open_nofollow(path, os.O_RDWR)
    except (FileNotFoundError, LinkRefused):
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)          # a reader (read_since) holds it: next time
        except BlockingIOError:
            return 0
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
        _keep_metric_lines(fd, start if before else start - _MARK_ROOM, end, kept_path(path), limit)
        if _collapse(fd, start, end - start):
            cut = end - start
        else:
            with pause if pause is not None else contextlib.nullcontext():
                size = os.fstat(fd).st_size                         # what the writer added until it held still
                kept = os.pread(fd, size - end, end)
                os.pwrite(fd, kept, start)
                os.ftruncate(fd, start + len(kept))
                cut = end - start
        os.pwrite(fd, _marker(before + cut, start, tail, _MARK_ROOM), start - _MARK_ROOM)
        return cut
    finally:
        os.close(fd)


def is_metric_line(line: bytes) -> bool:
    """A line a run may report a metric with: it holds a `{...}` JSON object at its end (after any prefix)."""
    line = line.strip()
    return line.endswith(b"}") and b"{" in line


def _keep_metric_lines(fd: int, start: int, end: int, kept: Path, limit: int) -> None:
    """Append the metric lines of bytes [start, end) of the log (with the lines straddling either edge: their
    cut-off parts would be unreadable) to `kept`, bounded to `limit` bytes."""
    back = os.pread(fd, min(start, _LONGEST_LINE), max(0, start - _LONGEST_LINE))
    nl = back.rfind(b"\n")
    pos = start - (len(back) - nl - 1) if nl >= 0 else max(0, start - len(back))
    found, buf = [], bytearray(_CHUNK)                     # one buffer, read into again and again
    while pos < end:                                       # pos: always a line's start
        n = os.preadv(fd, [memoryview(buf)[:min(_CHUNK, end - pos)]], pos)
        last = buf.rfind(b"\n", 0, n) + 1                  # buf[:last]: whole lines
        if not n or not last:
            break
        if buf.find(b"}", 0, last) >= 0:
            for m in _LINE_END.finditer(buf, 0, last):     # only lines ending in `}` are looked at
                line = bytes(buf[buf.rfind(b"\n", 0, m.start()) + 1:m.start() + 1])
                if is_metric_line(line):
                    found.append(line)
        pos += last
    if pos < end:                                          # the line straddling `end`: its rest stays in the log
        rest = os.pread(fd, end - pos + _LONGEST_LINE, pos)
        nl = rest.find(b"\n", end - pos)
        line = rest[:nl] if nl >= 0 else rest
        found += [line] if is_metric_line(line) else []
    if found:
        with open_log(kept) as f:
            f.write(b"".join(ln.rstrip(b"\r") + b"\n" for ln in found))
        if os.lstat(kept).st_size > limit:
            _compact(kept)


def _compact(kept: Path) -> None:
    """Keep, for each key, the line holding its last value (curves thin out; final values stay)."""
    with os.fdopen(open_nofollow(kept, os.O_RDONLY), "rb") as f:
        lines = f.read().splitlines()
    keys_of = []
    for line in lines:
        at = line.find(b"{")
        try:
            obj = json.loads(line[at:])
        except ValueError:
            obj = None
        keys_of.append(set(obj) if isinstance(obj, dict) else set())
    last, keep = {}, set()
    for i, keys in enumerate(keys_of):
        for k in keys - {"step"}:
            last[k] = i
    keep = set(last.values())
    atomic_write_bytes(kept, b"".join(ln + b"\n" for i, ln in enumerate(lines) if i in keep))


@dataclass(frozen=True)
class LogMark:
    """Where a run's output starts in its log: the log's size, the bytes cut before, the kept lines' size."""
    size: int = 0
    cut: int = 0
    kept: int = 0

    @classmethod
    def now(cls, path) -> "LogMark":
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except OSError:
            return cls()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            size = os.fstat(fd).st_size
            cut, _ = _mark(fd)
        finally:
            os.close(fd)
        try:
            kept = os.lstat(kept_path(path)).st_size
        except OSError:
            kept = 0
        return cls(size, cut, kept)


def cut_so_far(path) -> int:
    """Bytes cut from the log at `path` so far (0: never cut, or no log)."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        return _mark(fd)[0]
    finally:
        os.close(fd)


def _mark(fd: int) -> tuple[int, int]:
    """(bytes cut so far, where the kept tail starts) from the marker in the log's head; (0, 0) when none."""
    m = MARK.search(os.pread(fd, MiB + 64 * 1024, 0))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def read_since(path, mark: LogMark) -> str:
    """The run's output since `mark` as text (bad bytes replaced): what the log still holds of it and, where a
    cut took part of it, the marker line and the metric lines kept from the cut. "" when there is no log."""
    return read_since_bytes(path, mark).decode("utf-8", "replace")


def read_since_bytes(path, mark: LogMark) -> bytes:
    """read_since, as the bytes of the log (b"" when there is no log)."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except OSError:
        return b""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)                    # no cut while this reads (cap_log waits a tick)
        size = os.fstat(fd).st_size
        cut, start = _mark(fd)
        since = mark.size - (cut - mark.cut)              # where the run's output starts now
        if cut == mark.cut or since >= start:             # none of it was cut
            data = os.pread(fd, max(0, size - since), since) if since <= size else b""
        else:
            line = os.pread(fd, _MARK_ROOM, start - _MARK_ROOM)
            kept = _read_from(kept_path(path), mark.kept)
            before = os.pread(fd, max(0, start - _MARK_ROOM - mark.size), mark.size) if mark.size < start else b""
            data = before + line.rstrip(b" \n") + b"\n" + kept + os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    return data


def read_locked(fd: int, offset: int, size: int) -> bytes:
    """Up to `size` bytes at `offset` of a run's open log, under the shared lock (no cut while it reads: cap_log
    waits a tick): the reader's side of the protocol, for a reader that follows the log as it grows (LogTail)."""
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        return os.pread(fd, size, offset)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with os.fdopen(open_nofollow(path, os.O_RDONLY), "rb") as f:
            if f.seek(0, 2) < offset:                     # compacted since: all of it (the last values stand)
                offset = 0
            f.seek(offset)
            return f.read()
    except OSError:
        return b""


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
