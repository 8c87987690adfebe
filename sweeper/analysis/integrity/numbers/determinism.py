"""Determinism: the same config at the same seed must give bitwise the same run. Two kinds of evidence: a
declared A/A control (experiment.controls: a variant whose run config equals the baseline's) compared with the
baseline seed by seed, and the opt-in probe (sweeper.determinism_probe=true: one baseline seed run again in
SWEEP_DIR/probe/, sweeper.plan.probe). Finals of the decision metric and every logged curve (timings left out)
are compared bitwise; when they differ, the run-to-run noise is set against the baseline's seed spread.
Torch-free.

    findings = nondeterminism(ev)      # [Finding("nondeterminism", ("a_a",), ...)] when runs are not deterministic

Effect: a warning (the verdicts stand: the seed spread holds the noise too; the report says how much of it is
noise, and that a rerun of one seed will not reproduce its numbers).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import COST, usable
from sweeper.plan.probe import probe_dirs
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import Status


class _Curves:
    """Each run's logged curves (timings left out), grouped once: run_id -> (metrics, steps, values), sorted."""

    def __init__(self, curves: pd.DataFrame, run_ids: set[str]):
        if not len(curves):
            self.by_run: dict[str, tuple] = {}
            return
        mine = curves[curves["run_id"].isin(run_ids)]
        timing = [m for m in mine["metric"].unique() if COST.search(str(m))]
        mine = mine[~mine["metric"].isin(timing)] if timing else mine
        mine = mine.sort_values(["run_id", "metric", "step"], kind="stable")
        metric, step, value = (mine[c].to_numpy() for c in ("metric", "step", "value"))
        self.by_run = {r: (metric[i], step[i], value[i].astype(float))
                       for r, i in mine.groupby("run_id", sort=False).indices.items()}

    def __call__(self, run_id: str) -> tuple:
        empty = np.array([], dtype=object)
        return self.by_run.get(run_id, (empty, empty, np.array([], dtype=float)))


def _curve_of_records(records: list[dict]) -> tuple:
    """A probe's metrics lines as _Curves gives a run's curve (sorted by metric, then step)."""
    points = sorted((key, int(rec["step"]), float(v)) for rec in records for key, v in rec.items()
                    if key != "step" and not COST.search(key) and isinstance(v, (int, float))
                    and not isinstance(v, bool))
    return (np.array([p[0] for p in points], dtype=object), np.array([p[1] for p in points]),
            np.array([p[2] for p in points], dtype=float))


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _curves_differ(a: tuple, b: tuple) -> bool:
    """Other points, or another value at any point (NaN equals NaN: bitwise the same run logs the same NaN)."""
    return not (len(a[0]) == len(b[0]) and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                and np.array_equal(a[2], b[2], equal_nan=True))


def _noise(deltas: list[float], spread_sd: float) -> str:
    """'run-to-run noise sd 0.0031, 26% of the seed spread (sd 0.012)'."""
    finite = [d for d in deltas if math.isfinite(d)]
    if not finite:
        return "the finals differ"
    noise = math.sqrt(sum(d * d for d in finite) / len(finite) / 2)     # a difference of two runs: 2 sigma^2
    text = f"run-to-run noise sd {noise:.3g}"
    if math.isfinite(spread_sd) and spread_sd > 0:
        text += f", {100 * noise / spread_sd:.0f}% of the seed spread (sd {spread_sd:.3g})"
    return text


