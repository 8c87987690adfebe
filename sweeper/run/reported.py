"""What a script reports without the run API: JSON lines on stdout and metrics files, as final metrics and curves.

    final, steps = read_reported(log_text, ["stdout", "out/metrics.json"], prefix=None, base=run_out_dir)
    final          # {"val_loss": 0.41, "val_acc": 0.88}: the LAST value of each key, over every source in order
    steps          # [{"step": 100, "train_loss": 0.9}, ...]: the stdout lines (and JSONL/CSV rows) that have a step

Sources, read in this order (a later value of a key wins):
  stdout           every line of the run's output that is one JSON object, e.g. `{"val_loss": 0.41}`; with a prefix
                   (task.metrics_prefix, e.g. `METRICS `) only the lines that start with it, the prefix removed
  PATH.json        one JSON object (nested objects are flattened with dots: {"val": {"loss": 1}} -> val.loss)
  PATH.jsonl       one JSON object per line
  PATH.csv         a header and rows; each row is an object of its columns (numbers parsed)
A relative PATH is relative to `base` (the run's out/ folder). A missing file is skipped (named in `missing`).
Torch-free, stdlib only.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

STDOUT = "stdout"
FILE_KINDS = (".json", ".jsonl", ".csv")


def flatten(obj: dict, prefix: str = "") -> dict:
    """{"val": {"loss": 1}} -> {"val.loss": 1}; lists and scalars stay values."""
    out = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def json_objects(text: str, prefix: str | None = None) -> list[dict]:
    """The JSON objects of a text, one per line (with a prefix: only the lines that start with it)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if prefix:
            at = line.find(prefix.strip())
            if at < 0:
                continue
            line = line[at + len(prefix.strip()):].strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(flatten(obj))
    return found


def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def csv_rows(text: str) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text))
    return [{k.strip(): _number(v.strip()) for k, v in row.items() if k is not None and v is not None and v != ""}
            for row in reader]


def file_objects(path: Path) -> list[dict]:
    """The objects of one metrics file (by its suffix); ValueError names what is wrong with it."""
    text = path.read_text(errors="replace")
    if path.suffix == ".json":
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: expected one JSON object, found {type(obj).__name__}")
        return [flatten(obj)]
    if path.suffix == ".jsonl":
        return json_objects(text)
    if path.suffix == ".csv":
        return csv_rows(text)
    raise ValueError(f"{path}: metrics files are {', '.join(FILE_KINDS)}")


def is_step(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_reported(log_text: str, sources: list[str], prefix: str | None, base: Path,
                  out_dir: Path | None = None) -> tuple[dict, list[dict], list[str]]:
    """(final metrics, step records, notes) from the sources (see the module docstring). With no file source
    named, every .json/.jsonl/.csv file the run wrote in out_dir is read too (oldest first)."""
    objects: list[dict] = []
    notes: list[str] = []
    paths = []
    for source in sources:
        if source == STDOUT:
            objects += json_objects(log_text, prefix)
        else:
            paths.append(Path(source) if Path(source).is_absolute() else base / source)
    if out_dir is not None and not paths and out_dir.is_dir():
        paths = sorted((p for p in out_dir.rglob("*") if p.is_file() and p.suffix in FILE_KINDS),
                       key=lambda p: (p.stat().st_mtime_ns, str(p)))
    for path in paths:
        if not path.is_file():
            notes.append(f"metrics file {path} was not written")
            continue
        try:
            objects += file_objects(path)
        except (ValueError, OSError) as e:
            notes.append(str(e))
    final: dict = {}
    steps: list[dict] = []
    for obj in objects:
        final.update({k: v for k, v in obj.items() if k != "step"})
        if is_step(obj.get("step")) and len(obj) > 1:
            steps.append(obj)
    return final, steps, notes


def describe(final: dict, limit: int = 8) -> str:
    """`val_loss=0.41, val_acc='high'` for messages (nothing: 'nothing')."""
    if not final:
        return "nothing"
    shown = [f"{k}={_short(v)}" for k, v in list(final.items())[:limit]]
    return ", ".join(shown) + (f", ... ({len(final)} keys)" if len(final) > limit else "")


def _short(value) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.4g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
