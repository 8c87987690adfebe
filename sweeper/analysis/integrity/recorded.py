"""What the checks across runs read of each run's recorded fingerprint (its summary's `fingerprint`, the
`fp_<key>` columns of sweeper.analysis.results.load_runs): finished runs, a key's values, run labels. Torch-free.

    rows = finished(ev.runs)                     # the runs whose results the comparisons use
    value(row, "eval_fingerprint")               # the recorded value, None when the run recorded none
    runs_label(rows)                             # "relu seeds 0-1, wide seed 3"
"""
from __future__ import annotations

import pandas as pd

from sweeper.config.seeds import format_seeds
from sweeper.run.files.rundir import Status


def finished(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that finished (the ones a comparison's numbers come from)."""
    if not len(runs) or "status" not in runs:
        return runs.iloc[0:0]
    return runs[runs["status"] == Status.FINISHED.value]


def value(row: pd.Series, key: str):
    """The run's recorded fingerprint value of `key` (fp_<key>), None when absent or null."""
    v = row.get(f"fp_{key}")
    return None if v is None or (isinstance(v, float) and v != v) else v


def runs_label(rows: pd.DataFrame, limit: int = 4) -> str:
    """'relu seeds 0-1, wide seed 3' for messages (variants in their order, at most `limit` of them)."""
    parts = []
    for variant, group in rows.groupby("variant", sort=False):
        seeds = sorted(int(s) for s in group["seed"])
        parts.append(f"{variant} seed{'s' if len(seeds) > 1 else ''} {format_seeds(seeds)}")
    return ", ".join(parts[:limit]) + (f", +{len(parts) - limit} more" if len(parts) > limit else "")
