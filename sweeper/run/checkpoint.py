"""Checkpoint files: everything a bitwise resume needs, written atomically with a checksum.

    save_checkpoint(run_dir / "ckpt", step=100, state={...}, keep=2)
    found = load_latest(run_dir / "ckpt")   # newest valid one; corrupt/truncated newer files are reported
    check_fingerprint(found.state["fingerprint"], current, run_dir, found.state.get("config"), cfg)

Users call these through `run.save_checkpoint(state, step)` / `run.load_checkpoint()` (sweeper.run), which add
the RNG states and the fingerprint. File format: a magic (b"SWEEPCK1": torch.save payload, used whenever the
process has imported torch; b"SWEEPCKP": pickle payload, for code without torch) + sha256(payload) (32 bytes)
+ payload. The file is
written to a hidden temp file in the same folder, fsynced, then renamed over `step_XXXXXXXX.pt`, so a process
killed mid-write leaves only a `.step_*.tmp` file (ignored, deleted by the next save). A file whose checksum
does not match (truncated, bit-flipped) is skipped loudly, renamed to `*.corrupt` for inspection, and the
previous checkpoint is used.

Test-only switch: SWEEPER_TEST_CKPT_WRITE_DELAY_S=0.5 pauses halfway through writing the temp file, so a test
can SIGKILL the process while a checkpoint write is in progress.
"""
from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_bytes, open_nofollow
from sweeper.run.files.owner import TRUST_ENV, foreign_owner

MAGIC, MAGIC_PICKLE = b"SWEEPCK1", b"SWEEPCKP"
_NAME = re.compile(r"^step_(\d{8})\.pt$")
WRITE_DELAY_ENV = "SWEEPER_TEST_CKPT_WRITE_DELAY_S"


ASSUMED = {"world_size": 1}          # fingerprint keys older checkpoints lack, and the value they had
MAY_BE_UNKNOWN = ("device_model",)   # None (not known when the fingerprint was taken) on either side: not compared


class CorruptCheckpoint(RuntimeError):
    pass


class FingerprintMismatch(RuntimeError):
    """The checkpoint was written by a different setup; resuming would not be the same run."""


class ForeignCheckpoint(FingerprintMismatch):
    """The checkpoint (or its folder) belongs to another user: loading it (a pickle) would run their code."""


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


def encode(state: dict) -> bytes:
    torch = sys.modules.get("torch")
    if torch is None:
        payload, magic = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), MAGIC_PICKLE
    else:
        buf = io.BytesIO()
        torch.save(state, buf)
        payload, magic = buf.getvalue(), MAGIC
    return magic + hashlib.sha256(payload).digest() + payload


def save_checkpoint(ckpt_dir: Path, step: int, state: dict, keep: int) -> Path:
    """Write step_XXXXXXXX.pt atomically, then delete all but the newest `keep` checkpoints and stale temp files."""
    ckpt_dir = Path(ckpt_dir)
    path = checkpoint_path(ckpt_dir, step)
    delay_s = float(os.environ.get(WRITE_DELAY_ENV) or 0)
    atomic_write_bytes(path, encode(state), write=_write_slowly(delay_s) if delay_s > 0 else None)
    for old in list_checkpoints(ckpt_dir)[keep:]:
        old.unlink(missing_ok=True)
    for tmp in ckpt_dir.glob(".step_*.tmp"):   # left behind by a process killed mid-write
        tmp.unlink(missing_ok=True)
    return path


