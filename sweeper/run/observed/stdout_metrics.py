"""A run's stdout metric lines parsed a chunk of whole lines at a time, as the output comes (issue 48: ingest).

    parsed = StdoutMetrics(prefix=None)
    parsed.feed(b'{"step": 1, "loss": 0.5}\\nepoch 1 done\\n')    # whole lines (the last may lack its newline)
    parsed.final, parsed.counts, parsed.last       # key -> last value / how many values / (line no, line, step)
    parsed.steps                                   # the objects with an integer step (and another key), in order
    parsed.metrics_lines(drop={"eval_fingerprint"})  # those as the run's metrics lines (bytes) (dropped keys removed)

What a line is, is sweeper.run.observed.reported's rule (a line that is one JSON object; with a prefix, the text after
it). The common shape, every line of a chunk one JSON object with nothing else on it, is parsed by ONE
json.loads of the chunk (its newlines turned into commas, inside brackets) and folded into the finals by C-level
calls (no Python code per line); the chunk's own bytes are then its metrics lines, written as they came (no
re-encoding). Any other chunk (a text line, a prefix, a carriage return, an odd line break, bytes that are not
UTF-8) goes line by line through text_objects, exactly as before. Torch-free, stdlib only.
"""
from __future__ import annotations

import json
import re
from collections import Counter, deque
from collections.abc import Iterable
from itertools import chain, compress, repeat
from typing import Callable

# Bytes that make a chunk take the line-by-line path: \r and the line breaks str.splitlines() knows beyond \n
# (\x85, \u2028 and \u2029 in UTF-8), so that line numbers stay those of iter_json_objects. Looked for one by
# one (`in`: memchr speed), not by one regex (a tenth of the speed).
_SLOW = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")

_TWO_ON_A_LINE = re.compile(rb"\}\s*,")
CHUNK = 4 * 2 ** 20            # bytes parsed by one json.loads (a chunk with a text line goes line by line)


class StdoutMetrics:
    """The stdout source of sweeper.run.observed.reported, fed in chunks of whole lines, in order."""

    def __init__(self, prefix: str | None = None):
        self.prefix = prefix
        self.final: dict = {}                  # key -> its last value ("step" included; reported drops it)
        self.counts: Counter = Counter()       # key -> how many lines carried it
        self.last: dict = {}                   # key -> (line number from 1, the line, that line's step)
        self.steps: list[dict] = []            # the objects with an integer step and another key
        self.lines = 0                         # lines fed so far
        self._pieces: list = []                # per chunk: (bytes of its step lines or None, its step objects)

    def feed(self, data: bytes) -> None:
        """Parse whole lines (the last one may lack its newline: the end of the output), CHUNK bytes at a time."""
        start, size = 0, len(data)
        while start < size:
            end = data.rfind(b"\n", start, start + CHUNK) + 1 if start + CHUNK < size else size
            if end <= start:                           # a line longer than a chunk: all of it
                end = data.find(b"\n", start + CHUNK) + 1 or size
            self._feed_chunk(data[start:end])
            start = end

    def _feed_chunk(self, chunk: bytes) -> None:
        if not chunk.endswith(b"\n"):
            chunk += b"\n"
        slow = self.prefix or any(b in chunk for b in _SLOW)
        objs = None if slow else _one_object_per_line(chunk)
        if objs is None:
            self.lines += self._feed_lines(chunk)
        else:
            self._fold_fast(chunk, objs)
            self.lines += len(objs)

    def _fold_fast(self, chunk: bytes, objs: list[dict]) -> None:
        nested = chunk.count(b"{") != len(objs)        # a '{' beyond each line's own: maybe a nested object
        if nested:
            objs = [flatten(o) if dict in set(map(type, o.values())) else o for o in objs]
        keys = self._fold(objs, lambda i: self.lines + i + 1, lambda i: _nth_line(chunk, i, len(objs)))
        steps = list(map(dict.get, objs, repeat("step")))
        if set(map(type, steps)) == {int} and min(steps) >= 0 and min(map(len, objs)) > 1:
            self.steps += objs
            self._pieces.append((None if nested else chunk, objs, keys))
            return
        keep = [type(s) is int and s >= 0 and len(o) > 1 for s, o in zip(steps, objs)]
        kept = list(compress(objs, keep))
        self.steps += kept
        raw = None if nested else b"".join(ln + b"\n" for ln in compress(chunk[:-1].split(b"\n"), keep))
        self._pieces.append((raw, kept, keys))

    def _feed_lines(self, chunk: bytes) -> int:
        text = chunk.decode("utf-8", "replace")
        objects, number = text_objects(text, self.prefix)
        objs = [obj for _, _, obj in objects]
        base = self.lines
        keys = self._fold(objs, lambda i: base + number(objects[i][0]), lambda i: objects[i][1])
        kept = [o for o in objs if len(o) > 1 and is_step(o.get("step"))]
        self.steps += kept
        self._pieces.append((None, kept, keys))
        return len(text.splitlines())

    def _fold(self, objs: list[dict], number, line) -> set:
        """finals, counts and each key's last line, at C speed (the last lines found from the end backwards); the
        keys seen."""
        if not objs:
            return set()
        counts = Counter(chain.from_iterable(objs))
        self.counts.update(counts)
        final = self.final
        deque(map(final.update, objs), maxlen=0)   # a C-level loop: the last value of each key wins
        left = set(counts)
        for i in range(len(objs) - 1, -1, -1):     # usually a line or two: every key is on the last lines
            o = objs[i]
            if not left.isdisjoint(o):
                where = (number(i), line(i), o.get("step"))
                for key in left.intersection(o):
                    self.last[key] = where
                left.difference_update(o)
                if not left:
                    break
        return set(counts)

    def metrics_lines(self, drop: Iterable[str] = ()) -> bytes:
        """The step objects as the run's metrics lines: a chunk's own bytes when none of its lines was changed,
        else each record encoded as sweeper.run.files.atomic.append_jsonl does (without the `drop` keys; a
        record left with its step alone is not a metrics line)."""
        drop = set(drop)
        out = []
        for raw, objs, keys in self._pieces:
            if raw is not None and drop.isdisjoint(keys):
                out.append(raw)
                continue
            records = [r for r in ({k: v for k, v in o.items() if k not in drop} for o in objs) if len(r) > 1]
            out += [json.dumps(r, sort_keys=True, default=str).encode() + b"\n" for r in records]
        return b"".join(out)


