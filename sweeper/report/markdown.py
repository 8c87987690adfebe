"""report.md and summary.csv of a sweep: every section, in SECTIONS order.

    text = markdown(inp, plot_paths, out_dir)        # report.md
    summary_frame(inp.analysis, inp.secondary, inp.changes, inp.declared).to_csv(...)   # summary.csv
"""
from __future__ import annotations

import math
import platform
from pathlib import Path

import numpy as np
import pandas as pd

import sweeper.analysis.verdict as verdict
import sweeper.report.changes as report_changes
import sweeper.report.integrity as report_integrity
from sweeper.analysis.analyze import ReportInput
from sweeper.docstrings import docstring
from sweeper.report.tables import (
    DECISION_HEADER,
    SECONDARY_HEADER,
    _baseline,
    _level,
    decision_rows,
    failed_runs,
    fmt,
    headline,
    health_lines,
    md_table,
    per_seed_rows,
    secondary_rows,
)

SECTIONS = ("Decision", "Checks across runs", "What each variant changes", "Per-seed values",
            "Where each final came from", "Failed runs",
            "Variants", "Comparisons", "Plots", "Fingerprints", "Methods", "Problems reading the sweep")


def summary_frame(an: verdict.Analysis, secondary: dict[str, verdict.Analysis] | None = None,
                  changes: dict[str, list] | None = None, declared: dict[str, list] | None = None) -> pd.DataFrame:
    """summary.csv: one row per variant, with its comparison (if it is compared with another arm), what it
    changes against the baseline (changes, n_changes, changed_keys), then for each secondary metric M its columns
    M_mean, M_sd, M_delta, M_ci_low, M_ci_high, M_p_holm, M_verdict."""
    frame = _primary_frame(an)
    if changes:
        columns = report_changes.summary_columns(changes, declared or {})
        frame = frame.merge(pd.DataFrame([{"variant": v, **c} for v, c in columns.items()]), on="variant",
                            how="left")
        frame["n_changes"] = frame["n_changes"].astype("Int64")
    for metric, sec in (secondary or {}).items():
        by_variant = {c.variant: c for c in sec.comparisons}
        extra = []
        for arm in sec.arms.values():
            c, ci = by_variant.get(arm.variant), None
            ci = c.decision_ci if c is not None else None
            extra.append({"variant": arm.variant, f"{metric}_mean": arm.summary["mean"],
                          f"{metric}_sd": arm.summary["sd"],
                          f"{metric}_delta": c.delta.estimate if c is not None and c.delta is not None else math.nan,
                          f"{metric}_ci_low": ci.low if ci is not None else math.nan,
                          f"{metric}_ci_high": ci.high if ci is not None else math.nan,
                          f"{metric}_p_holm": c.p_adjusted if c is not None else math.nan,
                          f"{metric}_verdict": c.verdict if c is not None else ""})
        frame = frame.merge(pd.DataFrame(extra), on="variant", how="left") if extra else frame
    return frame


