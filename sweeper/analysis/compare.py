"""Compare two sweeps of the same experiment (e.g. a new commit against an old one), variant by variant.

    python -m sweeper.report NEW_SWEEP --against OLD_SWEEP
    text = compare_sweeps(new_dir, old_dir, DecisionOptions())  # writes NEW_SWEEP/compare_vs_<OLD name>/report.md ...

Every variant present in both sweeps becomes one comparison "<variant>@new vs <variant>@old", with the same
machinery and decision rule as a single sweep (sweeper.analysis.verdict): Holm over all of them, paired by seed when
both
sweeps' runs share data order and evaluation batches, fingerprint differences (torch version, device, ...)
listed per comparison. Both sweeps must use the same decision metric and direction (--metric and --higher-is-better set
both).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

import sweeper.analysis.verdict as verdict
from sweeper.analysis.analyze import ReportInput, decision_options, read_manifest_once, read_sweep
from sweeper.config.decision import DecisionOptions, ReportFlags
from sweeper.errors import UsageError
from sweeper.run.files.manifest import Manifest


def _labelled(sweep_dir: Path, manifest: Manifest | None, label: str, metric: str | None,
              lower_is_better: bool | None):
    """(experiment, runs, curves) of one sweep, its variants and run ids tagged with the label."""
    exp, notes, runs, curves = read_sweep(sweep_dir, manifest, None, metric, lower_is_better, need_baseline=False)
    problems = [f"{label}: {n}" for n in notes]
    problems += [f"{label}: {r.run_dir}: {r.problems}" for r in runs.itertuples() if r.problems]
    damaged = [f"{label}: {d}" for d in runs.attrs.get("damaged", []) + curves.attrs.get("damaged", [])]
    for frame in (runs, curves):
        if len(frame):
            frame["variant"] = frame["variant"].astype(str) + f"@{label}"
            frame["run_id"] = f"{label}:" + frame["run_id"].astype(str)
    runs.attrs.update(problems=problems, damaged=damaged)
    return exp, runs, curves


def same_experiment(new_dir: Path, old_dir: Path, manifests: dict[str, Manifest | None],
                    any_experiment: bool) -> list[str]:
    """Refuse (UsageError) two sweeps whose manifests record different experiments, unless any_experiment: a
    comparison across experiments compares different things under the same variant names. The notes to show
    (a sweep without a manifest cannot be checked; a comparison allowed by the flag is said to be one).
    manifests: "new" and "old" -> that sweep's manifest (read_manifest_once)."""
    names = {label: m.experiment.name if m is not None else None for label, m in manifests.items()}
    if None in names.values():
        missing = [str(d) for (label, d) in (("new", new_dir), ("old", old_dir)) if names[label] is None]
        return [f"not checked that both sweeps are of the same experiment ({', '.join(missing)}: no manifest)"]
    if names["new"] == names["old"]:
        return []
    if not any_experiment:
        raise UsageError(f"{new_dir} is a sweep of experiment {names['new']!r}, {old_dir} of {names['old']!r}: "
                         f"a comparison across experiments pairs variants that only share a name; compare two "
                         f"sweeps of the same experiment, or pass --any-experiment to compare them anyway")
    return [f"experiments differ ({names['new']!r} vs {names['old']!r}): compared anyway (--any-experiment)"]


def analyze_pair(new_dir: str | Path, old_dir: str | Path, options: DecisionOptions | ReportFlags,
                 metric: str | None = None, lower_is_better: bool | None = None,
                 any_experiment: bool = False) -> ReportInput:
    """Read both sweeps (each manifest once) and decide every common variant, new vs old, by `options` (a report's
    flags: over what the new sweep recorded)."""
    new_dir, old_dir = Path(new_dir), Path(old_dir)
    for d in (new_dir, old_dir):
        if not d.is_dir():
            raise UsageError(f"sweep dir {d} does not exist: pass two folders holding a sweep's manifest and runs/")
    manifests = {"new": read_manifest_once(new_dir), "old": read_manifest_once(old_dir)}
    options = decision_options(options, manifests["new"])
    checked = same_experiment(new_dir, old_dir, manifests, any_experiment)
    new_exp, new_runs, new_curves = _labelled(new_dir, manifests["new"], "new", metric, lower_is_better)
    old_exp, old_runs, old_curves = _labelled(old_dir, manifests["old"], "old", metric, lower_is_better)
    if (new_exp.metric, new_exp.lower_is_better) != (old_exp.metric, old_exp.lower_is_better):
        raise UsageError(f"the sweeps decide on different metrics: {new_dir} uses {new_exp.metric} "
                         f"(lower_is_better={new_exp.lower_is_better}), {old_dir} uses {old_exp.metric} "
                         f"(lower_is_better={old_exp.lower_is_better}); compare sweeps of the same experiment, "
                         f"or name one with --metric NAME and --higher-is-better / --lower-is-better")
    new_variants = list(dict.fromkeys(v.removesuffix("@new") for v in new_runs["variant"]))
    old_variants = set(v.removesuffix("@old") for v in old_runs["variant"])
    common = [v for v in new_variants if v in old_variants]
    if not common:
        raise UsageError(f"no variant is in both sweeps: {new_dir} has {', '.join(new_variants) or 'none'}, "
                         f"{old_dir} has {', '.join(sorted(old_variants)) or 'none'}")
    keep = {f"{v}@{side}" for v in common for side in ("new", "old")}
    order = {f"{v}@{side}": 2 * i + (side == "new") for i, v in enumerate(common) for side in ("old", "new")}
    runs = pd.concat([old_runs, new_runs], ignore_index=True)
    runs = runs[runs["variant"].isin(keep)]
    runs = runs.iloc[runs["variant"].map(order).argsort(kind="stable")].reset_index(drop=True)
    curves = pd.concat([c for c in (old_curves, new_curves) if len(c)], ignore_index=True) \
        if len(old_curves) or len(new_curves) else new_curves
    family = [(f"{v}@new", f"{v}@old") for v in common]
    an = verdict.analyze(runs, new_exp.metric, new_exp.lower_is_better, family, options)
    problems = checked + new_runs.attrs["problems"] + old_runs.attrs["problems"]
    damaged = new_runs.attrs["damaged"] + old_runs.attrs["damaged"]
    only = sorted(set(new_variants) ^ old_variants)
    if only:
        problems.append(f"variants in only one sweep (not compared): {', '.join(only)}")
    header = [f"new sweep: {new_dir}", f"old sweep: {old_dir}",
              f"metric: final {new_exp.metric} ({'lower' if new_exp.lower_is_better else 'higher'} is better); "
              f"alpha {options.alpha}, Holm over {len(family)} comparison(s)",
              f"written {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    return ReportInput(f"Sweep comparison: {new_exp.name} (new) vs {old_exp.name} (old)", header, runs, curves, an,
                       problems, damaged)