def _one_object_per_line(chunk: bytes) -> list[dict] | None:
    """The objects of a chunk whose every line is one JSON object (one json.loads of them all); None else."""
    body = chunk[:-1]
    n = body.count(b"\n") + 1
    if b"}," in body or ((b"} " in body or b"}\t" in body) and _TWO_ON_A_LINE.search(body)):
        return None                                # "{...}, {...}": two objects could pass for two lines
    try:
        objs = json.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:                             # UnicodeDecodeError included
        return None
    if len(objs) != n or set(map(type, objs)) != {dict}:    # "1, 2" or "[1]" or a line that is not an object
        return None
    return objs


def _nth_line(chunk: bytes, i: int, n: int) -> str:
    """Line i (from 0) of a chunk of n lines, as text_objects gives it (stripped)."""
    end = len(chunk) - 1
    for _ in range(n - 1 - i):
        end = chunk.rfind(b"\n", 0, end)
    start = chunk.rfind(b"\n", 0, end) + 1
    return chunk[start:end].strip().decode("utf-8", "replace")


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


def is_step(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def iter_json_objects(lines, prefix: str | None = None):
    """(line number from 1, the line, its object) for each line of `lines` that holds one JSON object."""
    for number, raw in enumerate(lines, 1):
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
            yield number, raw.strip(), flatten(obj)


_LINE_OBJECT = re.compile(r"^[^\S\n]*(\{.*\})[^\S\n]*$", re.M)     # a line that is one {...}, spaces around
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")   # line breaks of splitlines() beyond \r, \n


def text_objects(text: str, prefix: str | None = None) -> tuple[list[tuple[int, str, dict]], Callable[[int], int]]:
    """iter_json_objects over a whole text, at C speed for the common case (no prefix): the candidate lines found
    by one regex and parsed by one json.loads of them all (line by line only when one is not JSON), flattened only
    when nested. ([(position, the line, its object)], position -> the line number iter_json_objects counts): the
    number is worked out only for the few lines a report names."""
    if prefix or _OTHER_BREAKS.search(text):
        return list(iter_json_objects(text.splitlines(), prefix)), int
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")           # the breaks splitlines() counts
    found = list(_LINE_OBJECT.finditer(text))
    lines = [m.group(1) for m in found]
    try:
        objects = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        objects = []
    if len(objects) != len(lines):                 # a line that is not JSON (or holds "}, {"): line by line
        objects = [_loads(line) for line in lines]
    out = [(m.start(), line, flatten(obj) if line.count("{") > 1 else obj)
           for m, line, obj in zip(found, lines, objects) if type(obj) is dict]
    return out, lambda offset: text.count("\n", 0, offset) + 1


def _loads(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None