def nondeterminism(ev: SweepEvidence) -> list[Finding]:
    exp = ev.experiment
    rows = ev.runs[usable(ev)]
    column = f"final_{exp.metric}"
    if not exp.baseline or column not in rows:
        return []
    base = _by_seed(rows, exp.baseline, column)
    finals = np.array([final for _, final in base.values()], dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):        # finals near 1e308: an infinite spread, no warning
        spread = float(np.std(finals[np.isfinite(finals)], ddof=1)) if np.isfinite(finals).sum() > 1 else math.nan
    controls = [c for c in exp.controls if c != exp.baseline and c in exp.variants and not ev.changes.get(c)]
    probes = probe_dirs(ev.sweep_dir)                  # controls that change the config are not A/A controls
    if not controls and not probes:
        return []
    wanted = rows[rows["variant"].isin([exp.baseline, *controls])]
    curve_of = _Curves(ev.curves, set(wanted["run_id"]))
    out = []
    for control in controls:
        mine = _by_seed(rows, control, column)
        pairs = [(s, base[s], mine[s]) for s in sorted(set(base) & set(mine))]
        found = _differences([(s, b[1], c[1], curve_of(b[0]), curve_of(c[0])) for s, b, c in pairs])
        if found:
            seeds, deltas, what = found
            out.append(Finding(
                "nondeterminism", (control,),
                f"{control} vs {exp.baseline} (identical run config) at seed{'s' if len(seeds) > 1 else ''} "
                f"{', '.join(map(str, seeds))} of {len(pairs)}: {what}; {_noise(deltas, spread)}",
                f"runs are not deterministic: the A/A control {control} gave other numbers than {exp.baseline} at "
                f"the same seeds; seed every random source from the run's seed (data order, augmentation, an "
                f"unseeded random/np.random) and use deterministic kernels, or silence nondeterminism with the "
                f"reason", Effect.WARN))
    for variant, seed, rd in probes:
        original = base.get(seed) if variant == exp.baseline else None
        if original is None:
            continue
        try:
            summary = rd.read_summary()
            records, _ = rd.read_metrics()
        except UnreadableFile:
            continue
        if summary is None or summary.status is not Status.FINISHED:
            continue
        again = float(summary.final[exp.metric]) if isinstance(summary.final.get(exp.metric), (int, float)) \
            else math.nan
        found = _differences([(seed, original[1], again, curve_of(original[0]), _curve_of_records(records))])
        if found:
            _, deltas, what = found
            out.append(Finding(
                "nondeterminism", (exp.baseline,),
                f"the determinism probe ran {variant} seed {seed} again: {what}; {_noise(deltas, spread)}",
                f"runs are not deterministic: the same run config at the same seed gave other numbers "
                f"({rd.path}); seed every random source from the run's seed (data order, augmentation, an unseeded "
                f"random/np.random) and use deterministic kernels, or silence nondeterminism with the reason",
                Effect.WARN))
    return out


def _by_seed(rows: pd.DataFrame, variant: str, column: str) -> dict[int, tuple[str, float]]:
    """seed -> (run_id, final) of a variant's finished runs."""
    mine = rows[rows["variant"] == variant]
    return {int(s): (r, float(f)) for s, r, f in zip(mine["seed"], mine["run_id"], mine[column])}


def _differences(pairs: list[tuple[int, float, float, tuple, tuple]]) -> tuple[list[int], list[float], str] | None:
    """(seeds that differ, final differences, what differs) over (seed, final a, final b, curve a, curve b)."""
    seeds, deltas, finals, curves = [], [], 0, 0
    for seed, a, b, ca, cb in pairs:
        final_differs, curve_differs = not _same(a, b), _curves_differ(ca, cb)
        if final_differs or curve_differs:
            seeds.append(seed)
            deltas.append(b - a)
            finals += final_differs
            curves += curve_differs
    if not seeds:
        return None
    what = []
    if finals:
        what.append(f"final differs by up to {max(abs(d) for d in deltas):.3g}")
    if curves:
        what.append(f"curves differ in {curves} pair{'s' if curves > 1 else ''}")
    return seeds, deltas, ", ".join(what)


def nondeterminism_coverage(ev: SweepEvidence) -> Coverage:
    exp = ev.experiment
    controls = [c for c in exp.controls if c != exp.baseline and c in exp.variants and not ev.changes.get(c)]
    probes = probe_dirs(ev.sweep_dir) if exp.baseline else []
    if not exp.baseline or not controls and not probes:
        return Coverage("nondeterminism", "no A/A control (experiment.controls) and no determinism probe "
                                          "(sweeper.determinism_probe=true): not checked", False)
    return Coverage("nondeterminism", f"{len(controls)} A/A control(s) and {len(probes)} probe run(s) against "
                                      f"{exp.baseline} at the same seed", True)
