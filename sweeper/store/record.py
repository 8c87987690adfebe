"""SWEEP_DIR/reused.json, the one owner of that file: which runs of a sweep were reused, from where, by which key.

    record_reused(sweep_dir, {"base-s0-3f0c1a2b": ReusedEntry("/abs/sweeps/old/runs/base/seed_0", "9a1b...")})
    read_reused(sweep_dir)      # {run_id: ReusedEntry}; {} when the sweep reused nothing; UnreadableFile if damaged

Written atomically, merged with what is there (a later launch of the same sweep adds to it).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json
from sweeper.run.files.reading import UnreadableFile, json_object, load_json_file

REUSED = "reused.json"
FIX = "delete it (the sweep's runs stay; gc then counts them as the sweep's own)"


@dataclass(frozen=True)
class ReusedEntry:
    source: str         # the earlier run's run dir (absolute), its files copied or linked here
    key: str            # its identity key (sweeper.store.identity.run_key)
    at: float = 0.0     # when it was reused (seconds since the epoch)

    def to_dict(self) -> dict:
        return {"source": self.source, "key": self.key, "at": self.at}


def read_reused(sweep_dir: str | Path) -> dict[str, ReusedEntry]:
    path = Path(sweep_dir) / REUSED
    data = load_json_file(path, "record of reused runs", FIX)
    if data is None:
        return {}
    runs = json_object(json_object(data, path, "record of reused runs", FIX).get("runs"), path, "`runs`", FIX)
    out = {}
    for run_id, entry in runs.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
            raise UnreadableFile(path, f"runs.{run_id} has no source", FIX)
        out[run_id] = ReusedEntry(entry["source"], str(entry.get("key", "")), float(entry.get("at") or 0.0))
    return out


def record_reused(sweep_dir: str | Path, entries: dict[str, ReusedEntry]) -> None:
    """Add `entries` to the sweep's record (atomically)."""
    if not entries:
        return
    try:
        merged = read_reused(sweep_dir)
    except UnreadableFile:
        merged = {}
    merged.update({k: ReusedEntry(e.source, e.key, e.at or time.time()) for k, e in entries.items()})
    atomic_write_json(Path(sweep_dir) / REUSED, {"runs": {k: e.to_dict() for k, e in merged.items()}})
