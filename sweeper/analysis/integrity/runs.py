"""What several checks across runs read from the runs and curves: usable runs, the result columns (final metrics,
not cost figures), each run's logged curves, and whether two runs are the same run (bitwise or to float rounding).

    ok = usable(ev)                                  # boolean per row of ev.runs: finished, finite decision metric
    arm_rows(ev)["base"]                             # positions in ev.runs of the usable runs of variant base
    same = RunCurves(ev).same(run_a, run_b)          # curves equal at every logged step (to float rounding)
    same_rows(finals_matrix(ev, result_columns(ev)), [i, j])   # i, j: positions of rows of ev.runs

Torch-free; reads no file (the evidence holds everything).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence, memo
from sweeper.config.variants.config_diff import group_changes
from sweeper.run.files.status_values import Status

RTOL, ATOL = 1e-7, 1e-12        # "to float rounding" (float32: 1.2e-7): a reordered sum, not a trained difference
# Logged values that measure the machine, not the model (they differ between copies of one run): left out.
COST = re.compile(r"(?:^|_)(?:time|times|sec|secs|seconds|s|ms|elapsed|wall|clock|duration|throughput|speed|rss|mem|"
                  r"memory|mb|gb|util|per|tokens_per_s|samples_per_s|it_s|its)(?:_|$)", re.IGNORECASE)
SEED = re.compile(r"(?:^|_)seeds?(?:_|$)", re.IGNORECASE)   # a script that echoes its seed: not a result


def metric_column(ev: SweepEvidence) -> str:
    return f"final_{ev.experiment.metric}"


def usable(ev: SweepEvidence) -> pd.Series:
    """Per run: finished with a finite final decision metric (the runs a verdict counts). Computed once per
    evidence object (every check asks, 50 times a report); each caller gets its own copy."""
    return memo(ev, _usable).copy()


def arm_rows(ev: SweepEvidence) -> dict[str, np.ndarray]:
    """variant -> the positions (in ev.runs) of its usable runs, once per evidence object: a string comparison of
    the variant column per variant and per check costs more than the checks' own arithmetic at 1,000 runs."""
    return memo(ev, _arm_rows)


def _arm_rows(ev: SweepEvidence) -> dict[str, np.ndarray]:
    ok = usable(ev).to_numpy()
    codes, names = pd.factorize(ev.runs["variant"].astype(str)) if len(ev.runs) else (np.zeros(0, dtype=int), [])
    return {str(n): np.flatnonzero(ok & (codes == i)) for i, n in enumerate(names)}


def arm_values(ev: SweepEvidence, column: str, variant: str) -> pd.Series:
    """The column's values for the usable runs of `variant` (empty when the column or the variant is absent)."""
    rows = arm_rows(ev).get(str(variant), np.zeros(0, dtype=int))
    return ev.runs[column].iloc[rows] if column in ev.runs else pd.Series(dtype=object)


def _usable(ev: SweepEvidence) -> pd.Series:
    column = metric_column(ev)
    if column not in ev.runs or not len(ev.runs):
        return pd.Series(False, index=ev.runs.index)
    value = pd.to_numeric(ev.runs[column], errors="coerce")
    return (ev.runs["status"] == Status.FINISHED.value) & np.isfinite(value.to_numpy(dtype=float))


def result_columns(ev: SweepEvidence) -> list[str]:
    """The final metrics a run reports (final_<name>), without its cost figures (wall time, memory, throughput)."""
    cost = set(ev.runs.attrs.get("cost", ()))
    return [c for c in ev.runs.columns if c.startswith("final_") and c.removeprefix("final_") not in cost
            and (c == metric_column(ev) or not (COST.search(c[6:]) or SEED.search(c[6:])))]


def close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to float rounding, NaN where the other is NaN (a difference past the largest float is not close)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):         # 1e308 - -1e308 = inf: not close, no warning
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))


def finals_matrix(ev: SweepEvidence, columns: list[str]) -> np.ndarray:
    """The result columns of every run as floats, one row per row of ev.runs (NaN: not a number)."""
    if not columns:
        return np.zeros((len(ev.runs), 0))
    return np.column_stack([pd.to_numeric(ev.runs[c], errors="coerce").to_numpy(dtype=float) for c in columns])


def same_rows(matrix: np.ndarray, rows: list[int]) -> bool:
    """Every listed row of the matrix equals the first one (to float rounding)."""
    return all(close(matrix[rows[0]], matrix[r]) for r in rows[1:])


