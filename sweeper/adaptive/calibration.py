"""The adaptive looks' calibration paths and the deciding test's p-values on them (the levels' raw material).

    python -m sweeper.adaptive.calibration --write        # recompute calibration.npz (16.5 min on 2 idle cores)
    python -m sweeper.adaptive.calibration --check 40     # recompute 40 random stored entries with the real test
    from sweeper.adaptive import calibration
    calibration.pvalues(paired=True, n=10, robust=True)   # (PATHS,) the look test's p-value of every null path

A calibration path is one simulated null sweep under normal noise, fixed by SEED: paired, one standard normal
difference per seed; independent, one standard normal value per seed in each arm. A look at n seeds reads the
first n of each path, so the looks of one path share their seeds as the looks of a real sweep do.

Two tests decide a look (sweeper.adaptive.design.look_stat): the robust permutation test
(sweeper.analysis.robust, with LOOK_RESAMPLES resamples and SEED, exactly as the looks call it) and the t-test
(paired t; Student's t with equal arms). The t-test's p-values are computed here from the paths (cheap, any n).
The robust test's take 2-20 ms per path, too slow to compute for every design at run time, so they are stored
once for n = 2 .. MAX_N in calibration.npz (this module writes and reads it; nothing else does): per design and
n, the integer count of arrangements at least as extreme and the number of arrangements, so a stored p-value
is the test's own float (hits / size). tests/test_adaptive_calibration.py recomputes random entries with the
real test and checks the paths' checksum. Beyond MAX_N no robust p-value is stored: the levels of those looks
are calibrated on the t-test's p-values (sweeper.adaptive.design.look_levels).
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy import special

import sweeper.analysis.robust as robust
from sweeper.docstrings import docstring

PATHS = 20_000          # null sweeps per design (Monte Carlo se of a calibrated family-wise error ~0.0015 at 0.05)
SEED = 15               # fixed: the same design always gets the same levels; also the look test's resampling seed
MAX_N = 16              # the stored robust p-values reach this many seeds per arm (sweeper.adaptive's default max)
LOOK_RESAMPLES = robust.DEFAULT.n_resamples   # the look test's Monte Carlo arrangements beyond exact enumeration
FILE = Path(__file__).with_name("calibration.npz")
_KIND = {"paired": 0, "a": 1, "b": 2}


@functools.lru_cache(maxsize=None)
def column(which: str, j: int) -> np.ndarray:
    """Value j (0-based seed) of every path: which = "paired" (a difference), "a" or "b" (an independent arm)."""
    out = np.random.default_rng([SEED, _KIND[which], j]).standard_normal(PATHS)
    out.setflags(write=False)
    return out


def paths(which: str, n: int) -> np.ndarray:
    """The first n values of every path.   # (PATHS, n)"""
    return np.stack([column(which, j) for j in range(n)], axis=1)


def look_test(a, b, paired: bool, permutation: bool) -> robust.TestResult:
    """The test a look runs: the robust permutation test with the resamples and seed fixed here (not by the
    sweep), or the t-test (paired t; Student's t with equal arms, Welch's with unequal ones). Zero spread gets
    the exact sign-flip / permutation result either way."""
    if permutation:
        test = robust.paired_test if paired else robust.independent_test
        return test(a, b, n_resamples=LOOK_RESAMPLES, seed=SEED)
    return robust.deciding_test(a, b, paired, family_size=1, alpha=0.0)    # no floor reaches alpha 0: the t-test


def _t_pvalues(paired: bool, n: int) -> np.ndarray:
    """Two-sided t-test p-values at n seeds per arm of every path (paired t; Student's t, equal arms)."""
    if paired:
        d = paths("paired", n)
        mean, var = d.mean(1), d.var(1, ddof=1)
        return 2 * special.stdtr(n - 1, -np.abs(mean) / np.sqrt(var / n))
    a, b = paths("a", n), paths("b", n)
    pooled = (a.var(1, ddof=1) + b.var(1, ddof=1)) / 2
    t = (a.mean(1) - b.mean(1)) / np.sqrt(pooled * 2 / n)
    return 2 * special.stdtr(2 * n - 2, -np.abs(t))


@functools.lru_cache(maxsize=None)
def _stored() -> dict[str, np.ndarray]:
    if not FILE.exists():
        raise FileNotFoundError(f"{FILE} is missing: reinstall seed-sweeper, or write it with "
                                f"python -m sweeper.adaptive.calibration --write")
    with np.load(FILE) as z:
        return {k: z[k] for k in z.files}