def _primary_frame(an: verdict.Analysis) -> pd.DataFrame:
    by_variant = {c.variant: c for c in an.comparisons}
    rows = []
    for arm in an.arms.values():
        s = arm.summary
        row = {"variant": arm.variant, "planned": arm.planned, "usable": arm.usable, "failed": arm.failed,
               "diverged": arm.diverged, "not_finished": arm.incomplete, "mean": s["mean"], "sd": s["sd"],
               "median": s["median"], "iqm": s["iqm"], "mean_ci_low": arm.mean_ci.low,
               "mean_ci_high": arm.mean_ci.high, "health_fail": arm.health.get("fail", 0)}
        c = by_variant.get(arm.variant)
        if c:
            row.update(compared_with=c.baseline, verdict=c.verdict, numbers_say=c.numbers_say,
                       invalid_checks=",".join(c.invalid_checks), integrity_checks=",".join(c.integrity_checks),
                       integrity_warnings=",".join(c.integrity_warnings),
                       design=c.design, n_pairs=c.n_pairs,
                       p_adjusted_holm=c.p_adjusted, mde=c.mde, seeds_needed=c.seeds_needed,
                       seeds_needed_basis=c.seeds_needed_basis, reason=c.reason)
            if c.decision_ci is not None:
                row.update(decision_ci_low=c.decision_ci.low, decision_ci_high=c.decision_ci.high,
                           decision_ci_level=c.decision_ci.confidence, decision_ci_method=c.decision_ci.method)
            if c.delta is not None:
                row.update(delta=c.delta.estimate, bootstrap_ci_low=c.delta.low, bootstrap_ci_high=c.delta.high,
                           bootstrap_ci_method=c.delta.method, hedges_g=c.hedges_g, p_better=c.p_better.estimate,
                           p_better_ci_low=c.p_better.low, p_better_ci_high=c.p_better.high,
                           test=c.primary.name, p=c.primary.pvalue, robustness_test=c.robustness.name,
                           robustness_p=c.robustness.pvalue, robustness_min_p=c.robustness.min_p)
        rows.append(row)
    frame = pd.DataFrame(rows)
    for column in ("n_pairs", "seeds_needed"):
        if column in frame:
            frame[column] = frame[column].astype("Int64")
    return frame


# ----------------------------------------------------------------------------- report.md
def _comparison_md(c: verdict.Comparison, an: verdict.Analysis) -> list[str]:
    out = [f"### {c.variant} vs {c.baseline}: {c.verdict}", "", c.reason, ""]
    if c.integrity_checks:
        out += [f"- checks across runs: {', '.join(c.integrity_checks)} (see Checks across runs); the numbers alone "
                f"would say {c.numbers_say or '-: no test was run'}"]
    if c.delta is not None:
        p, r = c.primary, c.robustness
        t_ci = f"; {p.name} CI {fmt(p.ci[0])} to {fmt(p.ci[1])}" if np.isfinite(p.ci[0]) else ""
        out += [f"- design: {c.design}" + (f" ({c.n_pairs} pairs)" if c.design == "paired" else
                                             f" ({c.n_variant} vs {c.n_baseline} seeds)"),
                f"- difference of means ({c.variant} - {c.baseline}): {fmt(c.delta.estimate)}; decision interval "
                + (f"{fmt(c.decision_ci.low)} to {fmt(c.decision_ci.high)} at {_level(c)} ({c.decision_ci.method}; "
                   f"it excludes 0 exactly when the verdict is better or worse)" if c.decision_ci is not None
                   else "-"),
                f"- secondary figure: bootstrap {an.confidence:.0%} CI {fmt(c.delta.low)} to {fmt(c.delta.high)} "
                f"({c.delta.method}, {c.delta.n_resamples} resamples, seed {c.delta.seed}; not the decision's "
                f"interval){t_ci}",
                f"- Hedges' g: {fmt(c.hedges_g, 3)}",
                f"- P({c.variant} better than {c.baseline}) = U/(n_a n_b) = {c.p_better.estimate:.3f}, "
                f"{an.confidence:.0%} CI {fmt(c.p_better.low, 3)} to {fmt(c.p_better.high, 3)} ({c.p_better.method})",
                f"- driving test: {p.name}, statistic {fmt(p.statistic)}" + (f", df {fmt(p.df, 3)}" if np.isfinite(p.df)
                                                                               else "") + f", p = {fmt(p.pvalue, 3)}",
                f"- robustness check: {r.name}, p = {fmt(r.pvalue, 3)}" + (
                    f" ({'exact' if r.exact else 'Monte Carlo'}, {r.n_resamples} arrangements; smallest reachable "
                    f"p at this n: {fmt(r.min_p, 3)})" if r.exact is not None else ""),
                f"- Holm-adjusted p: {fmt(c.p_adjusted, 3)} (alpha {an.alpha}, family of {len(an.comparisons)})",
                f"- minimum detectable difference at this n (80% power): {fmt(c.mde, 3)}; seeds per arm for 80% "
                f"power (sd {fmt(c.spread, 3)}): {fmt(c.seeds_needed)}, {c.seeds_needed_basis or 'post hoc'}"]
        if c.verdict == "invalid" and not c.integrity_checks:
            out.append(f"- invalid: health checks failed ({', '.join(c.invalid_checks)}); the numbers alone would "
                       f"say {c.numbers_say or '-'}, but the comparison does not test what the variant claims")
    out += [f"- note: {n}" for n in c.notes]
    return out + [""]


