"""The evaluation fingerprint: a short hash of the examples a run is evaluated on (or of their ids), hashed once
per run, so the report can check that every arm and seed of a sweep was evaluated on the same data
(sweeper.analysis.integrity.records.evaluation). Torch-free; numpy only when the data is an array.

    run.eval_fingerprint(x_val)             # the run API (sweeper.run.Run): records it in the run's summary
    fingerprint_of([17, 42, 99])            # ids, arrays, tensors, lists, dicts, str/bytes, a map-style dataset
    print(json.dumps({"eval_fingerprint": "any-string-naming-the-eval-set"}))   # a task.command without the API

EVAL_KEY is the documented JSON key a command prints (stdout JSON line or metrics file); its value, any string
or number, is recorded as the run's evaluation fingerprint, not as a metric.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

EVAL_KEY = "eval_fingerprint"   # the summary's fingerprint key, and the JSON key a task.command prints


def fingerprint_of(data: Any, n: int = 16) -> str:
    """Short sha256 of `data`: its values, dtypes and shapes (1 and 1.0 differ; the order of examples counts).
    A data loader or a generator is refused (iterating it would draw from its RNG): pass the examples, a
    map-style dataset, or their ids."""
    digest = hashlib.sha256()
    _feed(digest, data)
    return digest.hexdigest()[:n]


def _feed(digest, data: Any) -> None:
    if data is None or isinstance(data, (bool, int, float, str)):
        digest.update(f"{type(data).__name__}:{json.dumps(data)};".encode())
    elif isinstance(data, (bytes, bytearray, memoryview)):
        digest.update(b"bytes:%d;" % len(data))
        digest.update(bytes(data))
    elif hasattr(data, "detach") and hasattr(data, "cpu"):           # a torch tensor (torch is already imported)
        _feed(digest, data.detach().cpu().contiguous().numpy())
    elif hasattr(data, "__array_interface__") or type(data).__module__ == "numpy":
        import numpy as np  # deferred: only a caller holding numpy data gets here (numpy is imported already)

        arr = np.ascontiguousarray(data)
        digest.update(f"array:{arr.dtype.str}:{arr.shape};".encode())
        digest.update(arr.tobytes() if arr.dtype != object else repr(arr.tolist()).encode())
    elif isinstance(data, Mapping):
        digest.update(b"map:%d;" % len(data))
        for key in sorted(data, key=str):
            _feed(digest, str(key))
            _feed(digest, data[key])
    elif isinstance(data, (list, tuple)):
        digest.update(b"seq:%d;" % len(data))
        for item in data:
            _feed(digest, item)
    elif hasattr(data, "__len__") and hasattr(data, "__getitem__"):   # a map-style dataset
        digest.update(b"dataset:%d;" % len(data))
        for i in range(len(data)):
            _feed(digest, data[i])
    else:
        raise TypeError(f"eval_fingerprint: cannot hash a {type(data).__name__}: pass the validation examples "
                        f"(arrays, tensors, lists), a map-style dataset, or their ids; not a loader or generator")
