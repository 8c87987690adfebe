"""What a script reports without the run API: JSON lines on stdout and metrics files, as final metrics and curves.

    got = read_reported(log_text, ["stdout", "out/metrics.json"], prefix=None, base=run_out_dir, metric="val_loss")
    got.final      # {"val_loss": 0.41, "val_acc": 0.88}: the LAST value of each key, over every source in order
    got.steps      # [{"step": 100, "train_loss": 0.9}, ...]: the stdout lines (and JSONL/CSV rows) that have a step
    got.sources    # {"val_loss": "out/metrics.csv, column val_loss, row 7 (step 199): the last of 4 values"}
    got.notes      # what could not be read, or was not read and why

Sources, read in this order (a later value of a key wins):
  stdout           every line of the run's output that is one JSON object, e.g. `{"val_loss": 0.41}`; with a prefix
                   (task.metrics_prefix, e.g. `METRICS `) only the lines that start with it, the prefix removed
  PATH.json        one JSON object (nested objects are flattened with dots: {"val": {"loss": 1}} -> val.loss)
  PATH.jsonl       one JSON object per line
  PATH.csv         a header and rows; each row is an object of its columns (numbers parsed)
  trainer_state.json  a Hugging Face Trainer's state: each entry of its `log_history` (a point of the curves)
A relative PATH is relative to `base` (the run's out/ folder). A missing file is skipped (named in `notes`).
With no file named, the documented metrics files under the out/ folder are read (subfolders too; links are not
followed), the least recently written first: `metrics` .json/.jsonl/.csv (Lightning's
CSVLogger writes out/lightning_logs/version_0/metrics.csv), `*results.json` (a Trainer's all_results.json,
eval_results.json, ...) and the newest `trainer_state.json` (a Trainer's checkpoint-N/ folders hold older
copies). Any other file (a model's config.json, a tokenizer.json, predictions.csv) is read only when task.metrics
names it; `notes` says which were left. When several files carry a key, the file written last wins, and any
file wins over stdout. An empty CSV cell is no value
(Lightning leaves the cells of metrics not logged at a row empty): a key's final is its last non-empty cell.
`sources` names, per final key, where its value was read: file (relative to the run dir), column and row, or the
stdout line, and how many values of that key came before it.

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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.run.observed.stdout_metrics import StdoutMetrics, flatten, is_step, iter_json_objects

STDOUT = "stdout"
FILE_KINDS = (".json", ".jsonl", ".csv")
TRAINER_STATE = "trainer_state.json"
METRICS_STEM = "metrics"       # metrics.json, .jsonl, .csv (Lightning's CSVLogger): read by name, as *results.json
BIG_FILE = 2 ** 20           # an out/ file larger than this is read only when it can hold a missing metric
MAX_JSON = 64 * 2 ** 20      # a .json file is parsed whole: larger ones are not metrics files


@dataclass
class Reported:
    final: dict = field(default_factory=dict)      # key -> its last value
    steps: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)   # key -> where its final value was read
    stdout: StdoutMetrics | None = None            # the stdout source as parsed (its lines kept for the run's metrics)

    def metrics_lines(self, drop=()) -> bytes:
        """The step records as the run's metrics lines, in order (the stdout lines as they came when unchanged;
        `drop`: keys left out, a record left with its step alone is no line); see StdoutMetrics.metrics_lines."""
        head = self.stdout.metrics_lines(drop) if self.stdout is not None else b""
        rest = self.steps[len(self.stdout.steps):] if self.stdout is not None else self.steps
        records = [r for r in ({k: v for k, v in o.items() if k not in drop} for o in rest) if len(r) > 1]
        return head + b"".join(json.dumps(r, sort_keys=True, default=str).encode() + b"\n" for r in records)


def json_objects(text, prefix: str | None = None) -> list[dict]:
    """The JSON objects of a text (or an iterable of lines), one per line (with a prefix: only the lines that
    start with it)."""
    return [obj for _, _, obj in iter_json_objects(text.splitlines() if isinstance(text, str) else text, prefix)]


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


def documented(path: Path) -> bool:
    """Whether a file in out/ is read for metrics without task.metrics naming it (see the module docstring)."""
    return (path.stem == METRICS_STEM and path.suffix in FILE_KINDS) or path.name == TRAINER_STATE \
        or (path.suffix == ".json" and path.stem.endswith("results"))


def file_objects(path: Path, name: str | None = None):
    """(where, object) for each object of one metrics file (by its suffix), one at a time; `where` holds `{}` for
    the key (`out/m.csv, column {}, row 3 after the header`). ValueError names what is wrong with the file."""
    name = name or str(path)
    if path.suffix == ".json":
        if path.stat().st_size > MAX_JSON:
            raise ValueError(f"{path}: {path.stat().st_size} bytes, too large for a metrics .json (read whole)")
        try:
            obj = json.loads(path.read_text(errors="replace"))
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: expected one JSON object, found {type(obj).__name__}")
        if path.name == TRAINER_STATE and isinstance(obj.get("log_history"), list):
            for i, entry in enumerate(obj["log_history"]):
                if isinstance(entry, dict):
                    yield f"{name}, log_history[{i}], key {{}}", flatten(entry)
            return
        yield f"{name}, key {{}}", flatten(obj)
        return
    if path.suffix not in (".jsonl", ".csv"):
        raise ValueError(f"{path}: metrics files are {', '.join(FILE_KINDS)}")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        if path.suffix == ".jsonl":
            for number, _, obj in iter_json_objects(f):
                yield f"{name}, line {number}, key {{}}", obj
        else:
            for row, obj in enumerate(iter_csv_rows(f), 1):
                yield f"{name}, column {{}}, row {row} after the header", obj


def _can_hold(path: Path, metric: str | None) -> bool:
    """Whether a large out/ file can hold `metric`: a CSV whose header names it, a JSONL file (its lines may)."""
    if metric is None or path.suffix == ".json":
        return path.suffix != ".json" or path.stat().st_size <= MAX_JSON
    return path.suffix == ".jsonl" or metric in csv_header(path)


def _where(path: Path, base: Path) -> str:
    """A metrics file as the report names it: relative to the run dir (base is its out/ folder)."""
    try:
        return str(path.relative_to(base.parent))
    except ValueError:
        return str(path)


def read_reported(log_text: str | bytes | StdoutMetrics, sources: list[str], prefix: str | None, base: Path,
                  out_dir: Path | None = None, metric: str | None = None) -> Reported:
    """Final metrics, step records, notes and each final's source (see the module docstring). With no file
    source named, the .json/.jsonl/.csv files the run wrote in out_dir are read too (oldest first; large ones only
    when they can hold `metric`, the decision metric, and stdout did not carry it). log_text: the run's output,
    or its stdout lines already parsed (sweeper.run.observed.stdout_metrics, fed as the output came)."""
    got = Reported()
    counts: Counter = Counter()
    last: dict = {}                # key -> (where, step) of its last value: worded once, at the end

    def fold(objects) -> None:     # per object, C-level dict operations only: a million lines in about a second
        final, steps = got.final, got.steps
        for where, obj in objects:
            final.update(obj)
            counts.update(obj.keys())
            step = obj.get("step")
            last.update(dict.fromkeys(obj, (where, step)))
            if len(obj) > 1 and is_step(step):
                steps.append(obj)
        final.pop("step", None)

    paths = []
    for source in sources:
        if source == STDOUT and got.stdout is None:
            got.stdout = parsed = _parsed(log_text, prefix)
            got.final.update(parsed.final)
            got.final.pop("step", None)
            counts.update(parsed.counts)
            for key in parsed.counts:                   # in the order the keys first came, as files' keys are
                number, line, step = parsed.last[key]
                last[key] = ((number, line), step)
            got.steps += parsed.steps
        elif source != STDOUT:
            paths.append(Path(source) if Path(source).is_absolute() else base / source)
    looked = out_dir is not None and not paths and out_dir.is_dir()
    if looked:
        found = sorted((p for p in out_dir.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix in FILE_KINDS),
                       key=lambda p: (p.stat().st_mtime_ns, str(p)))
        paths = [p for p in found if documented(p)]
        states = [p for p in paths if p.name == TRAINER_STATE]
        paths = [p for p in paths if p.name != TRAINER_STATE or p == states[-1]]     # the newest holds them all
        left = [str(p.relative_to(out_dir)) for p in found if not documented(p)]
        if left:
            got.notes.append(f"not read for metrics (not a metrics file by name): {', '.join(left[:5])}"
                             f"{f' and {len(left) - 5} more' if len(left) > 5 else ''}; task.metrics: [FILE] reads one")
    for path in paths:
        if not path.is_file():
            got.notes.append(f"metrics file {path} was not written")
            continue
        try:
            if looked and path.stat().st_size > BIG_FILE and (metric in got.final or not _can_hold(path, metric)):
                why = f"{metric} came on stdout" if metric in got.final else f"it cannot hold {metric or 'a metric'}"
                got.notes.append(f"{path.name} in out/ not read for metrics ({path.stat().st_size} bytes; {why}); "
                                 f"task.metrics names the files to read")
                continue
            fold(file_objects(path, _where(path, base)))
        except (ValueError, OSError) as e:
            got.notes.append(str(e))
    for key, (where, step) in last.items():
        if key == "step":
            continue
        if isinstance(where, tuple):                  # a stdout line: (its position, its text)
            where = f"stdout line {where[0]} of the run's output `{_clip(where[1])}`, key {{}}"
        n = counts[key]
        got.sources[key] = (where.replace("{}", key) + (f" (step {step})" if is_step(step) else "")
                            + (": the only value" if n == 1 else f": the last of {n} values"))
    return got


def _parsed(log_text: str | bytes | StdoutMetrics, prefix: str | None) -> StdoutMetrics:
    if isinstance(log_text, StdoutMetrics):
        return log_text
    parsed = StdoutMetrics(prefix)
    parsed.feed(log_text.encode("utf-8", "surrogatepass") if isinstance(log_text, str) else log_text)
    return parsed


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
