"""The sweep preflight's cache: a variant's verdict is kept with what it depended on, so that resuming or extending
the same config never repeats it (SWEEP_DIR/preflight/<variant>.cache.json; this module owns that file).

    inputs = preflight_inputs(hook, config, env)            # what the call was given
    hit = cached(sweep_dir, variant, inputs)                # the stored outcome, or None: run it
    store(sweep_dir, variant, inputs, files, outcome)       # after a run: outcome = (verdict, failed, details)

A record is used when its inputs are equal (the hook, the variant's resolved config with the seed it checks, the
thread / wait-policy / device environment, the Python version) and every source file the preflight imported
(sweeper.execute.preflight_child lists them: the task's code, sweeper's, torch's) still has the size and mtime
it had, as make decides. Editing the model, the trainer, the health checks or the config runs it again.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json

ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY", "CUDA_VISIBLE_DEVICES")
VERSION = 1


def path_of(sweep_dir: Path, variant: str) -> Path:
    return Path(sweep_dir) / "preflight" / f"{variant}.cache.json"


def preflight_inputs(hook: str, config: dict, env: dict) -> dict:
    return {"hook": hook, "config": config, "env": {k: env.get(k) for k in ENV_KEYS}, "python": sys.version}


def _digest(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _stat(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def cached(sweep_dir: Path, variant: str, inputs: dict) -> dict | None:
    """The stored record ({"verdict", "failed", "details", "wall_s", "at"}) when nothing it depends on changed."""
    try:
        record = json.loads(path_of(sweep_dir, variant).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != VERSION or record.get("inputs") != _digest(inputs):
        return None
    files = record.get("files")
    if not isinstance(files, dict) or any(_stat(p) != s for p, s in files.items()):
        return None
    return record


def store(sweep_dir: Path, variant: str, inputs: dict, files: list[str], outcome: tuple[str, str, str],
          wall_s: float) -> None:
    verdict, failed, details = outcome
    atomic_write_json(path_of(sweep_dir, variant), {
        "version": VERSION, "inputs": _digest(inputs), "verdict": verdict, "failed": failed, "details": details,
        "wall_s": round(wall_s, 2), "at": time.time(), "files": {p: _stat(p) for p in files},
    })