class MetricCurves:
    """The decision metric's logged points of the usable runs, as numpy arrays grouped by run (contiguous, by
    step): ids[g] is group g's run_id, its points are value[start[g]:end[g]] (at step[...]). Cheap at 1,000s of
    runs."""

    def __init__(self, ev: SweepEvidence, min_points: int = 1):
        c = ev.metric_curves
        c = c[c["run_id"].isin(ev.runs.loc[usable(ev), "run_id"])] if len(c) else c
        value = c["value"].to_numpy(dtype=float) if len(c) else np.zeros(0)
        c = c[np.isfinite(value)] if len(c) else c
        run = c["run_id"].to_numpy() if len(c) else np.zeros(0, dtype=object)
        start = np.flatnonzero(np.r_[True, run[1:] != run[:-1]]) if len(run) else np.zeros(0, dtype=int)
        n = np.diff(np.r_[start, len(run)])
        keep = np.repeat(n >= min_points, n)
        c, run = c[keep], run[keep]
        self.value = c["value"].to_numpy(dtype=float) if len(c) else np.zeros(0)
        self.step = c["step"].to_numpy(dtype=float) if len(c) else np.zeros(0)
        self.start = np.flatnonzero(np.r_[True, run[1:] != run[:-1]]) if len(run) else np.zeros(0, dtype=int)
        self.n = np.diff(np.r_[self.start, len(run)])
        self.ids = run[self.start]
        self.group = np.repeat(np.arange(len(self.start)), self.n)           # group of every point
        self.pos = np.arange(len(run)) - np.repeat(self.start, self.n)      # its place in its run's curve

    def __len__(self) -> int:
        return len(self.start)

    def per_run(self, weights: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The sum of `weights` over each run's points (where mask)."""
        w = weights if mask is None else np.where(mask, weights, 0.0)
        return np.bincount(self.group, weights=w, minlength=len(self))


def shown(x: float) -> str:
    return f"{x:.6g}"


class RunCurves:
    """Each run's logged curves (metrics that measure the model, not the machine), looked up by run_id; run_ids:
    read only those runs."""

    def __init__(self, ev: SweepEvidence, run_ids=None):
        c = ev.curves
        if len(c) and run_ids is not None:               # only the runs a check compares (cheap on big sweeps)
            c = c[c["run_id"].isin(list(run_ids))]
        if len(c):
            machine = [n for n in pd.unique(c["metric"]) if COST.search(str(n)) or SEED.search(str(n))]
            c = c[~c["metric"].isin(machine)] if machine else c
        self.index = c.groupby("run_id", sort=False).indices if len(c) else {}
        self.step = c["step"].to_numpy() if len(c) else np.zeros(0)
        self.metric = c["metric"].to_numpy() if len(c) else np.zeros(0, dtype=object)
        self.value = c["value"].to_numpy(dtype=float) if len(c) else np.zeros(0)

    def points(self, run_id: str) -> int:
        idx = self.index.get(run_id)
        return 0 if idx is None else len(idx)

    def same(self, a: str, b: str) -> bool:
        """Runs a and b logged the same metrics at the same steps with equal values (to float rounding)."""
        ia, ib = self.index.get(a), self.index.get(b)
        if ia is None or ib is None:
            return ia is None and ib is None
        return (len(ia) == len(ib) and np.array_equal(self.step[ia], self.step[ib])
                and bool((self.metric[ia] == self.metric[ib]).all()) and close(self.value[ia], self.value[ib]))

    def names(self, run_id: str) -> list[str]:
        idx = self.index.get(run_id)
        return [] if idx is None else list(dict.fromkeys(self.metric[idx].tolist()))


def what_changes(ev: SweepEvidence, variant: str, changes: list | None = None) -> str:
    """What a variant changes against the baseline: its config keys, grouped under the override that made them."""
    changes = ev.changes.get(variant) if changes is None else changes
    if changes is None:
        overrides = ev.experiment.variants.get(variant) or []
        return f"overrides {', '.join(overrides)}" if overrides else "no recorded change"
    if not changes:
        return "no config key"
    parts = []
    for override, group in group_changes(changes, ev.declared.get(variant, [])):
        keys = "; ".join(str(c) for c in group[:4]) + ("; ..." if len(group) > 4 else "")
        parts.append(f"{keys} (from `{override}`)" if override else keys)
    return "; ".join(parts)
