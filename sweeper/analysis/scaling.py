"""Metric values so large that their sums, squares or differences overflow (1e308 is finite): the statistics run
on the values divided by a power of two, exactly, and every figure in metric units is multiplied back.

    k = scaling.exponent(values)              # 0 when max |value| <= 2^SAFE_EXPONENT: nothing changes
    small = scaling.down(values, k)           # values / 2^k, exact (a power of two only moves the exponent)
    scaling.up(2.5, k)                        # 2.5 * 2^k; inf where the figure itself passes the largest float

Why a power of two: dividing by 2^k changes no digit of any value, so every test's p-value, every ranking and
every unit-free figure (t, Hedges' g, P(better)) is the same as with the values themselves, and the figures in
metric units are exact multiples. A figure that really is beyond the largest float (the difference of 1.7e308
and -1.7e308) comes back as inf, with the verdict decided on the scaled values. Pure numpy, no I/O.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

SAFE_EXPONENT = 240    # 2^240 ~ 1.8e72: fourth powers (Welch df: variance squared, 1e289) summed stay finite


def exponent(values) -> int:
    """The power of two to divide `values` by so the largest finite |value| is at most 2^SAFE_EXPONENT; 0 if it is."""
    x = np.asarray(values, dtype=float)
    finite = np.abs(x[np.isfinite(x)])
    if not finite.size:
        return 0
    top = math.frexp(float(finite.max()))[1]          # max |value| < 2^top
    return max(0, top - SAFE_EXPONENT)


def down(values, k: int) -> np.ndarray:
    return np.ldexp(np.asarray(values, dtype=float), -k) if k else np.asarray(values, dtype=float)


def up(value: float, k: int) -> float:
    """value * 2^k as a float: +-inf where the product passes the largest float, NaN stays NaN."""
    if not k or not math.isfinite(value):
        return value
    with np.errstate(over="ignore"):
        return float(np.ldexp(value, k))


def up_interval(interval, k: int):
    """An Interval (estimate, low, high in metric units) multiplied back; None stays None."""
    if interval is None or not k:
        return interval
    return dataclasses.replace(interval, estimate=up(interval.estimate, k), low=up(interval.low, k),
                               high=up(interval.high, k))


UNIT_FREE = ("t-test", "Welch's t", "worst-rank")   # tests whose statistic has no units (t, P(better))


def up_test(test, k: int):
    """A TestResult multiplied back: its CI always, its statistic when it is a difference in metric units."""
    if test is None or not k:
        return test
    statistic = test.statistic if any(s in test.name for s in UNIT_FREE) else up(test.statistic, k)
    return dataclasses.replace(test, statistic=statistic, ci=(up(test.ci[0], k), up(test.ci[1], k)))
