"""The state trail of a run: per-step hashes of everything a resume must restore, for the resume audit.

    SWEEPER_AUDIT_TRAIL=/tmp/a/trail.jsonl python -m sweeper.train RUN_DIR    # one line per step
    hashes = state_hashes(trainer)   # {"data/batch": ..., "rng/torch": ..., "param/tok_emb.weight": ..., ...}

Each trail line is {"step", "pid", "hashes": {name: sha256[:16]}} with names in a fixed order: the step's
batch, the RNG states and the data-order state first (the usual root causes), then the LR schedule, the model
parameters and buffers, and the optimizer state of each parameter. The audit (train/audit.py) compares two
trails name by name and reports the first step and name that differ.

Audit-only environment switches read by `hooks_from_env` (the loop calls on_step(trainer, step, run) after
every optimizer step):
    SWEEPER_AUDIT_TRAIL=PATH         append this step's hashes to PATH
    SWEEPER_AUDIT_STOP_AT_STEP=K     after step K, run.request_stop as if SIGTERM had arrived (checkpoint, exit 75)
    SWEEPER_AUDIT_KILL_AT_STEP=K     after step K, SIGKILL this process (no checkpoint, no cleanup)
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
from typing import Callable

import numpy as np
import torch

from sweeper.run.files.atomic import read_jsonl
from sweeper.run.streams import capture_rng_states

TRAIL_ENV, STOP_ENV, KILL_ENV = "SWEEPER_AUDIT_TRAIL", "SWEEPER_AUDIT_STOP_AT_STEP", "SWEEPER_AUDIT_KILL_AT_STEP"
AUDIT_ENVS = (TRAIL_ENV, STOP_ENV, KILL_ENV)


def _sha(*chunks: bytes) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.hexdigest()[:16]


def tensor_digest(t: torch.Tensor) -> str:
    """Hash of the exact bits, dtype and shape (works for bf16 and 0-dim tensors, on any device)."""
    t = t.detach().to("cpu").contiguous()
    return _sha(f"{t.dtype}{tuple(t.shape)}".encode(), t.reshape(-1).view(torch.uint8).numpy().tobytes())


def obj_digest(obj) -> str:
    """Hash of a nested state (tensors, arrays, numbers, tuples, dicts) by value."""
    h = hashlib.sha256()

    def feed(x):
        if isinstance(x, torch.Tensor):
            h.update(tensor_digest(x).encode())
        elif isinstance(x, np.ndarray):
            h.update(f"{x.dtype}{x.shape}".encode() + np.ascontiguousarray(x).tobytes())
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                h.update(repr(k).encode())
                feed(x[k])
        elif isinstance(x, (list, tuple)):
            h.update(b"[")
            for v in x:
                feed(v)
            h.update(b"]")
        else:
            h.update(repr(x).encode())

    feed(obj)
    return h.hexdigest()[:16]


def state_hashes(tr) -> dict[str, str]:
    """Hashes of the trainer's full resumable state after a step (a `train.loop.Trainer`)."""
    out: dict[str, str] = {}
    if getattr(tr, "last_starts", None) is not None:
        out["data/batch"] = tensor_digest(tr.last_starts)
    rng = capture_rng_states(for_checkpoint=False)
    for name in ("python", "numpy", "torch"):
        if name in rng:
            out[f"rng/{name}"] = obj_digest(rng[name])
    for i, state in enumerate(rng.get("cuda") or []):
        out[f"rng/cuda:{i}"] = tensor_digest(state)
    out["data/order_state"] = obj_digest(tr.sampler.state_dict())
    out["schedule/lr"] = obj_digest([g["lr"] for g in tr.optimizer.param_groups] + [tr.scheduler.state_dict()])
    for name, t in tr.model.state_dict().items():
        out[f"param/{name}"] = tensor_digest(t)
    names = {id(p): n for n, p in tr.model.named_parameters()}
    for group in tr.optimizer.param_groups:
        for p in group["params"]:
            for key, value in sorted(tr.optimizer.state.get(p, {}).items()):
                out[f"optim/{names.get(id(p), '?')}.{key}"] = (tensor_digest(value) if isinstance(value, torch.Tensor)
                                                              else obj_digest(value))
    return out


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a step number") from None


def hooks_from_env() -> Callable | None:
    """The per-step hook the audit switches ask for, or None (normal runs: no hook, no cost)."""
    path, stop_at, kill_at = os.environ.get(TRAIL_ENV), _int_env(STOP_ENV), _int_env(KILL_ENV)
    if not (path or stop_at or kill_at):
        return None

    def on_step(tr, step: int, run) -> None:
        if path:
            line = json.dumps({"step": step, "pid": os.getpid(), "hashes": state_hashes(tr)}) + "\n"
            with open(path, "a", encoding="utf-8") as f:   # a SIGKILL right after still leaves the line
                f.write(line)
        if kill_at is not None and step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if stop_at is not None and step == stop_at:     # (not run.should_stop: a collective with several ranks)
            run.request_stop(f"{STOP_ENV}={stop_at}")

    return on_step


def read_trail(path) -> list[dict]:
    """Trail lines in file order (a truncated last line, from a kill mid-write, is skipped)."""
    return read_jsonl(path)