def _failed_md(inp: ReportInput) -> list[str]:
    failed = failed_runs(inp.runs)
    if not failed:
        return ["None."]
    md = [md_table(["run", "class", "exit", "error"], [[f["run"], f["class"], f["exit"], f["error"]] for f in failed])]
    for f in failed:
        if f["tail"]:
            md += ["", f"Last lines of the log of {f['run']} ({f['log']}):", "", "```text",
                   f["tail"].replace("```", "'''"), "```"]
    return md


def _sources_md(runs: pd.DataFrame, metric: str) -> list[str]:
    """Per run with a final `metric`: where it was read (a zero-glue run: file, column and row, or the stdout
    line, and that it is the last value reported), or that the script's run.finish() reported it."""
    final, source = f"final_{metric}", f"source_{metric}"
    if final not in runs:
        return [f"No run has a final `{metric}` yet."]
    api = "run.finish() (the run API)"
    have = runs[runs[final].notna()]                  # column-wise: no per-run row objects at 10,000 runs
    wheres = have[source].tolist() if source in have else [None] * len(have)
    rows = [[f"{v}/seed_{s}", fmt(x), w if isinstance(w, str) else api]
            for v, s, x, w in zip(have["variant"].tolist(), have["seed"].tolist(), have[final].tolist(), wheres)]
    if all(row[2] == api for row in rows):
        return [f"Every run reported `{metric}` with run.finish() (the run API)."]
    return [f"The final `{metric}` of each run is the last value it reported; where it was read:", "",
            md_table(["run", metric, "read from"], rows)]


def _fingerprint_md(runs: pd.DataFrame) -> list[str]:
    keys = [k for k in ("corpus_hash",) + verdict.ENV_KEYS if f"fp_{k}" in runs]
    if not keys:
        return ["No fingerprints yet (no run has a summary)."]
    rows = []
    for variant, g in runs.groupby("variant", sort=False):
        cells = []
        for k in keys:
            counts = g[f"fp_{k}"].dropna().astype(str).value_counts()
            cells.append(", ".join(f"{v} ({n})" for v, n in counts.items()) or "-")
        rows.append([variant] + cells)
    mixed = [k for k in keys if runs[f"fp_{k}"].dropna().astype(str).nunique() > 1]
    verdict_line = (f"Differences across runs: {', '.join(mixed)}: such runs are not pooled silently; each "
                    "comparison lists the ones that touch it." if mixed else
                    "Every run shares corpus, library versions, device, threads and determinism settings.")
    return [md_table(["variant"] + keys, rows), "", verdict_line]


