"""A run's log read while the run writes it: whole lines handed to a parser as they come (issue 48: ingest).

    tail = LogTail(log_path, mark.size, parsed.feed)   # after the fork: a thread in the run command's process
    tail.start()
    ...                                                # the script runs and writes the log
    data = read_since_bytes(log_path, mark)            # its whole output, once it has ended
    rest = tail.stop(data)                             # data[tail's bytes:]: feed it; None: feed all of data

The script writes its log itself (sweeper.run.files.logcap: nothing sits between a script and its output), so this
thread only reads: up to CHUNK bytes at a time through the log owner's locked read (logcap.read_locked: a cut of the
log waits for the next tick, as with read_since), up to the last newline, while the script runs, so that parsing
overlaps the script instead of following it. What it read is checked at the end against the run's output as
read_since gives it (length and CRC-32 of the same prefix): a log cut while the run ran (its middle moved into
stdout.kept.log), a write over the log or any error of this thread makes stop() answer None, and the whole output is
parsed again from the start, as if no thread had run.
Torch-free, stdlib only.
"""
from __future__ import annotations

import os
import threading
import zlib
from typing import Callable

from sweeper.run.files.atomic import open_nofollow
from sweeper.run.files.logcap import read_locked

CHUNK = 8 * 2 ** 20         # bytes read at a time
POLL_S = 0.05               # the wait at the end of the log before reading again


class LogTail:
    """Feeds the whole lines of a growing log, from byte `offset` on, to `feed` (in a thread of its own)."""

    def __init__(self, path: str, offset: int, feed: Callable[[bytes], None]):
        self.path, self.offset, self.feed = path, offset, feed
        self.read = 0                               # bytes fed so far
        self.crc = 0                                # their CRC-32
        self.failed: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweeper-log-tail", daemon=True)

    def start(self) -> "LogTail":
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            fd = open_nofollow(self.path, os.O_RDONLY)
        except OSError as e:
            self.failed = e
            return
        try:
            while not self._done.is_set():          # the rest, once the run has ended, is the caller's
                data = read_locked(fd, self.offset + self.read, CHUNK)
                whole = data.rfind(b"\n") + 1
                if whole:
                    chunk = data[:whole] if whole < len(data) else data
                    self.feed(chunk)
                    self.crc = zlib.crc32(chunk, self.crc)
                    self.read += whole
                if len(data) < CHUNK:
                    self._done.wait(POLL_S)
        except BaseException as e:  # noqa: BLE001 - any failure here means: parse the whole output at the end
            self.failed = e
        finally:
            os.close(fd)

    def stop(self, data: bytes | None = None) -> bytes | None:
        """End the thread; with `data` (the run's output since the mark), the part of it not yet fed, or None
        when what was fed is not data's start (a cut, an error): then everything must be parsed again."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        if data is None or self.failed is not None or len(data) < self.read:
            return None
        if zlib.crc32(memoryview(data)[:self.read]) != self.crc:
            return None
        return data[self.read:]
