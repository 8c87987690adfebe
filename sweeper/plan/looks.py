"""The looks record of an adaptive sweep (SWEEP_DIR/looks.json): the one module that reads and writes it.

    rec = read_looks(sweep_dir)            # None before the first look; UnreadableFile naming a damaged file
    write_looks(sweep_dir, {"design": ..., "looks": [...], "states": {...}})   # atomic: a kill keeps the old one

What it holds: the design (alpha, start, batch, max_seeds, min_effect, spending), what its levels were
calibrated on (sweeper.adaptive.design.CALIBRATION), one entry per completed look
(seeds per arm, and per comparison the statistic, boundary, nominal p, alpha spent, local level, decision) and
each comparison's state (status, reason, its looks). A look is written only after its analysis, so a sweep
interrupted during a look repeats that look's launch (its finished runs are kept) and keeps every earlier one.
"""
from __future__ import annotations

import json
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json
from sweeper.run.files.reading import UnreadableFile

LOOKS = "looks.json"


def looks_path(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / LOOKS


def read_looks(sweep_dir: str | Path) -> dict | None:
    path = looks_path(sweep_dir)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UnreadableFile(path, f"damaged ({type(e).__name__}: {e})".splitlines()[0],
                             "delete it to restart the adaptive looks (finished runs are kept)") from None
    if not isinstance(record, dict) or not isinstance(record.get("looks"), list) or "design" not in record \
            or not isinstance(record.get("design"), dict) or not isinstance(record.get("states", {}), dict):
        raise UnreadableFile(path, "damaged (not a looks record)",
                             "delete it to restart the adaptive looks (finished runs are kept)")
    return record


def write_looks(sweep_dir: str | Path, record: dict) -> None:
    atomic_write_json(looks_path(sweep_dir), record)
