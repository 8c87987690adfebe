"""Digests of checkpoint contents for bitwise comparisons across processes and machines.

    checkpoint_digest(run_dir / "ckpt" / "step_00000020.pt")   # sha256 of every tensor and leaf, in key order
"""
from __future__ import annotations

from pathlib import Path


def state_digest(obj, h=None) -> str:
    """sha256 over a checkpoint's content: every tensor's dtype, shape and bytes, every other leaf's repr, in key
    order (torch.save's bytes are not canonical: equal states can serialise differently)."""
    import hashlib

    import torch

    top = h is None
    h = h or hashlib.sha256()
    if isinstance(obj, dict):
        for key in sorted(obj, key=repr):
            h.update(repr(key).encode())
            state_digest(obj[key], h)
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}{len(obj)}".encode())
        for item in obj:
            state_digest(item, h)
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous().reshape(-1)
        h.update(f"{t.dtype}{tuple(obj.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif hasattr(obj, "tobytes"):  # numpy arrays (the numpy RNG state)
        h.update(obj.tobytes())
    else:
        h.update(repr(obj).encode())
    return h.hexdigest() if top else ""


def checkpoint_digest(path: Path) -> str:
    from sweeper.run.checkpoint import read_checkpoint

    blob = read_checkpoint(path)
    blob.pop("wall_s", None)      # bookkeeping (the run's wall time so far), not state: it differs between runs
    return state_digest(blob)
