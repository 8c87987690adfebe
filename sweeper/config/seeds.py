"""The `seeds=` value of a sweep, parsed once (sweeper.config.sweep.compose_sweep) into a typed Seeds.

    Seeds.parse("0-3").to_list() -> [0, 1, 2, 3];  Seeds.parse([0, 2, 5]).first -> 0;  str(Seeds.parse(7)) -> "7"
    Seeds.parse("0-1000000000000").count -> 1000000000001   # counted, never built (sweeper.max_runs refuses it)
    Seeds.parse("adaptive").adaptive -> True     # seeds 0, 1, ... added per look (sweeper.adaptive.driver)
    Seeds.of([0, 1, 5])                          # seeds already checked: a recorded plan, an adaptive look
    parse_seeds("0-3") -> [0, 1, 2, 3]           # the list at once (Seeds.parse(value).to_list())

Every bad value is a one-line UsageError naming it and the accepted forms.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sweeper.errors import UsageError

ACCEPTED = ("accepted forms: seeds=0-3 (inclusive range), seeds=[0,2,5] (list), seeds=7 (one seed), "
            "seeds=adaptive (sweeper.adaptive.*: seeds added only where the decision is open); seeds are integers "
            "from 0 to 2**63-1")
MAX_SEED = 2 ** 63 - 1     # a signed 64-bit integer: what torch and numpy seed with, and seed_<k> stays a short name
ADAPTIVE = "adaptive"
NOT_A_LIST = ("seeds=adaptive is not a seed list: it is read by the adaptive driver "
              "(python -m sweeper ... seeds=adaptive), not here")
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


@dataclass(frozen=True)
class Seeds:
    """Fixed seeds in the order given (a run of consecutive seeds is kept as a range: counted, not built, until
    to_list()), or adaptive (no fixed list: the adaptive driver adds seeds look by look). Equal values are equal:
    Seeds.parse("5-7") == Seeds.parse([5, 6, 7])."""
    fixed: range | tuple[int, ...] = ()
    adaptive: bool = False

    @classmethod
    def parse(cls, value: Any, adaptive: bool = True) -> Seeds:
        """The `seeds=` value as Hydra composed it (str, int or list); adaptive=False: seeds=adaptive is refused."""
        if isinstance(value, str) and value.strip() == ADAPTIVE:
            if not adaptive:
                raise UsageError(NOT_A_LIST)
            return cls(adaptive=True)
        return cls.of(_parse(value))

    @classmethod
    def of(cls, seeds: Iterable[int]) -> Seeds:
        """Seeds already checked (a recorded plan, an adaptive look); consecutive ascending seeds become a range."""
        seeds = seeds if isinstance(seeds, range) else tuple(seeds)
        if isinstance(seeds, tuple) and seeds and seeds == tuple(range(seeds[0], seeds[0] + len(seeds))):
            seeds = range(seeds[0], seeds[0] + len(seeds))
        return cls(fixed=seeds)

    @property
    def count(self) -> int:
        """How many seeds, without building them (len() of a range above 2**63 would overflow)."""
        fixed = self._fixed()
        return fixed.stop - fixed.start if isinstance(fixed, range) else len(fixed)

    @property
    def first(self) -> int:
        return self._fixed()[0]

    def to_list(self) -> list[int]:
        """Every seed, built (check the count against sweeper.max_runs first: sweeper.plan.size)."""
        return list(self._fixed())

    def _fixed(self) -> range | tuple[int, ...]:
        if self.adaptive:
            raise UsageError(NOT_A_LIST)
        return self.fixed

    def __str__(self) -> str:
        """The shortest form Seeds.parse accepts back (seeds=0-3, seeds=[0,2,5], seeds=7, seeds=adaptive)."""
        if self.adaptive:
            return ADAPTIVE
        if isinstance(self.fixed, range):
            return str(self.fixed.start) if self.count == 1 else f"{self.fixed.start}-{self.fixed.stop - 1}"
        return "[" + ",".join(map(str, self.fixed)) + "]"


def parse_seeds(value: Any) -> list[int]:
    """The seeds `seeds=value` names, as a list (seeds=adaptive refused: it is no list)."""
    return Seeds.parse(value, adaptive=False).to_list()


def format_seeds(seeds: list[int]) -> str:
    """The shortest form parse_seeds accepts back."""
    return str(Seeds.of(seeds))


def _parse(value: Any) -> range | tuple[int, ...]:
    """A checked range (never built) or tuple of seeds; UsageError naming the value and the accepted forms."""
    if isinstance(value, bool):
        raise UsageError(f"seeds={value!r} is not a seed; {ACCEPTED}")
    if isinstance(value, int):
        return (_one(value, value),)
    if isinstance(value, str):
        text = value.strip()
        if text == ADAPTIVE:
            raise UsageError(NOT_A_LIST)
        if any(len(d) > 19 for d in re.findall(r"\d+", text)):      # int() of 5,000 digits is an error itself
            raise UsageError(f"seeds={_cut(text)}: above the largest seed {MAX_SEED}; {ACCEPTED}")
        if re.fullmatch(r"\d+", text):
            return (_one(int(text), text),)
        m = _RANGE.match(text)
        if not m:
            raise UsageError(f"seeds={value!r} is not a seed range; {ACCEPTED}")
        lo, hi = int(m.group(1)), int(m.group(2))
        if hi > MAX_SEED:
            raise UsageError(f"seeds={value!r}: {hi} is above the largest seed {MAX_SEED}; {ACCEPTED}")
        if lo > hi:
            raise UsageError(f"seeds={value!r}: the range is empty (start > end); {ACCEPTED}")
        return range(lo, hi + 1)
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        items = list(value)
        if not items:
            raise UsageError(f"seeds=[] is empty; {ACCEPTED}")
        seeds = tuple(_one(v, value) for v in items)
        dupes = sorted(s for s, n in Counter(seeds).items() if n > 1)
        if dupes:
            raise UsageError(f"seeds={_show(value)} repeats {', '.join(map(str, dupes))}; each seed once. {ACCEPTED}")
        return seeds
    raise UsageError(f"seeds={value!r} is not a seed; {ACCEPTED}")


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
