"""The run-equality graph: every usable run of a sweep hashed on its whole record (every result final and every
logged curve: metric, step, value), so that which runs are the same run is one lookup, at 1,000s of runs.

    g = run_graph(ev)                  # cached per SweepEvidence
    g.cls[i]                           # row i of ev.runs -> its class (equal records share one); -1: not usable
    g.distinct[i]                      # True: a chance collision of i's record is negligible (see below)
    g.classes(rows)                    # the rows grouped by class, in order: [[0, 2], [1], [3]]
    g.representatives(rows)            # one row per distinct run (equal coarse records kept apart: chance)

"The same run": equal to float rounding (values rounded to 22 mantissa bits, about 2.4e-7 relative, on two grids
offset by half a step, so that two values within rounding never straddle a boundary on both), NaN equal to NaN.
Left out of the record: cost figures (time, memory, throughput), a seed echoed back, and the changed config keys
of any variant echoed back as results (a script that prints its arguments): they differ by construction.

A record is distinctive when two independent runs cannot share it by chance: it holds a value off every coarse
grid (not k/q for any q <= 1000: a loss, not an accuracy on 20 examples), or at least MIN_COARSE distinct coarse
values. Two equal records that are not distinctive are evidence only in bulk (numbers/copies.py). Torch-free.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence, memo
from sweeper.analysis.integrity.runs import COST, SEED, finals_matrix, result_columns, usable

MANTISSA_BITS = 22            # "to float rounding": float32 keeps 24 bits; a reordered sum differs in the last few
MAX_DENOMINATOR = 1000        # a value k/q with q up to this is on a coarse grid (an accuracy on <= 1000 examples)
TOL = 6e-8                    # float32 rounding of a k/q computed on a GPU; tighter than the fractions' spacing
FINE_TRIES = 4                # values per run tested for fineness (a loss is fine at its first value)
MIN_COARSE = 3                # distinct coarse values a record needs to be distinctive without a fine one


def echo_columns(ev: SweepEvidence, columns: list[str]) -> set[str]:
    """Result columns that echo a changed config key of any variant (its full key or its last part)."""
    leaves = set()
    for changes in ev.changes.values():
        for change in changes:
            for name in (change.key, change.key.rsplit(".", 1)[-1]):
                leaves |= {name, name.replace("-", "_"), name.replace("_", "-")}
    return {c for c in columns if c.removeprefix("final_") in leaves}


def record_columns(ev: SweepEvidence) -> list[str]:
    columns = result_columns(ev)
    echoes = echo_columns(ev, columns)
    return [c for c in columns if c not in echoes]


def _rounded(values: np.ndarray, offset: float) -> np.ndarray:
    """int64 keys of the values rounded to MANTISSA_BITS (grid shifted by `offset` steps); NaN one key."""
    v = np.asarray(values, dtype=float) + 0.0                      # -0.0 -> 0.0
    mantissa, exponent = np.frexp(np.where(np.isfinite(v), v, 0.0))
    key = np.floor(mantissa * 2.0 ** MANTISSA_BITS + offset).astype(np.int64) * 64 + exponent.astype(np.int64)
    key = np.where(np.isnan(v), np.int64(-7), key)
    return np.where(np.isinf(v), np.where(v > 0, np.int64(-5), np.int64(-3)), key)


def _mix(*parts: np.ndarray) -> np.ndarray:
    """One uint64 hash per row of the aligned arrays."""
    out = np.zeros(len(parts[0]), dtype=np.uint64)
    for k, part in enumerate(parts):
        h = pd.util.hash_array(np.asarray(part), categorize=False)
        out = out * np.uint64(0x100000001B3 + 2 * k) ^ h
    return out


def fine(values: np.ndarray) -> np.ndarray:
    """Per value: finite and not k/q for any q <= MAX_DENOMINATOR (to float rounding, TOL relative). A fraction
    that close is one of the value's continued-fraction convergents (|x - p/q| < 1 / 2q^2), so those are all we
    try: a few vectorised steps, not a thousand denominators."""
    v = np.asarray(values, dtype=float).reshape(-1)
    out = np.isfinite(v)
    x = np.abs(np.where(out, v, 0.0))
    tol = TOL * np.maximum(1.0, x)
    h_prev, h = np.ones_like(x), np.floor(x)
    k_prev, k = np.zeros_like(x), np.ones_like(x)
    rest = x - h
    coarse = np.abs(x - h) <= tol
    for _ in range(40):
        active = ~coarse & (rest > 1e-12) & (k <= MAX_DENOMINATOR)
        if not active.any():
            break
        inverse = 1.0 / np.where(active, rest, 1.0)
        a = np.floor(inverse)
        rest = np.where(active, inverse - a, rest)
        with np.errstate(over="ignore", invalid="ignore"):   # inactive rows near 1e308 overflow; np.where drops them
            h_prev, h = h, np.where(active, a * h + h_prev, h)
            k_prev, k = k, np.where(active, a * k + k_prev, k)
        coarse |= active & (k <= MAX_DENOMINATOR) & (np.abs(x - h / k) <= tol)
    return out & ~coarse


class RunGraph:
    """Classes of equal records among the usable runs of ev.runs (see the module docstring)."""

    def __init__(self, ev: SweepEvidence):
        n = len(ev.runs)
        ok = usable(ev).to_numpy() if n else np.zeros(0, dtype=bool)
        self.columns = record_columns(ev) if n else []
        finals = finals_matrix(ev, self.columns) if n else np.zeros((0, 0))
        ci = curve_index(ev)
        machine = {k for k, name in enumerate(ci.names) if COST.search(name) or SEED.search(name)}
        keep = (ci.row >= 0) & np.isin(ci.code, list(machine), invert=True)
        keep[keep] = ok[ci.row[keep]]
        row_of, codes, steps, values = ci.row[keep], ci.code[keep], ci.step[keep], ci.value[keep]
        self.curve_points = np.bincount(row_of, minlength=n) if n else np.zeros(0, dtype=int)
        where = pd.util.hash_array(codes * np.int64(1_000_003)) ^ pd.util.hash_array(steps)
        keys = []
        for offset in (0.0, 0.5):
            h = np.zeros(n, dtype=np.uint64)
            for j in range(finals.shape[1]):
                h = h * np.uint64(1099511628211) ^ pd.util.hash_array(_rounded(finals[:, j], offset))
            if len(row_of):
                point = where * np.uint64(0x100000001B3) ^ pd.util.hash_array(_rounded(values, offset))
                summed = np.zeros(n, dtype=np.uint64)
                np.add.at(summed, row_of, point)          # order-free per run; wraps mod 2**64 on purpose
                h = h ^ (summed * np.uint64(0x9E3779B97F4A7C15))
            keys.append(_mix(h, self.curve_points))
        self.cls = np.full(n, -1, dtype=np.int64)
        self._join(keys, ok)
        self.distinct = self._distinctive(finals, codes, row_of, values, n) & ok


    def _join(self, keys: list[np.ndarray], ok: np.ndarray) -> None:
        """Union of the two groupings (equal on either grid): connected components, small Python loop over the
        runs that share a key with another."""
        rows = np.flatnonzero(ok)
        parent = {int(r): int(r) for r in rows}

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for key in keys:
            _, first, inverse = np.unique(key[rows], return_index=True, return_inverse=True)
            for r, f in zip(rows, rows[first[inverse]]):
                if r != f:
                    a, b = find(int(r)), find(int(f))
                    if a != b:
                        parent[max(a, b)] = min(a, b)
        for r in rows:
            self.cls[r] = find(int(r))

    @staticmethod
    def _distinctive(finals: np.ndarray, codes: np.ndarray, row_of: np.ndarray, curve_values: np.ndarray,
                     n: int) -> np.ndarray:
        """Per row: its record holds a fine value (among its finals and the first and last point of each of its
        curves, FINE_TRIES of them tested) or MIN_COARSE distinct values among those and each curve's middle point."""
        rows = [np.repeat(np.arange(n), finals.shape[1])]
        values = [finals.reshape(-1)]
        if len(row_of):
            grp = row_of.astype(np.int64) * (int(codes.max()) + 1) + codes
            _, first = np.unique(grp, return_index=True)
            _, last = np.unique(grp[::-1], return_index=True)
            last = len(grp) - 1 - last
            pick = np.concatenate([first, last, (first + last) // 2])   # the middle: curves come sorted by run,
            #                                                                metric and step (load_curves)
            rows.append(row_of[pick])
            values.append(curve_values[pick])
        r, v = np.concatenate(rows), np.concatenate(values)
        keep = np.isfinite(v)
        r, v = r[keep], v[keep]
        order = np.argsort(r, kind="stable")
        r, v = r[order], v[order]
        start = np.flatnonzero(np.r_[True, r[1:] != r[:-1]]) if len(r) else np.zeros(0, dtype=int)
        rank = np.arange(len(r)) - np.repeat(start, np.diff(np.r_[start, len(r)]))
        tried = rank < FINE_TRIES
        out = np.zeros(n, dtype=bool)
        out[r[tried][fine(v[tried])]] = True
        distinct = pd.DataFrame({"r": r, "v": v}).drop_duplicates().groupby("r").size()
        out[distinct.index[distinct.to_numpy() >= MIN_COARSE].to_numpy(dtype=int)] = True
        return out

    def classes(self, rows) -> list[list[int]]:
        """The rows (usable ones only) grouped by class, in the order of their first row."""
        groups: dict[int, list[int]] = {}
        for r in rows:
            if self.cls[r] >= 0:
                groups.setdefault(int(self.cls[r]), []).append(int(r))
        return list(groups.values())


    def representatives(self, rows) -> list[int]:
        """One row per distinct run: the first of each class of distinctive records, every row of the others
        (equal coarse records may be chance)."""
        return [r for c in self.classes(rows) for r in (c[:1] if self.distinct[c[0]] else c)]


class CurveIndex:
    """ev.curves as integers, once per evidence: code[i] the metric of row i (names[code]), row[i] its run's row
    of ev.runs (-1: a run not in ev.runs), step and value as floats. String comparisons on 100,000s of curve rows
    cost more than every check together."""

    def __init__(self, ev: SweepEvidence):
        c = ev.curves
        codes, names = pd.factorize(c["metric"]) if len(c) else (np.zeros(0, dtype=np.int64), [])
        self.code = np.asarray(codes, dtype=np.int64)
        self.names = [str(n) for n in names]
        self.row = pd.Index(ev.runs["run_id"].astype(str)).get_indexer(c["run_id"].astype(str)) if len(c) \
            else np.zeros(0, dtype=np.int64)
        self.step = c["step"].to_numpy(dtype=float) if len(c) else np.zeros(0)
        self.value = c["value"].to_numpy(dtype=float) if len(c) else np.zeros(0)

    def runs_per_metric(self) -> dict[str, int]:
        """metric name -> how many runs logged it."""
        if not len(self.code):
            return {}
        pairs = np.unique(self.code * np.int64(len(self.row) + 1) + self.row)
        counts = np.bincount(pairs // np.int64(len(self.row) + 1), minlength=len(self.names))
        return dict(zip(self.names, counts.tolist()))


def run_graph(ev: SweepEvidence) -> RunGraph:
    """The graph of `ev`, built once per evidence object."""
    return memo(ev, RunGraph)


def curve_index(ev: SweepEvidence) -> CurveIndex:
    """ev.curves as integers, built once per evidence object."""
    return memo(ev, CurveIndex)
