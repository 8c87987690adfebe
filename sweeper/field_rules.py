"""A dataclass field with its accepted range: the declarations every schema is written with (no dependencies).

    port: int = positive(8080)                        # in a schema dataclass: what is accepted, once
    design: str = one_of("auto", ("auto", "paired"))  # `experiment.design='x': accepted values are auto, paired`

A field made with `rule(...)` carries its accepted range: the same words for a wrong type and an out-of-range
value. sweeper.config.fields builds and checks a schema from them (build, check_fields); they live here, below
every layer, so that a schema the run contract owns (sweeper.run.files.experiment) is declared the same way.
"""
from __future__ import annotations

import math
from dataclasses import MISSING as NO_DEFAULT
from dataclasses import field
from typing import Any, Callable


def rule(default: Any = NO_DEFAULT, *, must: str, ok: Callable[[Any], bool], factory: Any = NO_DEFAULT):
    """A field whose value must pass ok(value) (None passes when the type is Optional); `must` says what is
    accepted and ends every error about the key: `launcher.max_parallel=0: must be a positive integer or null`."""
    return field(default=default, default_factory=factory, metadata={"must": must, "ok": ok})


def finite(value: Any) -> bool:
    """Not inf or nan (an int always is): a config number that means "never" or nothing is refused."""
    return not isinstance(value, float) or math.isfinite(value)


def positive(default: Any, null: bool = False, what: str = "integer"):
    return rule(default, must=f"must be a positive {what}{' or null' if null else ''}",
                ok=lambda v: v > 0 and finite(v))


def at_least_zero(default: Any, null: bool = False, what: str = "an integer >= 0"):
    return rule(default, must=f"must be {what}{' or null' if null else ''}", ok=lambda v: v >= 0 and finite(v))


MAX_RANKS = 64       # ranks per run: one node's processes (a run spans one node)


def ranks_rule(default: Any):
    return rule(default, must=f"must be an integer from 1 to {MAX_RANKS} (processes per run, one GPU each)",
                ok=lambda v: 1 <= v <= MAX_RANKS)


def one_of(default: str, accepted: tuple[str, ...]):
    return rule(default, must=f"accepted values are {', '.join(accepted)}", ok=lambda v: v in accepted)


def seconds(default: float, strict: bool = False):
    """A duration in seconds: finite, > 0 when strict, else >= 0 (inf would mean never)."""
    if strict:
        return rule(default, must="must be a positive number of seconds (not inf)", ok=lambda v: 0 < v and finite(v))
    return rule(default, must="must be a number of seconds >= 0 (not inf)", ok=lambda v: 0 <= v and finite(v))
