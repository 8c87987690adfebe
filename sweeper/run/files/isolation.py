"""RUN_DIR/isolation.json: the one owner of that file, what a run changed in its working folder outside its run
dir (sweeper.run.observed.folder_watch measures it; sweeper.run.command writes it). Torch-free.

    write_isolation(run_dir, IsolationRecord(folder, started, ended, changed=[("ckpt.npz", "created", 812)]))
    read_isolation(run_dir)      # None when absent; UnreadableFile when damaged

`watched` is False when the folder was too big to watch (nothing is known then); `changed` is cut at MAX_LISTED
entries (`n_changed` counts them all). The report's run-isolation check reads it
(sweeper.analysis.integrity.records.isolation).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json
from sweeper.run.files.reading import UnreadableFile, json_object, load_json_file

ISOLATION = "isolation.json"
MAX_LISTED = 200


@dataclass(frozen=True)
class IsolationRecord:
    folder: str                    # the run's working folder (task.cwd)
    started: float
    ended: float
    watched: bool = True
    changed: list[tuple[str, str, int]] = field(default_factory=list)   # (path relative to folder, kind, size)
    n_changed: int | None = None

    def to_dict(self) -> dict:
        return {"folder": self.folder, "started": self.started, "ended": self.ended, "watched": self.watched,
                "n_changed": len(self.changed) if self.n_changed is None else self.n_changed,
                "changed": [list(c) for c in self.changed[:MAX_LISTED]]}


def write_isolation(run_dir: str | Path, record: IsolationRecord) -> None:
    atomic_write_json(Path(run_dir) / ISOLATION, record.to_dict())


def read_isolation(run_dir: str | Path) -> IsolationRecord | None:
    path = os.path.join(run_dir, ISOLATION)          # a string path: a report reads 1,000s of these
    raw = load_json_file(path, "run isolation record", "delete it")
    if raw is None:
        return None
    d = json_object(raw, path, "run isolation record", "delete it")
    try:
        changed = [(str(p), str(k), int(s)) for p, k, s in d.get("changed") or []]
        return IsolationRecord(str(d["folder"]), float(d["started"]), float(d["ended"]), bool(d.get("watched", True)),
                               changed, int(d.get("n_changed", len(changed))))
    except (KeyError, TypeError, ValueError) as e:
        raise UnreadableFile(path, f"not a run isolation record ({e})", "delete it") from None
