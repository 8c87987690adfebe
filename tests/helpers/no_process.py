"""Run a command in this process and see what it did: exit status, stderr, processes started, files written.

    result = run_in_process(sweep_main, ["+experiment=rope", "seeds=3-1"], cwd=tmp_path)
    assert result.code == 2 and result.started == [] and result.written == []

Process starts are counted through Python's audit hooks (subprocess.Popen, os.fork, os.posix_spawn, os.exec*,
os.system: every way Python starts a process), not by patching one function, so a probe started any way counts.
The hook is installed once per test process and records only while a command runs here.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

SPAWN_EVENTS = ("subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                "pty.spawn")
_recording: list | None = None
_installed = False


def _hook(event: str, args) -> None:
    if _recording is not None and event.startswith(SPAWN_EVENTS):
        _recording.append((event, str(args)[:200]))


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    started: list = field(default_factory=list)     # (audit event, its arguments) of every process start
    written: list = field(default_factory=list)     # paths created under cwd


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*")}


def run_in_process(main, argv: list[str], cwd: Path) -> Result:
    """main(argv) in cwd (stdout/stderr captured); what it started and wrote."""
    global _recording, _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    before, here = files_under(cwd), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    _recording = []
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        started, _recording = _recording, None
        os.chdir(here)
    return Result(code, out.getvalue(), err.getvalue(), started, sorted(files_under(cwd) - before))
