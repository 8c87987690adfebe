"""Read and decide a sweep dir: the experiment, its runs and curves, and every verdict (files only, no torch).

    inp = analyze_sweep(sweep_dir, DecisionOptions())   # ReportInput: what a report is made of: runs, curves,
    #                                                     verdicts, notes, the findings of the checks across runs
    #                                                     (their effects already in the verdicts), inp.coverage
    #                                                     (what evidence each check had), inp.manifest
    #                                                     (read here, once, and passed to every loader)
    exp, notes, runs, curves = read_sweep(sweep_dir, read_manifest_once(sweep_dir), baseline="rope")
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

import sweeper.analysis.integrity.effects as integrity_effects
import sweeper.analysis.verdict as verdict
from sweeper.analysis.integrity import Coverage, Finding, SweepEvidence, check_sweep, sweep_coverage
from sweeper.analysis.integrity.numbers.coarse import unpromise
from sweeper.analysis.results import (
    declared_changes,
    load_code_state,
    load_curves,
    load_experiment,
    load_manifest,
    load_runs,
    load_variant_changes,
)
from sweeper.config.decision import DecisionOptions, ReportFlags
from sweeper.errors import UsageError
from sweeper.pasted import pasted
from sweeper.plan.slurm_record import has_record
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.manifest import MANIFEST, Manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import KEEP, STALE, Status, stale_hint


@dataclass
class ReportInput:
    """Everything a report is made of; sweeper.analysis.compare builds one for two sweeps."""
    title: str
    header: list[str]
    runs: pd.DataFrame
    curves: pd.DataFrame
    analysis: verdict.Analysis
    problems: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)    # one per damaged file: a WARNING line on the terminal
    notes: list[str] = field(default_factory=list)      # other lines for the terminal (e.g. settle Slurm jobs)
    secondary: dict[str, verdict.Analysis] = field(default_factory=dict)   # metric -> its own Holm family
    changes: dict[str, list] = field(default_factory=dict)   # variant -> [config_diff.Change] vs the baseline
    declared: dict[str, list] = field(default_factory=dict)  # variant -> [config_diff.Declared] (the manifest's)
    experiment: Experiment | None = None                     # hypothesis, notes (sweeper.journal reads them)
    code: dict = field(default_factory=dict)                 # {commit, dirty} the runs ran (sweeper.journal)
    findings: list[Finding] | None = None    # checks across runs (sweeper.analysis.integrity); None: not run
    #                                          (a comparison of two sweeps: each sweep's own report runs them)
    manifest: Manifest | None = None         # the sweep's manifest as read once (None: it has none, or two sweeps)
    coverage: list[Coverage] | None = None   # what evidence each check had (sweeper.analysis.integrity.coverage);
    #                                          None where the checks did not run


def resolve_experiment(exp: Experiment, sweep_dir: Path, runs: pd.DataFrame, baseline: str | None = None,
                       metric: str | None = None, lower_is_better: bool | None = None,
                       by_report: bool = True) -> Experiment:
    """The experiment the report decides on: the manifest's, with the command line's overrides; UsageError
    when a baseline (more than one variant) or a metric is needed and neither says which, its fix in the words
    of the command the user ran: the report's flags (by_report), else the sweep's experiment.* keys."""
    pass_metric = "pass --metric NAME" if by_report else "set experiment.metric=NAME"
    pass_baseline = "pass --baseline VARIANT" if by_report else "set experiment.baseline=VARIANT"
    present = list(dict.fromkeys(runs["variant"]))
    names = ", ".join(present)
    baseline = exp.baseline if baseline is None else baseline
    if baseline and baseline not in present:
        raise UsageError(f"baseline {baseline!r} has no runs in {sweep_dir}; variants: {names}")
    if not baseline and len(present) > 1:
        raise UsageError(f"no baseline recorded for {sweep_dir}: {pass_baseline} (variants: {names})")
    metric = exp.metric if metric is None else metric
    finals = sorted(c.removeprefix("final_") for c in runs.columns if c.startswith("final_"))
    if not metric:
        raise UsageError(f"no decision metric recorded for {sweep_dir}: {pass_metric} (final metrics of its "
                         f"runs: {', '.join(finals) or 'none yet'})")
    ended = runs["status"].isin([s.value for s in KEEP])     # runs with a result: finished or diverged
    results = sorted(c.removeprefix("final_") for c in runs.columns       # metrics: the numbers runs reported
                     if c.startswith("final_") and runs.loc[ended, c].notna().any()
                     and pd.to_numeric(runs.loc[ended, c].dropna(), errors="coerce").notna().all())
    if results and f"final_{metric}" not in runs.columns:
        raise UsageError(f"metric {metric!r}: no run of {sweep_dir} has a final {metric}; {pass_metric} "
                         f"(final metrics of its runs: {', '.join(results)})")
    lower = exp.lower_is_better if lower_is_better is None else lower_is_better
    return dataclasses.replace(exp, baseline=baseline, metric=metric, lower_is_better=lower,
                               variants=dict(exp.variants), secondary_metrics=dict(exp.secondary_metrics))


def read_manifest_once(sweep_dir: Path) -> Manifest | None:
    """The manifest of a report's sweep (load_manifest), read at the report's entry; UsageError naming a damaged
    one or a missing sweep dir."""
    if not sweep_dir.is_dir():
        raise UsageError(f"sweep dir {sweep_dir} does not exist: pass the folder holding the sweep's manifest "
                         f"and runs/")
    try:
        return load_manifest(sweep_dir)
    except UnreadableFile as e:
        raise UsageError(str(e)) from None


def read_sweep(sweep_dir: Path, manifest: Manifest | None, baseline: str | None = None, metric: str | None = None,
               lower_is_better: bool | None = None, need_baseline: bool = True, by_report: bool = True
               ) -> tuple[Experiment, list[str], pd.DataFrame, pd.DataFrame]:
    """(experiment with the overrides, notes, runs, curves) of a sweep dir and its manifest (read_manifest_once);
    UsageError naming a sweep that plans no runs. need_baseline=False: any variant will do (`--against` pairs
    equal variants of two sweeps)."""
    exp, notes = load_experiment(sweep_dir, manifest)
    runs = load_runs(sweep_dir, manifest)
    if runs.empty:
        raise UsageError(f"sweep dir {sweep_dir} plans no runs (none in its manifest, no runs/<variant>/seed_<k>/)")
    if not need_baseline and baseline is None:
        baseline = str(runs["variant"].iloc[0])
    exp = resolve_experiment(exp, sweep_dir, runs, baseline, metric, lower_is_better, by_report)
    return exp, notes, runs, load_curves(sweep_dir, runs)


def decision_options(options: DecisionOptions | ReportFlags, manifest: Manifest | None) -> DecisionOptions:
    """What a report decides by: `options` as given (a sweep's own sweeper.decision), or a report's flags over
    what the sweep recorded (its manifest's `decision`), else the defaults."""
    if isinstance(options, ReportFlags):
        return options.over(manifest.extra.get("decision") if manifest is not None else None,
                            f"{MANIFEST} decision")
    return options


def analyze_sweep(sweep_dir: str | Path, options: DecisionOptions | ReportFlags, baseline: str | None = None,
                  metric: str | None = None, lower_is_better: bool | None = None) -> ReportInput:
    """Read the sweep (its manifest once) and decide by `options`. baseline / metric / lower_is_better override
    the manifest's experiment."""
    sweep_dir = Path(sweep_dir)
    manifest = read_manifest_once(sweep_dir)
    by_report = isinstance(options, ReportFlags)           # else the sweep's own report: its experiment.* keys
    options = decision_options(options, manifest)
    exp, notes, runs, curves = read_sweep(sweep_dir, manifest, baseline, metric, lower_is_better,
                                          by_report=by_report)
    recorded, _ = load_experiment(sweep_dir, manifest)
    present = list(dict.fromkeys(runs["variant"]))
    family = [(v, exp.baseline) for v in present if v != exp.baseline] if exp.baseline else []
    secondary_exp = dataclasses.replace(exp, secondary_metrics={m: d for m, d in exp.secondary_metrics.items()
                                                                if f"final_{m}" in runs.columns and m != exp.metric})
    missing = sorted(m for m in exp.secondary_metrics if f"final_{m}" not in runs.columns)
    changes, unreadable = load_variant_changes(sweep_dir, manifest, exp.baseline)
    declared = declared_changes(manifest) if exp.baseline == recorded.baseline else {}
    task = (manifest.task or {}) if manifest is not None else {}
    evidence = SweepEvidence(sweep_dir, exp, runs, curves, changes, declared, task, options)
    findings = check_sweep(evidence, exp.silence)
    coverage = sweep_coverage(evidence)
    copies = integrity_effects.copies(findings)       # copies of a run of their own arm: counted once
    tested = runs[~runs["run_id"].astype(str).isin(copies)] if copies else runs
    an, secondary = verdict.analyze_all(tested, secondary_exp, options, family,
                                        untested=integrity_effects.untested(findings, family))
    for analysis in (an, *secondary.values()):
        integrity_effects.apply(findings, analysis)
        unpromise(findings, analysis)                # a coarse metric: no seeds estimate the grid cannot keep
    counts = runs["status"].value_counts()
    header = [f"sweep: {sweep_dir}", f"metric: final {exp.metric} ({'lower' if exp.lower_is_better else 'higher'} "
              f"is better); baseline: {exp.baseline or 'none (one variant)'}; alpha {options.alpha}, Holm over "
              f"{len(family)} comparison(s)",
              "runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" (of {len(runs)} planned)",
              f"written {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    problems = notes + [f"{r.run_dir}: {r.problems}" for r in runs.itertuples() if r.problems]
    problems += [f"secondary metric {m}: no run has a final {m}" for m in missing]
    damaged = runs.attrs.get("damaged", []) + curves.attrs.get("damaged", [])
    stale = int((runs["status"] == STALE).sum())
    terminal = [f"note: {stale} run(s) {stale_hint(sweep_dir)}"] if stale else []
    terminal += unfinished_notes(sweep_dir, runs)
    terminal += [f"note: {n}" for c in an.comparisons for n in c.notes if n.startswith(verdict.PAIRING_HINT)]
    code = load_code_state(sweep_dir, manifest)
    unreadable += code.pop("unreadable")
    if exp.hypothesis:
        header.insert(1, f"hypothesis: {exp.hypothesis}")
    return ReportInput(f"Sweep report: {exp.name}", header, runs, curves, an, problems + unreadable, damaged,
                       terminal + slurm_notes(sweep_dir, runs), secondary, changes, declared, exp, code, findings,
                       manifest, coverage)


def unfinished_notes(sweep_dir: Path, runs: pd.DataFrame) -> list[str]:
    """A sweep where no run has a result yet (interrupted before any finished): no verdict can be made; say so
    and how to go on, instead of asking for another metric."""
    if runs["status"].isin([s.value for s in KEEP]).any():
        return []
    counts = ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items())
    return [f"note: no run has finished yet ({counts}): no verdicts until runs finish; resume with "
            f"`{pasted('python', '-m', 'sweeper.resume', sweep_dir)}` or the command that started it (finished runs "
            "are kept)"]


def slurm_notes(sweep_dir: Path, runs: pd.DataFrame) -> list[str]:
    """A sweep launched on Slurm with runs still running/pending: how to settle jobs that ended silently."""
    if not has_record(sweep_dir):
        return []
    open_runs = int(runs["status"].isin([Status.RUNNING.value, Status.PENDING.value]).sum())
    if not open_runs:
        return []
    return [f"note: {open_runs} run(s) still show running/pending; if their Slurm jobs have ended, run "
            f"`{pasted('python', '-m', 'sweeper.slurm', 'status', sweep_dir)}` to settle them, then report again"]
