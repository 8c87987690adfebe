"""What a script reports without the run API: JSON lines on stdout and metrics files, as final metrics and curves.

    final, steps, notes = read_reported(log_text, ["stdout", "out/metrics.json"], prefix=None, base=run_out_dir)
    final          # {"val_loss": 0.41, "val_acc": 0.88}: the LAST value of each key, over every source in order
    steps          # [{"step": 100, "train_loss": 0.9}, ...]: the stdout lines (and JSONL/CSV rows) that have a step

Sources, read in this order (a later value of a key wins):
  stdout           every line of the run's output that is one JSON object, e.g. `{"val_loss": 0.41}`; with a prefix
                   (task.metrics_prefix, e.g. `METRICS `) only the lines that start with it, the prefix removed
  PATH.json        one JSON object (nested objects are flattened with dots: {"val": {"loss": 1}} -> val.loss)
  PATH.jsonl       one JSON object per line
  PATH.csv         a header and rows; each row is an object of its columns (numbers parsed)
A relative PATH is relative to `base` (the run's out/ folder). A missing file is skipped (named in `notes`).

Memory: files are read as streams (a CSV row, a JSONL line at a time) and folded into the final values as they
come, so a 100 MB predictions.csv costs a row, not the file. With no file named (the run's out/ folder is
looked through), a file over BIG_FILE bytes is read only when it can hold the decision metric (`metric`) and
stdout did not already carry it: a CSV whose header names it; a .json over MAX_JSON bytes (it must be parsed
whole) is never read. What was skipped is said in `notes`. Torch-free, stdlib only.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

STDOUT = "stdout"
FILE_KINDS = (".json", ".jsonl", ".csv")
BIG_FILE = 2 ** 20           # an out/ file larger than this is read only when it can hold a missing metric
MAX_JSON = 64 * 2 ** 20      # a .json file is parsed whole: larger ones are not metrics files


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


def json_objects(text, prefix: str | None = None) -> list[dict]:
    """The JSON objects of a text (or an iterable of lines), one per line (with a prefix: only the lines that
    start with it)."""
    return list(iter_json_objects(text.splitlines() if isinstance(text, str) else text, prefix))


def iter_json_objects(lines, prefix: str | None = None):
    for line in lines:
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
            yield flatten(obj)


def _number(text: str):
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def csv_rows(text) -> list[dict]:
    return list(iter_csv_rows(io.StringIO(text) if isinstance(text, str) else text))


def iter_csv_rows(lines):
    for row in csv.DictReader(lines):
        yield {k.strip(): _number(v.strip()) for k, v in row.items() if k is not None and v is not None and v != ""}


def csv_header(path: Path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return [k.strip() for k in next(csv.reader(f), [])]


def file_objects(path: Path):
    """The objects of one metrics file (by its suffix), one at a time; ValueError names what is wrong with it."""
    if path.suffix == ".json":
        if path.stat().st_size > MAX_JSON:
            raise ValueError(f"{path}: {path.stat().st_size} bytes, too large for a metrics .json (read whole)")
        try:
            obj = json.loads(path.read_text(errors="replace"))
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: expected one JSON object, found {type(obj).__name__}")
        yield flatten(obj)
        return
    if path.suffix not in (".jsonl", ".csv"):
        raise ValueError(f"{path}: metrics files are {', '.join(FILE_KINDS)}")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        yield from iter_json_objects(f) if path.suffix == ".jsonl" else iter_csv_rows(f)


def _can_hold(path: Path, metric: str | None) -> bool:
    """Whether a large out/ file can hold `metric`: a CSV whose header names it, a JSONL file (its lines may)."""
    if metric is None or path.suffix == ".json":
        return path.suffix != ".json" or path.stat().st_size <= MAX_JSON
    return path.suffix == ".jsonl" or metric in csv_header(path)


def is_step(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_reported(log_text: str, sources: list[str], prefix: str | None, base: Path,
                  out_dir: Path | None = None, metric: str | None = None) -> tuple[dict, list[dict], list[str]]:
    """(final metrics, step records, notes) from the sources (see the module docstring). With no file source
    named, the .json/.jsonl/.csv files the run wrote in out_dir are read too (oldest first; large ones only
    when they can hold `metric`, the decision metric, and stdout did not carry it)."""
    final: dict = {}
    steps: list[dict] = []
    notes: list[str] = []

    def fold(objects) -> None:
        for obj in objects:
            final.update({k: v for k, v in obj.items() if k != "step"})
            if is_step(obj.get("step")) and len(obj) > 1:
                steps.append(obj)

    paths = []
    for source in sources:
        if source == STDOUT:
            fold(iter_json_objects(log_text.splitlines(), prefix))
        else:
            paths.append(Path(source) if Path(source).is_absolute() else base / source)
    looked = out_dir is not None and not paths and out_dir.is_dir()
    if looked:
        paths = sorted((p for p in out_dir.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix in FILE_KINDS),
                       key=lambda p: (p.stat().st_mtime_ns, str(p)))
    for path in paths:
        if not path.is_file():
            notes.append(f"metrics file {path} was not written")
            continue
        try:
            if looked and path.stat().st_size > BIG_FILE and (metric in final or not _can_hold(path, metric)):
                why = f"{metric} came on stdout" if metric in final else f"it cannot hold {metric or 'a metric'}"
                notes.append(f"{path.name} in out/ not read for metrics ({path.stat().st_size} bytes; {why}); "
                             f"task.metrics names the files to read")
                continue
            fold(file_objects(path))
        except (ValueError, OSError) as e:
            notes.append(str(e))
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
