"""Who runs a run: the identity of a process (host, pid, the pid's start time, boot id), and whether it is alive.

    me = process_identity()                  # {"host": "n1", "pid": 4242, "start": 981234, "boot_id": "..."}
    alive(me)                                # True: this very process (a reused pid has another start time)
    alive({"host": "other-node", ...})       # None: another host, cannot be told from here
    foreign_owner(fd, path)                  # "uid 1001 (alice)" when an open file or its folder is not ours

A run records its process's identity in its status while it runs (RunDir.update_status(owner=...)); a reader
tells a live `running` from one left by a killed sweeper (RunDir.liveness()). Pure Python, Linux /proc (elsewhere
the start time is None and only the pid is checked).

Who owns a file: a file that runs code when it is loaded (a checkpoint is a pickle) is loaded only when this
user owns it and the folder it sits in (else someone else could have written or swapped it):
foreign_owner() says who else does; TRUST_ENV=1 accepts such files (said once on stderr).
"""
from __future__ import annotations

import os
import socket
from functools import lru_cache
from pathlib import Path

TRUST_ENV = "SWEEPER_TRUST_OTHER_USERS_FILES"   # "1": load checkpoints another user owns (they can run code)


@lru_cache(maxsize=1)
def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] in (b"Z", b"X"):   # a zombie (or a dead task) has ended: nothing runs any more
            return None
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def process_identity(pid: int | None = None) -> dict:
    """This process (or `pid`, on this host) as a run's owner record."""
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "pid": pid, "start": start_time(pid), "boot_id": boot_id()}


def alive(owner: dict | None) -> bool | None:
    """True: the recorded process still runs; False: it is gone (or its pid now names another process);
    None: it cannot be told (no record, or another host)."""
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or isinstance(owner.get("pid"), bool):
        return None
    if owner.get("host") != socket.gethostname():
        return None
    if owner.get("boot_id") and boot_id() and owner["boot_id"] != boot_id():
        return False                      # the machine rebooted since: nothing of that process runs
    now = start_time(owner["pid"])
    if now is None:
        if os.path.isdir("/proc/self"):
            return False
        try:                              # no /proc: the pid's existence is all there is to go on
            os.kill(owner["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    recorded = owner.get("start")
    return recorded is None or recorded == now


def _user(uid: int) -> str:
    try:
        import pwd  # deferred: POSIX only, and only when a file is someone else's

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def foreign_owner(fd: int, path: str | Path) -> str | None:
    """Who else owns the open file `fd` (at `path`) or the folder it sits in, as "uid 1001 (alice) owns ...";
    None when this user (or root, who can run anything anyway) owns both."""
    trusted = (os.geteuid(), 0)
    uid = os.fstat(fd).st_uid
    if uid not in trusted:
        return f"{_user(uid)} owns {path}"
    folder = Path(path).parent
    try:
        duid = os.stat(folder).st_uid
    except OSError:
        return None
    if duid not in trusted:
        return f"{_user(duid)} owns its folder {folder}"
    return None