def _methods_md(inp: ReportInput, plots: bool) -> list[str]:
    an = inp.analysis
    import scipy  # deferred: scipy, only when this runs

    versions = [f"python {platform.python_version()}", f"numpy {np.__version__}", f"scipy {scipy.__version__}",
                f"pandas {pd.__version__}"]
    if plots:
        import matplotlib  # deferred: matplotlib (about 0.5 s), only when this runs

        versions.append(f"matplotlib {matplotlib.__version__}")
    drivers = [f"- {c.variant} vs {c.baseline}: the {c.primary.name} drives the verdict ({c.design} design), "
               f"because {c.driver_why}; robustness check: {c.robustness.name}"
               for c in an.comparisons if c.primary is not None]
    doc = docstring(verdict)
    rule = doc[doc.index("1. Outcome"):].strip()
    return [f"- decision metric: final `{an.metric}` of each seed (the final metrics of the run's summary: the "
            f"last evaluation, never the best over training), {'lower' if an.lower_is_better else 'higher'} is better",
            f"- alpha {an.alpha} two-sided, Holm over {len(an.comparisons)} comparison(s); at least {an.min_seeds} "
            f"usable seeds per arm", f"- bootstrap: {an.n_resamples} resamples, RNG seed {an.seed}, BCa interval "
            "for the difference (percentile when BCa is undefined), percentile interval for P(better); every "
            "resample drawn at once (no loop per resample)",
            f"- permutation tests: exact enumeration up to 20,000 splits (2^12 sign patterns) for the deciding "
            f"test, else {an.n_resamples} Monte Carlo arrangements with p = (hits + 1) / (resamples + 1), RNG seed "
            f"{an.seed}", "- power: two-sided t-test (noncentral t), 80%, at alpha / m, with the sd on the deciding "
            "test's scale", *drivers, "",
            "Decision rule (from sweeper/analysis/verdict.py):", "", "```", rule, "```", "",
            "Library versions: " + ", ".join(versions) + "."]


def markdown(inp: ReportInput, plot_paths: dict[str, Path] | None, out_dir: Path) -> str:
    an = inp.analysis
    per_seed_header, per_seed = per_seed_rows(inp)
    variants = [[a.variant, a.planned, a.usable, a.failed, a.diverged, a.incomplete, fmt(a.summary["mean"]),
                 fmt(a.summary["sd"], 3), fmt(a.summary["median"]), fmt(a.summary["iqm"]),
                 f"{fmt(a.mean_ci.low)} to {fmt(a.mean_ci.high)}",
                 ", ".join(f"{k} {v}" for k, v in sorted(a.health.items()))
                 + (f" (failing: {', '.join(a.health_failed)})" if a.health_failed else "")]
                for a in an.arms.values()]
    md = [f"# {inp.title}", "", *[f"{h}  " for h in inp.header], "", "## Decision", "",
          md_table(DECISION_HEADER, decision_rows(an)), ""]
    md += [f"- **{c.variant} vs {c.baseline}: {c.verdict}**: {c.reason}" for c in an.comparisons]
    md += [f"- **{line}**" for line in health_lines(an)]
    md += ["", f"**{headline(an)}**"]
    for metric, sec in inp.secondary.items():
        md += ["", f"### Secondary metric: {metric} ({'lower' if sec.lower_is_better else 'higher'} is better)", "",
               "Its own Holm family; it never enters the decision above.", "",
               md_table(SECONDARY_HEADER, secondary_rows(sec))]
    md += ["", "## Checks across runs", "", *report_integrity.markdown_section(inp.findings, inp.coverage)]
    md += ["", "## What each variant changes", "",
           *report_changes.markdown_section(inp.changes, inp.declared, _baseline(inp),
                                            inp.experiment.notes if inp.experiment else None)]
    md += ["", "## Per-seed values", "", f"Final `{an.metric}` per seed; runs without one show their status.", "",
           md_table(per_seed_header, per_seed), "", "## Where each final came from", "",
           *_sources_md(inp.runs, an.metric), "", "## Failed runs", "", *_failed_md(inp), "", "## Variants", "",
           md_table(["variant", "planned", "usable", "failed", "diverged", "not finished", "mean", "sd", "median",
                     "IQM", f"{an.confidence:.0%} CI of mean", "health"], variants), "", "## Comparisons", ""]
    for c in an.comparisons:
        md += _comparison_md(c, an)
    md += ["## Plots", ""]
    if plot_paths:
        md += [f"![{name}]({p.relative_to(out_dir).as_posix()})" for name, p in plot_paths.items()]
    else:
        md += ["Plots were not requested (--no-plots)."]
    md += ["", "## Fingerprints", "", *_fingerprint_md(inp.runs), "", "## Methods", "",
           *_methods_md(inp, bool(plot_paths)), "", "## Problems reading the sweep", ""]
    md += [f"- {p}" for p in inp.problems] or ["None."]
    return "\n".join(md) + "\n"
