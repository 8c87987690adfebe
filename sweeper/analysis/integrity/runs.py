"""What several checks across runs read from the runs and curves: usable runs, the result columns (final metrics,
not cost figures), each run's logged curves, and whether two runs are the same run (bitwise or to float rounding).

    ok = usable(ev)                                  # boolean per row of ev.runs: finished, finite decision metric
    same = RunCurves(ev).same(run_a, run_b)          # curves equal at every logged step (to float rounding)
    same_finals(ev.runs.loc[[i, j]], result_columns(ev))

Torch-free; reads no file (the evidence holds everything).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.config.config_diff import group_changes
from sweeper.run.files.rundir import Status

RTOL, ATOL = 1e-7, 1e-12        # "to float rounding" (float32: 1.2e-7): a reordered sum, not a trained difference
# Logged values that measure the machine, not the model (they differ between copies of one run): left out.
COST = re.compile(r"(?:^|_)(?:time|times|sec|secs|seconds|s|ms|elapsed|wall|clock|duration|throughput|speed|rss|mem|"
                  r"memory|mb|gb|util|per|tokens_per_s|samples_per_s|it_s|its)(?:_|$)", re.IGNORECASE)


def metric_column(ev: SweepEvidence) -> str:
    return f"final_{ev.experiment.metric}"


def usable(ev: SweepEvidence) -> pd.Series:
    """Per run: finished with a finite final decision metric (the runs a verdict counts)."""
    column = metric_column(ev)
    if column not in ev.runs or not len(ev.runs):
        return pd.Series(False, index=ev.runs.index)
    value = pd.to_numeric(ev.runs[column], errors="coerce")
    return (ev.runs["status"] == Status.FINISHED.value) & np.isfinite(value.to_numpy(dtype=float))


def result_columns(ev: SweepEvidence) -> list[str]:
    """The final metrics a run reports (final_<name>), without its cost figures (wall time, memory, throughput)."""
    cost = set(ev.runs.attrs.get("cost", ()))
    return [c for c in ev.runs.columns if c.startswith("final_") and c.removeprefix("final_") not in cost
            and (c == metric_column(ev) or not COST.search(c.removeprefix("final_")))]


def close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to float rounding, NaN where the other is NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True))


def same_finals(rows: pd.DataFrame, columns: list[str]) -> bool:
    """Every row's result columns equal the first row's (to float rounding)."""
    values = rows[columns].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    return all(close(values[0], v) for v in values[1:])


def shown(x: float) -> str:
    return f"{x:.6g}"


class RunCurves:
    """Each run's logged curves (metrics that measure the model, not the machine), looked up by run_id."""

    def __init__(self, ev: SweepEvidence):
        c = ev.curves
        keep = ~c["metric"].astype(str).str.contains(COST) if len(c) else pd.Series(dtype=bool)
        self.curves = c[keep] if len(c) else c
        self.index = self.curves.groupby("run_id", sort=False).indices if len(self.curves) else {}

    def of(self, run_id: str) -> pd.DataFrame:
        """metric, step, value of one run, sorted (empty when it logged none)."""
        idx = self.index.get(run_id)
        return self.curves.iloc[idx] if idx is not None else self.curves.iloc[:0]

    def metric(self, run_id: str, metric: str) -> pd.DataFrame:
        rows = self.of(run_id)
        return rows[rows["metric"] == metric]

    def points(self, run_id: str) -> int:
        idx = self.index.get(run_id)
        return 0 if idx is None else len(idx)

    def same(self, a: str, b: str) -> bool:
        """Runs a and b logged the same metrics at the same steps with equal values (to float rounding)."""
        ca, cb = self.of(a), self.of(b)
        if len(ca) != len(cb):
            return False
        if not len(ca):
            return True
        if not (np.array_equal(ca["step"].to_numpy(), cb["step"].to_numpy())
                and np.array_equal(ca["metric"].to_numpy(), cb["metric"].to_numpy())):
            return False
        return close(ca["value"].to_numpy(), cb["value"].to_numpy())

    def names(self, run_id: str) -> list[str]:
        return list(dict.fromkeys(self.of(run_id)["metric"]))


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