def _write_slowly(delay_s: float):
    """Test-only writer: half the bytes, a pause, the rest (a window in which the temp file is half written)."""
    def write(f, data: bytes) -> None:
        f.write(data[:len(data) // 2])
        f.flush()
        time.sleep(delay_s)
        f.write(data[len(data) // 2:])
    return write


def decode(blob: bytes, path: Path | str = "<bytes>") -> dict:
    magic = blob[:len(MAGIC)]
    if len(blob) < len(MAGIC) + 32 or magic not in (MAGIC, MAGIC_PICKLE):
        raise CorruptCheckpoint(f"{path}: not a sweeper checkpoint or truncated ({len(blob)} bytes)")
    digest, payload = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        raise CorruptCheckpoint(f"{path}: checksum mismatch ({len(blob)} bytes; truncated or corrupted on disk)")
    if magic == MAGIC_PICKLE:
        return pickle.loads(payload)
    import torch  # deferred: torch (about 2 s to import), only when this runs

    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)


def read_checkpoint(path: Path) -> dict:
    """The checkpoint's state. Never through a link; ForeignCheckpoint when another user owns the file or its
    folder (a pickle runs code as it loads) unless SWEEPER_TRUST_OTHER_USERS_FILES=1."""
    with os.fdopen(open_nofollow(path, os.O_RDONLY), "rb") as f:
        other = foreign_owner(f.fileno(), path)
        if other and os.environ.get(TRUST_ENV) != "1":
            raise ForeignCheckpoint(
                f"refusing to load the checkpoint {path}: {other}, not you (uid {os.geteuid()}); a checkpoint is a "
                f"pickle, and loading it runs whatever code its writer put in it. Resume a sweep dir of your own, "
                f"or, if you trust that user, set {TRUST_ENV}=1")
        if other:
            print(f"WARNING: loading {path}, which {other.split(' owns ')[0]} owns ({TRUST_ENV}=1)", file=sys.stderr,
                  flush=True)
        blob = f.read()
    return decode(blob, path)


def load_latest(ckpt_dir: Path) -> Loaded:
    """The newest checkpoint that reads back with a valid checksum. Corrupt newer ones are listed in `skipped`
    and renamed to `<name>.corrupt` (kept for inspection; never loaded or counted again)."""
    loaded = Loaded(state=None, path=None)
    for path in list_checkpoints(ckpt_dir):
        try:
            loaded.state, loaded.path = read_checkpoint(path), path
            return loaded
        except ForeignCheckpoint:
            raise                                    # never skipped to an older one: the whole folder is suspect
        except CorruptCheckpoint as e:
            aside = path.with_name(path.name + ".corrupt")
            try:
                os.replace(path, aside)
                loaded.skipped.append((path, f"{e}; moved aside to {aside.name}"))
            except OSError:
                loaded.skipped.append((path, str(e)))
        except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as e:
            loaded.skipped.append((path, f"unreadable: {type(e).__name__}: {e}"))
    return loaded


def check_fingerprint(saved: dict, current: dict, run_dir: Path, saved_config: dict | None = None,
                      current_config: dict | None = None) -> None:
    """Raise FingerprintMismatch naming every field (and config key) that differs and how to start fresh."""
    saved, current = {**ASSUMED, **saved}, {**ASSUMED, **current}     # older fingerprints: one rank
    unknown = [k for k in MAY_BE_UNKNOWN if None in (saved.get(k), current.get(k))]
    diffs = [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in sorted(set(saved) | set(current))
             if saved.get(k) != current.get(k) and k not in unknown]
    if not diffs:
        return
    if saved_config is not None and current_config is not None:
        changed = config_diff(saved_config, current_config)
        if changed:
            diffs.insert(0, "config " + ", ".join(changed))
    raise FingerprintMismatch(
        f"refusing to resume {run_dir}: its checkpoints come from a different setup ({'; '.join(diffs)}). "
        f"Restore the original config, data, thread count, world size and device, or start fresh by deleting "
        f"{Path(run_dir) / 'ckpt'} (or use another sweeper.dir).")


def config_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ: ["train.lr: 0.003 -> 0.001", ...]."""
    out = []
    for key in sorted(set(old) | set(new), key=str):
        a, b, name = old.get(key), new.get(key), f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_diff(a, b, name + ".")
        elif a != b:
            out.append(f"{name}: {a!r} -> {b!r}")
    return out
