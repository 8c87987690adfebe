"""A short, stable hash of a JSON-able value: config hashes, run ids, the journal's keys. Pure Python.

    stable_hash({"lr": 3e-4, "model": {"dim": 64}})   # "38f19f77092d": 12 hex digits, the same for any dict order
    stable_hash(cfg, n=16)                            # a longer one
"""
from __future__ import annotations

import hashlib
import json
from typing import Any


def stable_hash(obj: Any, n: int = 12) -> str:
    """Short sha256 of a JSON-able object, independent of dict order (config hashes, run ids)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:n]
