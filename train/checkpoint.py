"""RNG-state checkpoints: everything a bitwise resume needs, written atomically with a checksum.

    save_checkpoint(run_dir / "ckpt", step=100, state={...}, keep=2)
    found = load_latest(run_dir / "ckpt")   # newest valid one; corrupt/truncated newer files are reported

File format: b"SWEEPCK1" + sha256(payload) (32 bytes) + payload (torch.save of the state dict). A file whose
checksum does not match (truncated, bit-flipped) is skipped loudly and the previous checkpoint is used.
"""
from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from train.atomic import atomic_write_bytes

MAGIC = b"SWEEPCK1"
_NAME = re.compile(r"^step_(\d{8})\.pt$")


class CorruptCheckpoint(RuntimeError):
    pass


class FingerprintMismatch(RuntimeError):
    """The checkpoint was written by a different setup; resuming would not be the same run."""


@dataclass
class Loaded:
    state: dict | None
    path: Path | None
    skipped: list[tuple[Path, str]] = field(default_factory=list)   # (file, why it was not used)


def checkpoint_path(ckpt_dir: Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:08d}.pt"


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """Checkpoint files, newest step first."""
    d = Path(ckpt_dir)
    if not d.is_dir():
        return []
    files = [p for p in d.iterdir() if _NAME.match(p.name)]
    return sorted(files, key=lambda p: int(_NAME.match(p.name).group(1)), reverse=True)


def save_checkpoint(ckpt_dir: Path, step: int, state: dict, keep: int) -> Path:
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getvalue()
    path = checkpoint_path(ckpt_dir, step)
    atomic_write_bytes(path, MAGIC + hashlib.sha256(payload).digest() + payload)
    for old in list_checkpoints(ckpt_dir)[keep:]:
        old.unlink(missing_ok=True)
    for tmp in Path(ckpt_dir).glob(".step_*.tmp"):   # left behind by a process killed mid-write
        tmp.unlink(missing_ok=True)
    return path


def read_checkpoint(path: Path) -> dict:
    blob = Path(path).read_bytes()
    if len(blob) < len(MAGIC) + 32 or not blob.startswith(MAGIC):
        raise CorruptCheckpoint(f"{path}: not a sweeper checkpoint or truncated ({len(blob)} bytes)")
    digest, payload = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptCheckpoint(f"{path}: checksum mismatch (truncated or corrupted on disk)")
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)


def load_latest(ckpt_dir: Path) -> Loaded:
    loaded = Loaded(state=None, path=None)
    for path in list_checkpoints(ckpt_dir):
        try:
            loaded.state, loaded.path = read_checkpoint(path), path
            return loaded
        except (CorruptCheckpoint, OSError, EOFError, RuntimeError, ValueError) as e:
            loaded.skipped.append((path, str(e)))
    return loaded


def check_fingerprint(saved: dict, current: dict, run_dir: Path) -> None:
    """Raise FingerprintMismatch naming every field that differs and how to start fresh."""
    diffs = [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}"
             for k in sorted(set(saved) | set(current)) if saved.get(k) != current.get(k)]
    if diffs:
        raise FingerprintMismatch(
            f"refusing to resume {run_dir}: its checkpoints come from a different setup ({'; '.join(diffs)}). "
            f"Restore the original setup, or start fresh by deleting {Path(run_dir) / 'ckpt'} "
            f"(or use another sweeper.dir).")
