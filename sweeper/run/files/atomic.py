"""File helpers of the run contract: writes other processes read are atomic (temp file, fsync, rename).

    atomic_write_json(path, {"jobs": {...}})             # a reader sees the old file or the new one, never half
    append_jsonl(path, {"step": 10, "train_loss": 3.2})  # one fsynced line
    read_tail(path, 4096)                                # the last bytes of a log, as text
    with open_log(run_dir / "stdout.log") as log: ...      # append, binary: never through a symbolic link

Links: a run dir may sit in a shared folder where someone else can plant files. Every file here is opened
with O_NOFOLLOW and must be a regular file: a symbolic link planted in its place (stdout.log -> ~/.bashrc)
is refused with LinkRefused (an OSError naming the link and its target), never written or read through.
An atomic write replaces a link by a file of ours (rename does not follow it). Folders above the file
(a sweep dir on /scratch through a link) are the user's choice and are followed.

Pure Python (no torch). The files of a run dir are read and written through sweeper.run.files.rundir, not here.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

from sweeper.undecodable import RAW_OR_ESCAPE


def atomic_write_bytes(path: str | Path, data: bytes, write: Callable[[BinaryIO, bytes], None] | None = None) -> None:
    """Write `data` to `path` atomically; `write(file, data)` replaces the plain f.write (e.g. chunked)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))        # mkstemp makes 0600; a shared lab directory must read our files
        with os.fdopen(fd, "wb") as f:
            (write or (lambda file, blob: file.write(blob)))(f, data)
            f.flush()
            if not getattr(_batch, "on", False):
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if not getattr(_batch, "on", False):
        _fsync_dir(path.parent)


_batch = threading.local()      # .on: inside one_sync() (this thread's writes only)


@contextmanager
def one_sync(root: str | Path):
    """Many atomic writes made durable by one sync of their file system at the end, not an fsync per file and
    folder (writing a plan of 10,000 runs: 40,000 fsyncs otherwise). Each write stays atomic (temp file, rename);
    what the block wrote is on disk when it returns. A block cut short (Ctrl-C) syncs nothing: use it only for
    writes that are redone when lost (a plan's run dirs: the same command completes them)."""
    _batch.on = True
    try:
        yield
    finally:
        _batch.on = False
    _sync_filesystem(Path(root))


def _sync_filesystem(root: Path) -> None:
    """syncfs(2) on root's file system (Linux), else sync(2)."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        os.sync()
        return
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            os.sync()
    except (AttributeError, OSError):
        os.sync()
    finally:
        os.close(fd)


def _mode_for(path: Path) -> int:
    """The mode open() would give a new file (0666 minus the umask), or the mode of the file being replaced
    (never a link's target's: lstat)."""
    try:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            return st.st_mode & 0o7777
    except OSError:
        pass
    return 0o666 & ~_umask()


_NOT_REGULAR = "not a regular file; sweeper reads and writes a run's files only as regular files: remove it"


class LinkRefused(OSError):
    """A run-dir file is a symbolic link (or not a regular file): sweeper neither reads nor writes through it."""


def open_nofollow(path: str | Path, flags: int, mode: int = 0o666) -> int:
    """os.open that refuses a symbolic link at `path` (O_NOFOLLOW) and anything but a regular file (a FIFO
    or a device: LinkRefused, never a hang). Returns the descriptor (blocking, close-on-exec)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            raise LinkRefused(None, f"a symbolic link (to {target}) where sweeper keeps a file of its own; it never "
                              f"reads or writes a run's files through a link: remove the link", str(path)) from None
        if e.errno == errno.ENXIO:                 # a FIFO with no reader, opened for writing
            raise LinkRefused(None, _NOT_REGULAR, str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LinkRefused(None, _NOT_REGULAR, str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_log(path: str | Path):
    """The file at `path` opened for appending bytes (created 0666 minus the umask); never through a link."""
    return os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


def open_text(path: str | Path):
    """The file at `path` opened for reading UTF-8 text (bad bytes replaced); never through a link."""
    return os.fdopen(open_nofollow(path, os.O_RDONLY), "r", encoding="utf-8", errors="replace")


def _umask() -> int:
    try:   # Linux: read it without changing it (os.umask is a process-wide swap, racy with threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    """UTF-8; a path's undecodable bytes are written back as those bytes, any other lone surrogate (from a damaged
    file's \\ud800 escape) as its escape, never an error (sweeper.undecodable)."""
    atomic_write_bytes(path, text.encode("utf-8", errors=RAW_OR_ESCAPE))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def append_jsonl(path: str | Path, record: dict) -> None:
    """Append one JSON line and flush it to disk (a reader sees whole lines, or a truncated last one)."""
    with os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())


def append_jsonl_many(path: str | Path, records: list[dict], default: Callable[[Any], Any] = str) -> None:
    """append_jsonl for many records, the same bytes: one write and one fsync (a million lines in a second, not an
    hour). The list is encoded by one C call and cut at its "}, {" boundaries when there are exactly
    len(records) - 1 of them (none inside a record); else record by record. `default`: for values JSON lacks."""
    if not records:
        return
    text = json.dumps(records, sort_keys=True, default=default)[1:-1]
    if text.count("}, {") == len(records) - 1:
        text = text.replace("}, {", "}\n{") + "\n"
    else:
        encode = json.JSONEncoder(sort_keys=True, default=default).encode
        text = "".join([encode(r) + "\n" for r in records])
    with os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def append_lines(path: str | Path, data: bytes) -> None:
    """Append lines already encoded (whole lines, each ending in a newline): one write and one fsync."""
    if not data:
        return
    with os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | Path) -> list[dict]:
    """Every complete, parseable line; a truncated or corrupt line is skipped."""
    out = []
    try:
        with open_text(path) as f:                                   # a damaged line is skipped, not fatal
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return out


def rewrite_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records))


def read_tail(path: str | Path, n: int = 4096) -> str:
    """The last n bytes of a file as text ("" when it is missing)."""
    try:
        with os.fdopen(open_nofollow(path, os.O_RDONLY), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
