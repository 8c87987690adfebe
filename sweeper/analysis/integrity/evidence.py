"""What the checks across runs read: the sweep's experiment, runs, curves and each variant's config changes, as
the report already loaded them (sweeper.analysis.results). Torch-free; the checks read no file themselves
unless the evidence they need is not here.

    ev = SweepEvidence(sweep_dir, experiment, runs, curves, changes)
    memo(ev, fn)          # fn(ev), computed once per evidence object (what several checks, or a check and its
                          # coverage line, derive from the same evidence)
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sweeper.config.decision import DecisionOptions
from sweeper.config.variants.config_diff import Change, Declared
from sweeper.run.files.experiment import Experiment


@dataclass(frozen=True)
class SweepEvidence:
    sweep_dir: Path
    experiment: Experiment            # baseline, metric, lower_is_better, variants, controls, bundles
    runs: pd.DataFrame                # sweeper.analysis.results.load_runs: one row per planned run
    curves: pd.DataFrame              # load_curves: run_id, variant, seed, step, metric, value
    changes: dict[str, list[Change]] = field(default_factory=dict)   # variant -> its config changes vs the baseline
    declared: dict[str, list[Declared]] = field(default_factory=dict)  # variant -> the overrides that made them
    task: dict | None = None          # the manifest's task block ({} without a manifest); None: not given, a check
    #                                   that needs it reads the manifest
    options: DecisionOptions = field(default_factory=DecisionOptions)   # the report's: a check that decides uses it

    @functools.cached_property
    def metric_curves(self) -> pd.DataFrame:
        """The decision metric's logged points (run_id, variant, seed, step, value), sorted by run and step; read
        once for every check that needs them."""
        c = self.curves
        return c[c["metric"] == self.experiment.metric] if len(c) else c


_MEMO: dict[tuple, tuple] = {}       # (id(ev), fn) -> (weakref to ev, fn(ev))


def memo(ev: SweepEvidence, fn: Callable):
    """fn(ev), once per evidence object (a report's checks share one); the caller must not modify the value."""
    hit = _MEMO.get((id(ev), fn))
    if hit is not None and hit[0]() is ev:
        return hit[1]
    for key in [k for k, (ref, _) in _MEMO.items() if ref() is None]:
        del _MEMO[key]
    value = fn(ev)
    _MEMO[(id(ev), fn)] = (weakref.ref(ev), value)
    return value
