"""One variant's health preflight in its own process, placed as a run is (sweeper.execute.preflight starts it).

    python -m sweeper.execute.preflight_child REQUEST.json
    REQUEST = {"hook": "module:function", "cwd": TASK_CWD, "config": {...}, "cores": [0], "report": PATH,
               "result": PATH}

Its environment comes from the backend (Backend.preflight_place: a slot's OMP/MKL threads, OMP_WAIT_POLICY=PASSIVE,
its GPU), set before torch is imported; it pins itself to the slot's cores, imports the task's hook from the task's
folder as a run does, calls it with the config, writes the HealthReport to `report`, and to `result`:
{"error": "TypeError: ..." or null, "files": the source files it imported (the preflight cache's dependencies),
"wall_s": the hook's time}. A hook that raises, or returns no HealthReport, is an error, not a crash (exit 0).
"""
from __future__ import annotations

import json
import os
import sys
import sysconfig
import time
from pathlib import Path

from sweeper.run.entry import load_entry
from sweeper.run.files.atomic import atomic_write_json


def imported_files() -> list[str]:
    """The source files of every imported module outside the standard library (its version is in the key)."""
    stdlib = {os.path.realpath(sysconfig.get_path(k)) for k in ("stdlib", "platstdlib")}
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        if any(real.startswith(s + os.sep) for s in stdlib) and "site-packages" not in real:
            continue
        out.add(real)
    return sorted(out)


def run(request: dict) -> dict:
    cores = request.get("cores")
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    if request["cwd"] not in sys.path:
        sys.path.insert(0, request["cwd"])       # the user's modules, as a run's process sees them
    t0 = time.time()
    error = None
    try:
        report = load_entry(request["hook"])(request["config"])
        if not all(hasattr(report, a) for a in ("verdict", "failures", "warnings", "write")):
            raise TypeError(f"returned {type(report).__name__}, not a sweeper.health.HealthReport")
        report.write(request["report"])
    except Exception as e:  # noqa: BLE001 - the user's hook: its failure is this variant's preflight result
        error = f"{type(e).__name__}: {e}".splitlines()[0]
    return {"error": error, "files": imported_files(), "wall_s": time.time() - t0}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    atomic_write_json(Path(request["result"]), run(request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