@functools.lru_cache(maxsize=None)
def pvalues(paired: bool, n: int, robust: bool) -> np.ndarray:
    """The look test's two-sided p-value at n seeds per arm on every path (robust: the stored permutation test;
    needs 2 <= n <= MAX_N).   # (PATHS,)"""
    if n < 2:
        raise ValueError(f"a look needs at least 2 seeds per arm, not {n}")
    if not robust:
        out = _t_pvalues(paired, n)
    elif n > MAX_N:
        raise ValueError(f"robust p-values are stored up to {MAX_N} seeds per arm, not {n}")
    else:
        z = _stored()
        key = "paired" if paired else "independent"
        out = z[f"{key}_hits"][:, n - 2].astype(np.float64) / float(z[f"{key}_size"][n - 2])
    out.setflags(write=False)
    return out


def checksum() -> str:
    """A digest of every stored path's values (the file is only valid for the paths it was computed on)."""
    h = hashlib.sha256()
    for which in ("paired", "a", "b"):
        h.update(paths(which, MAX_N).tobytes())
    return h.hexdigest()[:16]


def _hits(test: robust.TestResult, paired: bool, n: int) -> tuple[int, int]:
    """(hits, size) of a look test's p-value: arrangements at least as extreme, arrangements counted."""
    size = (2**n if paired else math.comb(2 * n, n)) if test.exact else LOOK_RESAMPLES + 1
    hits = int(round(test.pvalue * size))
    if hits / size != test.pvalue:
        raise AssertionError(f"p-value {test.pvalue} is not hits / size at n={n}")
    return hits, size


def _arms(paired: bool, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Both arms of every path at n seeds (paired: the differences against zeros).   # (PATHS, n) each"""
    return (paths("paired", n), np.zeros((PATHS, n))) if paired else (paths("a", n), paths("b", n))


def _entry(paired: bool, i: int, n: int, arms: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[int, int]:
    """(hits, size) of path i's look test at n seeds per arm."""
    a, b = arms if arms is not None else _arms(paired, n)
    return _hits(look_test(a[i], b[i], paired, True), paired, n)


def _column_of(paired: bool, n: int) -> tuple[np.ndarray, int]:
    """The hits of every path at n seeds per arm, and the arrangements counted."""
    arms = _arms(paired, n)
    out = [_entry(paired, i, n, arms) for i in range(PATHS)]
    return np.array([h for h, _ in out], dtype=np.uint16), out[0][1]


def write(workers: int = 2) -> Path:
    """Compute every stored p-value with the real test (both designs, n = 2 .. MAX_N) and write FILE."""
    jobs = [(paired, n) for paired in (True, False) for n in range(2, MAX_N + 1)]
    jobs.sort(key=lambda j: -(2**min(j[1], 13) if j[0] else j[1]))          # the longest first
    with ProcessPoolExecutor(workers) as pool:
        done = dict(zip(jobs, pool.map(_column_of, *zip(*jobs))))
    out = {"checksum": np.array(checksum())}
    for paired, key in ((True, "paired"), (False, "independent")):
        out[f"{key}_hits"] = np.stack([done[(paired, n)][0] for n in range(2, MAX_N + 1)], axis=1)
        out[f"{key}_size"] = np.array([done[(paired, n)][1] for n in range(2, MAX_N + 1)], dtype=np.int64)
    tmp = FILE.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **out)
    tmp.replace(FILE)
    return FILE


def check(entries: int, pick: int = 0) -> list[str]:
    """Recompute `entries` random stored p-values (chosen by the RNG seeded with `pick`) with the real test; the
    mismatches, as lines."""
    z = _stored()
    bad = [] if str(z["checksum"]) == checksum() else [f"checksum {z['checksum']} != the paths' {checksum()}"]
    rng = np.random.default_rng(pick)
    for _ in range(entries):
        paired, i, n = bool(rng.integers(2)), int(rng.integers(PATHS)), int(rng.integers(2, MAX_N + 1))
        hits, size = _entry(paired, i, n)
        stored = pvalues(paired, n, robust=True)[i]
        if stored != hits / size:
            bad.append(f"{'paired' if paired else 'independent'} path {i} n={n}: stored {stored}, test {hits / size}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.adaptive.calibration",
                                 description=docstring(sys.modules[__name__]).split("\n")[0])
    ap.add_argument("--write", action="store_true", help="recompute and write calibration.npz")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--check", type=int, default=0, metavar="N", help="recompute N random stored entries")
    args = ap.parse_args(argv)
    if args.write:
        print(write(args.workers))
    if args.check:
        bad = check(args.check)
        print("\n".join(bad) or f"{args.check} entries match the test")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
