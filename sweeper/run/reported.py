"""What a script reports without the run API: JSON lines on stdout and metrics files, as final metrics and curves.

    got = read_reported(log_text, ["stdout", "out/metrics.json"], prefix=None, base=run_out_dir)
    got.final      # {"val_loss": 0.41, "val_acc": 0.88}: the LAST value of each key, over every source in order
    got.steps      # [{"step": 100, "train_loss": 0.9}, ...]: the stdout lines (and JSONL/CSV rows) that have a step
    got.sources    # {"val_loss": "out/metrics.csv, column val_loss, row 7 (step 199): the last of 4 values"}

Sources, read in this order (a later value of a key wins):
  stdout           every line of the run's output that is one JSON object, e.g. `{"val_loss": 0.41}`; with a prefix
                   (task.metrics_prefix, e.g. `METRICS `) only the lines that start with it, the prefix removed
  PATH.json        one JSON object (nested objects are flattened with dots: {"val": {"loss": 1}} -> val.loss)
  PATH.jsonl       one JSON object per line
  PATH.csv         a header and rows; each row is an object of its columns (numbers parsed)
A relative PATH is relative to `base` (the run's out/ folder). A missing file is skipped (named in `notes`).
With no file named, every .json/.jsonl/.csv file under the out/ folder (subfolders too: Lightning's CSVLogger
writes out/lightning_logs/version_0/metrics.csv) is read, the least recently written first: when several carry a
key, the file written last wins, and any file wins over stdout. An empty CSV cell is no value (Lightning leaves
the cells of metrics not logged at a row empty): a key's final is its last non-empty cell.
`sources` names, per final key, where its value was read: file (relative to the run dir), column and row, or the
stdout line, and how many values of that key came before it. Torch-free, stdlib only.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
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


@dataclass
class Reported:
    final: dict = field(default_factory=dict)      # key -> its last value
    steps: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)   # key -> where its final value was read


def json_objects(text: str, prefix: str | None = None, numbered: bool = False) -> list:
    """The JSON objects of a text, one per line (with a prefix: only the lines that start with it); numbered:
    (line number from 1, the line, object) each."""
    found = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
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
            found.append((number, raw.strip(), flatten(obj)) if numbered else flatten(obj))
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


def _where(path: Path, base: Path) -> str:
    """A metrics file as the report names it: relative to the run dir (base is its out/ folder)."""
    try:
        return str(path.relative_to(base.parent))
    except ValueError:
        return str(path)


def _origins(path: Path, base: Path, objects: list[dict]) -> list[str]:
    """Where each object of a metrics file is, `{}` for the key: `out/m.csv, column {}, row 3`."""
    name = _where(path, base)
    if path.suffix == ".csv":
        return [f"{name}, column {{}}, row {i} after the header" for i in range(1, len(objects) + 1)]
    if path.suffix == ".jsonl":
        return [f"{name}, line {i}, key {{}}" for i in range(1, len(objects) + 1)]
    return [f"{name}, key {{}}"] * len(objects)


def read_reported(log_text: str, sources: list[str], prefix: str | None, base: Path,
                  out_dir: Path | None = None) -> Reported:
    """Final metrics, step records, notes and each final's source (see the module docstring). With no file
    source named, every .json/.jsonl/.csv file the run wrote under out_dir is read too (oldest first)."""
    objects: list[tuple[str, dict]] = []          # (where, with {} for the key; the object)
    notes: list[str] = []
    paths = []
    for source in sources:
        if source == STDOUT:
            objects += [(f"stdout line {n} of the run's output `{_clip(line)}`, key {{}}", obj)
                        for n, line, obj in json_objects(log_text, prefix, numbered=True)]
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
            found = file_objects(path)
        except (ValueError, OSError) as e:
            notes.append(str(e))
            continue
        objects += list(zip(_origins(path, base, found), found))
    got = Reported(notes=notes)
    counts: dict[str, int] = {}
    for where, obj in objects:
        for key, value in obj.items():
            if key == "step":
                continue
            got.final[key] = value
            counts[key] = counts.get(key, 0) + 1
            step = obj.get("step")
            got.sources[key] = where.replace("{}", key) + (f" (step {step})" if is_step(step) else "")
        if is_step(obj.get("step")) and len(obj) > 1:
            got.steps.append(obj)
    for key, n in counts.items():
        got.sources[key] += ": the only value" if n == 1 else f": the last of {n} values"
    return got


def _clip(line: str, limit: int = 80) -> str:
    return line if len(line) <= limit else line[:limit - 3] + "..."


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
