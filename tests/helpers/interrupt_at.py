"""Ctrl-C at a chosen moment of a real sweep: start `python -m sweeper ...`, wait for a line of its output, wait
`delay` seconds more, send SIGINT; what came of it.

    t = interrupt_after("sweep dir ", 0.7, ["+experiment=rope", ...], cwd=tmp_path)
    assert t.code == 130 and t.answered_s < 1.5 and "Traceback" not in t.output
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from tests.helpers.commands import ROOT


@dataclass
class Trial:
    delay_s: float
    code: int | None         # the sweeper's exit status (-6: SIGABRT, the crash this guards against)
    answered_s: float        # from the signal to the process's exit
    output: str              # stdout and stderr together
    moment: str              # what the sweeper had printed last before the signal


def interrupt_after(marker: str, delay: float, args: list[str], cwd, timeout: float = 300) -> Trial:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if marker in line:
                break
        time.sleep(delay)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=timeout)[0]
        answered = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Trial(delay, proc.returncode, answered, "".join(seen) + rest, seen[-1].strip() if seen else "")
