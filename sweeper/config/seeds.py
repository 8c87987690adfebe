"""Parse the `seeds=` value of a sweep.

    parse_seeds("0-3") -> [0, 1, 2, 3];  parse_seeds([0, 2, 5]) -> [0, 2, 5];  parse_seeds(7) -> [7]
    is_adaptive("adaptive") -> True     # seeds=adaptive: seeds 0, 1, ... added per look (sweeper.adaptive.driver)
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

from sweeper.errors import UsageError

ACCEPTED = ("accepted forms: seeds=0-3 (inclusive range), seeds=[0,2,5] (list), seeds=7 (one seed), "
            "seeds=adaptive (sweeper.adaptive.*: seeds added only where the decision is open); seeds are integers "
            "from 0 to 2**63-1")
MAX_SEED = 2 ** 63 - 1     # a signed 64-bit integer: what torch and numpy seed with, and seed_<k> stays a short name
ADAPTIVE = "adaptive"


def is_adaptive(value: Any) -> bool:
    """seeds=adaptive: the sweep adds seeds per look (sweeper.adaptive.driver) instead of a fixed list."""
    return isinstance(value, str) and value.strip() == ADAPTIVE
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_seeds(value: Any) -> list[int]:
    if isinstance(value, bool):
        raise UsageError(f"seeds={value!r} is not a seed; {ACCEPTED}")
    if isinstance(value, int):
        return [_one(value, value)]
    if isinstance(value, str):
        text = value.strip()
        if text == ADAPTIVE:
            raise UsageError("seeds=adaptive is not a seed list: it is read by the adaptive driver "
                             "(python -m sweeper ... seeds=adaptive), not here")
        if any(len(d) > 19 for d in re.findall(r"\d+", text)):      # int() of 5,000 digits is an error itself
            raise UsageError(f"seeds={_cut(text)}: above the largest seed {MAX_SEED}; {ACCEPTED}")
        if re.fullmatch(r"\d+", text):
            return [_one(int(text), text)]
        m = _RANGE.match(text)
        if not m:
            raise UsageError(f"seeds={value!r} is not a seed range; {ACCEPTED}")
        lo, hi = int(m.group(1)), int(m.group(2))
        if hi > MAX_SEED:
            raise UsageError(f"seeds={value!r}: {hi} is above the largest seed {MAX_SEED}; {ACCEPTED}")
        if lo > hi:
            raise UsageError(f"seeds={value!r}: the range is empty (start > end); {ACCEPTED}")
        return list(range(lo, hi + 1))
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        items = list(value)
        if not items:
            raise UsageError(f"seeds=[] is empty; {ACCEPTED}")
        seeds = [_one(v, value) for v in items]
        dupes = sorted(s for s, n in Counter(seeds).items() if n > 1)
        if dupes:
            raise UsageError(f"seeds={_show(value)} repeats {', '.join(map(str, dupes))}; each seed once. {ACCEPTED}")
        return seeds
    raise UsageError(f"seeds={value!r} is not a seed; {ACCEPTED}")


def format_seeds(seeds: list[int]) -> str:
    """The shortest form parse_seeds accepts back."""
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return str(seeds[0]) if len(seeds) == 1 else "[" + ",".join(map(str, seeds)) + "]"


def _one(v: Any, whole: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_SEED:
        raise UsageError(f"seeds={_show(whole)}: {v!r} is not a seed; {ACCEPTED}")
    return v


def _cut(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"


def _show(value: Any) -> str:
    try:
        return "[" + ",".join(str(v) for v in value) + "]"
    except TypeError:
        return repr(value)


def count_seeds(value) -> int:
    """How many seeds `seeds=value` names, without expanding a range (seeds=0-10**12 is counted, not built)."""
    m = _RANGE.match(value) if isinstance(value, str) and len(value) < 60 else None
    if m and int(m.group(1)) <= int(m.group(2)) <= MAX_SEED:
        return int(m.group(2)) - int(m.group(1)) + 1
    return len(parse_seeds(value))
