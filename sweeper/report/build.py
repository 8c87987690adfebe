"""The decision report of a sweep: report.md, summary.csv and plots/*.png in the sweep dir, table on the terminal.

    python -m sweeper.report SWEEP_DIR                      # finished, partial or interrupted sweep
    python -m sweeper.report NEW_SWEEP --against OLD_SWEEP  # same variants, new vs old (see sweeper.analysis.compare)
    python -m sweeper.report SWEEP_DIR --no-plots --alpha 0.05 --min-seeds 3 --resamples 10000 --seed 0
    python -m sweeper.report MULTIRUN_DIR --baseline 'lr=0.001' --metric acc --higher-is-better

    from sweeper.report.build import report_sweep
    text = report_sweep(sweep_dir, plots=True)   # what the sweep CLI calls at the end of every sweep

Every variant is compared with the experiment's baseline, metric and direction as the manifest records them;
--baseline / --metric / --higher-is-better / --lower-is-better override them (a Hydra multirun's manifest may
record none: with more than one variant the report then asks for --baseline). The statistics and the decision
rule are in sweeper.analysis.verdict (its docstring is printed in the Methods section of report.md). Files are only read
(sweeper.analysis.results): a damaged run file is a WARNING line naming it, a damaged manifest is exit status 2.
Runs of a Slurm sweep whose jobs ended without a word stay running/pending here until
`python -m sweeper.slurm status SWEEP_DIR` settles them (the report says so; it never asks Slurm itself).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import sweeper.report.changes as report_changes
import sweeper.analysis.verdict as verdict
from sweeper.errors import UsageError
from sweeper.analysis.results import (MISSING, declared_changes, load_curves, load_experiment, load_runs,
                             load_code_state, load_manifest, load_variant_changes)
from sweeper.run.atomic import atomic_write_text
from sweeper.run.rundir import LOG, STALE, Experiment, Status, UnreadableFile, stale_hint

SECTIONS = ("Decision", "What each variant changes", "Per-seed values", "Failed runs", "Variants", "Comparisons",
            "Plots", "Fingerprints", "Methods", "Problems reading the sweep")
SLURM_RECORD = "slurm.json"           # written by the Slurm backend (sweeper.backends.slurm.backend) beside the manifest
SHOWN_FAILURES = 10                   # failed runs listed on the terminal (report.md lists all)


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


def fmt(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, (float, np.floating)):
        return "inf" if math.isinf(x) and x > 0 else "-inf" if math.isinf(x) else f"{x:.{digits}g}"
    return str(x)


def _signed(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:+.3g}"


# ----------------------------------------------------------------------------- tables
def decision_rows(an: verdict.Analysis) -> list[list[str]]:
    by_variant = {c.variant: c for c in an.comparisons}
    rows = []
    for arm in an.arms.values():
        c = by_variant.get(arm.variant)
        role = f"vs {c.baseline}" if c else "baseline" if any(x.baseline == arm.variant for x in an.comparisons) else ""
        cells = [arm.variant, role, f"{arm.usable}/{arm.planned}", str(arm.lost),
                 f"{fmt(arm.summary['mean'])} ± {fmt(arm.summary['sd'], 2)}"]
        if c and c.delta is not None:
            d = c.delta
            cells += [f"{_signed(d.estimate)} {_interval(c.decision_ci)}", _level(c), f"[{_signed(d.low)}, "
                      f"{_signed(d.high)}]", f"{c.p_better.estimate:.2f}", f"{c.primary.name}",
                      fmt(c.primary.pvalue, 3), fmt(c.p_adjusted, 3), verdict_cell(c)]
        elif c:
            cells += ["-", "-", "-", "-", "-", "-", "-", verdict_cell(c)]
        else:
            cells += [""] * 8
        rows.append(cells + [health_cell(arm)])
    return rows


def _interval(ci) -> str:
    return f"[{_signed(ci.low)}, {_signed(ci.high)}]" if ci is not None else "[-, -]"


def _level(c) -> str:
    """The decision interval's level: 1 - the alpha of the Holm step that decided (or would decide) it."""
    ci = c.decision_ci
    return f"{ci.confidence:.1%}".replace(".0%", "%") if ci is not None and np.isfinite(ci.confidence) else "-"


def verdict_cell(c) -> str:
    """'better', ..., or 'invalid: health checks failed (gradient_flow, ...)' for a health-failed comparison."""
    if c.verdict == "invalid":
        return f"invalid: health checks failed ({', '.join(c.invalid_checks) or 'see health'})"
    return c.verdict


def health_cell(arm) -> str:
    """The health verdicts of a variant's runs, failures first: 'FAIL 4/4 (gradient_flow)', 'pass 4/4'."""
    counts, total = arm.health, sum(arm.health.values())
    for status in ("fail", "warn"):
        if counts.get(status):
            label = status.upper() if status == "fail" else status
            named = f" ({', '.join(arm.health_failed)})" if status == "fail" and arm.health_failed else ""
            return f"{label} {counts[status]}/{total}{named}"
    return f"pass {counts['pass']}/{total}" if counts.get("pass") else "not checked"


def health_lines(an: verdict.Analysis) -> list[str]:
    """One line per variant whose runs failed health checks: its numbers are not to be trusted as they stand."""
    return [f"health: {a.variant} FAILED {', '.join(a.health_failed) or 'a health check'} in {a.health['fail']} "
            f"run(s); see each run's health.json before trusting its numbers"
            for a in an.arms.values() if a.health.get("fail")]


DECISION_HEADER = ["variant", "role", "usable", "lost", "mean ± sd", "Δ [decision CI]", "CI level",
                   "bootstrap 95% CI (secondary)", "P(better)", "driving test", "p", "p (Holm)", "verdict", "health"]
TERMINAL_LEAVES_OUT = ("bootstrap 95% CI (secondary)", "p")      # report.md keeps them: the terminal stays narrow
SECONDARY_HEADER = ["variant", "vs", "mean ± sd", "Δ [decision CI]", "CI level", "p (Holm, own family)", "verdict"]


def secondary_rows(an: verdict.Analysis) -> list[list[str]]:
    """One row per variant of a secondary metric: its mean, and its comparison in the metric's own family."""
    by_variant = {c.variant: c for c in an.comparisons}
    rows = []
    for arm in an.arms.values():
        c = by_variant.get(arm.variant)
        mean = f"{fmt(arm.summary['mean'])} ± {fmt(arm.summary['sd'], 2)}"
        if c is not None and c.delta is not None:
            rows.append([arm.variant, c.baseline, mean, f"{_signed(c.delta.estimate)} {_interval(c.decision_ci)}",
                         _level(c), fmt(c.p_adjusted, 3), c.verdict])
        else:
            rows.append([arm.variant, c.baseline if c else "", mean, "-", "-", "-", c.verdict if c else ""])
    return rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return "\n".join(["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(map(esc, r)) + " |" for r in rows])


def decision_text(inp: ReportInput) -> str:
    """What the terminal shows: the decision table, one line per verdict, failed runs, then warnings."""
    an = inp.analysis
    keep = [i for i, h in enumerate(DECISION_HEADER) if h not in TERMINAL_LEAVES_OUT]
    verdict_at, health_at = DECISION_HEADER.index("verdict"), DECISION_HEADER.index("health")
    short = {verdict_at: lambda v: "invalid" if v.startswith("invalid") else v,   # the `health:` line below names
             health_at: lambda v: v.split(" (")[0]}                               # the failed checks
    rows = [[short.get(i, str)(str(r[i])) for i in keep] for r in decision_rows(an)]
    lines = [inp.title, *inp.header, "", text_table([DECISION_HEADER[i] for i in keep], rows)]
    levels = sorted({_level(c) for c in an.comparisons if c.decision_ci is not None})
    if levels:
        lines.append(f"CI level: the decision interval is the deciding test inverted at its Holm step's level, "
                     f"1 - {an.alpha:g}/(comparisons not yet decided)" + (
                         f", hence {' / '.join(levels)} from row to row" if len(levels) > 1 else "") +
                     "; it excludes 0 exactly when the verdict is better or worse (bootstrap 95% CI and raw p: "
                     "report.md)")
    lines.append("")
    lines += [f"{c.variant} vs {c.baseline}: {c.verdict.upper()}: {c.reason}" for c in an.comparisons]
    lines += report_changes.terminal_lines(inp.changes, inp.declared, _baseline(inp))
    for metric, sec in inp.secondary.items():
        lines.append(f"secondary {metric} ({'lower' if sec.lower_is_better else 'higher'} is better, own Holm "
                     f"family): " + "; ".join(f"{c.variant} {_signed(c.delta.estimate)} {_interval(c.decision_ci)} "
                                              f"{c.verdict}" if c.delta is not None else f"{c.variant} {c.verdict}"
                                              for c in sec.comparisons))
    lines += health_lines(an)
    failed = failed_runs(inp.runs)
    if failed:
        lines += ["", f"failed runs ({len(failed)}):"]
        lines += [f"  {f['run']}: {f['error']}" for f in failed[:SHOWN_FAILURES]]
        if len(failed) > SHOWN_FAILURES:
            lines.append(f"  (+{len(failed) - SHOWN_FAILURES} more: see the Failed runs section of report.md)")
    lines += ["", headline(an)]
    lines += [f"WARNING: {d}" for d in inp.damaged] + inp.notes
    return "\n".join(lines)


def _baseline(inp: ReportInput) -> str:
    return inp.experiment.baseline if inp.experiment else ""


def headline(an: verdict.Analysis) -> str:
    """One sentence per baseline: which variants it beats, loses to, and cannot tell apart."""
    if not an.comparisons:
        return f"No comparison: {', '.join(an.arms) or 'no variant'} only."
    out = []
    for baseline in dict.fromkeys(c.baseline for c in an.comparisons):
        group = {v: [c.variant for c in an.comparisons if c.baseline == baseline and c.verdict == v]
                 for v in ("worse", "better", "inconclusive", "insufficient", "invalid")}
        parts = [f"beats {', '.join(group['worse'])}" if group["worse"] else "",
                 f"loses to {', '.join(group['better'])}" if group["better"] else "",
                 f"no decision vs {', '.join(group['inconclusive'] + group['insufficient'])}"
                 if group["inconclusive"] or group["insufficient"] else "",
                 f"not compared with {', '.join(group['invalid'])} (invalid: health checks failed)"
                 if group["invalid"] else ""]
        parts = [p for p in parts if p]
        subject = f"{baseline} " if parts[0].startswith(("beats", "loses")) else f"{baseline}: "
        out.append(subject + "; ".join(parts) + ".")      # the baseline is the subject of every clause
    return " ".join(out)


def _short(text: str, n: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 3] + "..."


def _error_of(row) -> str:
    """A failed run's error, or the last line of its log when the error says little."""
    error = row.error if isinstance(row.error, str) and row.error.strip() else ""
    tail = row.log_tail.splitlines()[-1] if isinstance(row.log_tail, str) and row.log_tail else ""
    if tail and tail not in error:
        return f"{error} (log: {tail})" if error else tail
    return error or "no error recorded"


def failed_runs(runs: pd.DataFrame) -> list[dict]:
    """Every failed run: its label, failure class, exit status, error and log tail."""
    out = []
    for row in runs[runs["status"] == Status.FAILED.value].itertuples() if len(runs) else []:
        out.append({"run": f"{row.variant}/seed_{row.seed}", "run_dir": row.run_dir, "error": _error_of(row),
                    "class": row.failure_class if isinstance(row.failure_class, str) else "-",
                    "exit": fmt(row.exit_code), "log": f"{row.run_dir}/{LOG}",
                    "tail": row.log_tail if isinstance(row.log_tail, str) else ""})
    return out


def per_seed_rows(inp: ReportInput) -> tuple[list[str], list[list[str]]]:
    column = f"final_{inp.analysis.metric}"
    runs = inp.runs
    last_step = (inp.curves.groupby("run_id")["step"].max().to_dict() if len(inp.curves) else {})
    variants = list(inp.analysis.arms)
    cells: dict[tuple, str] = {}
    values = runs[column].to_numpy(dtype=float) if column in runs else np.full(len(runs), np.nan)
    for row, value in zip(runs.itertuples(), values):
        status = row.status
        if status == Status.FINISHED and np.isfinite(value):
            text = fmt(float(value), 5)
        elif status == Status.FINISHED:
            text = "finished, no finite metric"
        else:
            step, resume = last_step.get(row.run_id), getattr(row, "resume_step", None)
            if resume is not None and not (isinstance(resume, float) and math.isnan(resume)):
                text = f"{status}, resumes from step {int(resume)}"     # its checkpoint, not its last log line
            else:
                text = status + (f" @ step {int(step)}" if step is not None and status != MISSING else "")
            if status == Status.FAILED:
                text += f": {_short(_error_of(row), 60)}"
            elif status == STALE:
                text += " (the sweeper was killed; nothing runs it)"
        cells[(row.seed, row.variant)] = text
    seeds = sorted({s for s, _ in cells})
    return ["seed"] + variants, [[str(s)] + [cells.get((s, v), "-") for v in variants] for s in seeds]


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
                       invalid_checks=",".join(c.invalid_checks), design=c.design, n_pairs=c.n_pairs,
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
        if c.verdict == "invalid":
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
    import scipy

    versions = [f"python {platform.python_version()}", f"numpy {np.__version__}", f"scipy {scipy.__version__}",
                f"pandas {pd.__version__}"]
    if plots:
        import matplotlib

        versions.append(f"matplotlib {matplotlib.__version__}")
    drivers = [f"- {c.variant} vs {c.baseline}: the {c.primary.name} drives the verdict ({c.design} design), "
               f"because {c.driver_why}; robustness check: {c.robustness.name}"
               for c in an.comparisons if c.primary is not None]
    rule = verdict.__doc__[verdict.__doc__.index("1. Outcome"):].strip()
    return [f"- decision metric: final `{an.metric}` of each seed (the final metrics of the run's summary: the "
            f"last evaluation, never the best over training), {'lower' if an.lower_is_better else 'higher'} is better",
            f"- alpha {an.alpha} two-sided, Holm over {len(an.comparisons)} comparison(s); at least {an.min_seeds} "
            f"usable seeds per arm", f"- bootstrap: {an.n_resamples} resamples, RNG seed {an.seed}, BCa interval "
            "for the difference (percentile when BCa is undefined), percentile interval for P(better); every "
            "resample drawn at once (no loop per resample)",
            f"- permutation tests: exact enumeration up to 100,000 splits (2^16 sign patterns), else "
            f"{an.n_resamples} Monte Carlo arrangements with p = (hits + 1) / (resamples + 1), RNG seed {an.seed}",
            "- power: two-sided t-test (noncentral t), 80%, at alpha / m", *drivers, "",
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
    md += ["", "## What each variant changes", "",
           *report_changes.markdown_section(inp.changes, inp.declared, _baseline(inp),
                                            inp.experiment.notes if inp.experiment else None)]
    md += ["", "## Per-seed values", "", f"Final `{an.metric}` per seed; runs without one show their status.", "",
           md_table(per_seed_header, per_seed), "", "## Failed runs", "", *_failed_md(inp), "", "## Variants", "",
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


# ----------------------------------------------------------------------------- entry points
def write_report(inp: ReportInput, out_dir: str | Path, plots: bool = True) -> str:
    """Write report.md, report.html, summary.csv (and plots/) into out_dir; return the decision table as text."""
    out_dir = Path(out_dir)
    plot_paths = None
    if plots:
        from sweeper.report.plots import write_plots

        plot_paths = write_plots(out_dir / "plots", inp.curves, inp.analysis)
    atomic_write_text(out_dir / "summary.csv", summary_frame(inp.analysis, inp.secondary, inp.changes,
                                                             inp.declared).to_csv(index=False))
    text = markdown(inp, plot_paths, out_dir)
    atomic_write_text(out_dir / "report.md", text)
    from sweeper.report.html import write_html

    write_html(text, out_dir)                        # report.html: the same report, one self-contained page
    return decision_text(inp)


def resolve_experiment(exp: Experiment, sweep_dir: Path, runs: pd.DataFrame, baseline: str | None = None,
                       metric: str | None = None, lower_is_better: bool | None = None) -> Experiment:
    """The experiment the report decides on: the manifest's, with the command line's overrides; UsageError
    when a baseline (more than one variant) or a metric is needed and neither says which."""
    present = list(dict.fromkeys(runs["variant"]))
    names = ", ".join(present)
    baseline = exp.baseline if baseline is None else baseline
    if baseline and baseline not in present:
        raise UsageError(f"baseline {baseline!r} has no runs in {sweep_dir}; variants: {names}")
    if not baseline and len(present) > 1:
        raise UsageError(f"no baseline recorded for {sweep_dir}: pass --baseline VARIANT (variants: {names})")
    metric = exp.metric if metric is None else metric
    finals = sorted(c.removeprefix("final_") for c in runs.columns if c.startswith("final_"))
    if not metric:
        raise UsageError(f"no decision metric recorded for {sweep_dir}: pass --metric NAME (final metrics of its "
                         f"runs: {', '.join(finals) or 'none yet'})")
    if finals and f"final_{metric}" not in runs.columns:
        raise UsageError(f"metric {metric!r}: no run of {sweep_dir} has a final {metric}; pass --metric NAME "
                         f"(final metrics of its runs: {', '.join(finals)})")
    lower = exp.lower_is_better if lower_is_better is None else lower_is_better
    return dataclasses.replace(exp, baseline=baseline, metric=metric, lower_is_better=lower,
                               variants=dict(exp.variants), secondary_metrics=dict(exp.secondary_metrics))


def read_sweep(sweep_dir: Path, baseline: str | None = None, metric: str | None = None,
               lower_is_better: bool | None = None, need_baseline: bool = True
               ) -> tuple[Experiment, list[str], pd.DataFrame, pd.DataFrame]:
    """(experiment with the overrides, notes, runs, curves) of a sweep dir; UsageError naming a damaged
    manifest or a sweep that plans no runs. need_baseline=False: any variant will do (`--against` pairs
    equal variants of two sweeps)."""
    try:
        exp, notes = load_experiment(sweep_dir)
        runs = load_runs(sweep_dir)
    except UnreadableFile as e:
        raise UsageError(str(e)) from None
    if runs.empty:
        raise UsageError(f"sweep dir {sweep_dir} plans no runs (none in its manifest, no runs/<variant>/seed_<k>/)")
    if not need_baseline and baseline is None:
        baseline = str(runs["variant"].iloc[0])
    exp = resolve_experiment(exp, sweep_dir, runs, baseline, metric, lower_is_better)
    return exp, notes, runs, load_curves(sweep_dir, runs)


def analyze_sweep(sweep_dir: str | Path, alpha: float = 0.05, min_seeds: int = 3, n_resamples: int = 10_000,
                  seed: int = 0, baseline: str | None = None, metric: str | None = None,
                  lower_is_better: bool | None = None) -> ReportInput:
    """Read the sweep and decide. baseline / metric / lower_is_better override the manifest's experiment."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise UsageError(f"sweep dir {sweep_dir} does not exist: pass the folder holding the sweep's manifest "
                         f"and runs/")
    exp, notes, runs, curves = read_sweep(sweep_dir, baseline, metric, lower_is_better)
    recorded, _ = load_experiment(sweep_dir)          # readable: read_sweep has read it
    present = list(dict.fromkeys(runs["variant"]))
    family = [(v, exp.baseline) for v in present if v != exp.baseline] if exp.baseline else []
    secondary_exp = Experiment(exp.name, exp.baseline, exp.metric, exp.lower_is_better, dict(exp.variants),
                               exp.min_effect, {m: d for m, d in exp.secondary_metrics.items()
                                                if f"final_{m}" in runs.columns and m != exp.metric},
                               design=exp.design)
    missing = sorted(m for m in exp.secondary_metrics if f"final_{m}" not in runs.columns)
    an, secondary = verdict.analyze_all(runs, secondary_exp, family, alpha=alpha, min_seeds=min_seeds,
                                        n_resamples=n_resamples, seed=seed)
    counts = runs["status"].value_counts()
    header = [f"sweep: {sweep_dir}", f"metric: final {exp.metric} ({'lower' if exp.lower_is_better else 'higher'} "
              f"is better); baseline: {exp.baseline or 'none (one variant)'}; alpha {alpha}, Holm over "
              f"{len(family)} comparison(s)",
              "runs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" (of {len(runs)} planned)",
              f"written {time.strftime('%Y-%m-%d %H:%M:%S')}"]
    problems = notes + [f"{r.run_dir}: {r.problems}" for r in runs.itertuples() if r.problems]
    problems += [f"secondary metric {m}: no run has a final {m}" for m in missing]
    damaged = runs.attrs.get("damaged", []) + curves.attrs.get("damaged", [])
    stale = int((runs["status"] == STALE).sum())
    terminal = [f"note: {stale} run(s) {stale_hint(sweep_dir)}"] if stale else []
    changes, unreadable = load_variant_changes(sweep_dir, exp.baseline)
    code = load_code_state(sweep_dir)
    unreadable += code.pop("unreadable")
    declared = declared_changes(sweep_dir) if exp.baseline == recorded.baseline else {}
    if exp.hypothesis:
        header.insert(1, f"hypothesis: {exp.hypothesis}")
    return ReportInput(f"Sweep report: {exp.name}", header, runs, curves, an, problems + unreadable, damaged,
                       terminal + slurm_notes(sweep_dir, runs), secondary, changes, declared, exp, code)


def slurm_notes(sweep_dir: Path, runs: pd.DataFrame) -> list[str]:
    """A sweep launched on Slurm with runs still running/pending: how to settle jobs that ended silently."""
    if not (sweep_dir / SLURM_RECORD).is_file():
        return []
    open_runs = int(runs["status"].isin([Status.RUNNING.value, Status.PENDING.value]).sum())
    if not open_runs:
        return []
    return [f"note: {open_runs} run(s) still show running/pending; if their Slurm jobs have ended, run "
            f"`python -m sweeper.slurm status {sweep_dir}` to settle them, then report again"]


def report_sweep(sweep_dir: str | Path, plots: bool = True, alpha: float = 0.05, min_seeds: int = 3,
                 n_resamples: int = 10_000, seed: int = 0, baseline: str | None = None, metric: str | None = None,
                 lower_is_better: bool | None = None, journal: str | None = None) -> str:
    """Write report.md, summary.csv and plots/*.png into sweep_dir and record the sweep's entry in the journal
    (sweeper.journal: `journal` is a folder, `off`, or None for the folder holding the sweep dir); return the
    terminal text (decision table, failed runs, one WARNING line per damaged file)."""
    inp = analyze_sweep(sweep_dir, alpha, min_seeds, n_resamples, seed, baseline, metric, lower_is_better)
    text = write_report(inp, sweep_dir, plots)
    from sweeper.report.looks import add_looks

    text = add_looks(sweep_dir, text)                 # seeds=adaptive: the looks and their decisions
    import sweeper.report.journal as journal_mod

    if journal is None:                               # the journal the sweep was started with, if it named one
        manifest = load_manifest(sweep_dir)
        journal = manifest.extra.get("journal") if manifest is not None else None
    folder = journal_mod.journal_dir(sweep_dir, journal)
    if folder is None:
        return text
    try:
        page = journal_mod.record(folder, journal_mod.entry_of(inp, sweep_dir, inp.code, headline(inp.analysis)))
    except (UnreadableFile, OSError) as e:
        return _before_notes(text, f"WARNING: the journal was not updated: {e}")
    return _before_notes(text, f"journal: {page}")


def _before_notes(text: str, line: str) -> str:
    """Add `line` to the terminal text above its closing `note:` lines (what to do next stays last)."""
    lines = text.splitlines()
    end = len(lines)
    while end and lines[end - 1].startswith("note: "):
        end -= 1
    return "\n".join(lines[:end] + [line] + lines[end:])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sweeper.report", description=__doc__.split("\n\n")[0])
    p.add_argument("sweep_dir", help="sweep directory (holds the sweep's manifest and runs/)")
    p.add_argument("--against", metavar="OLD_SWEEP", help="compare every variant with the same variant of OLD_SWEEP")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots (faster)")
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (default 0.05)")
    p.add_argument("--min-seeds", type=int, default=3, help="usable seeds per arm below which: insufficient")
    p.add_argument("--resamples", type=int, default=10_000, help="bootstrap / Monte Carlo resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed of every resampling step (default 0)")
    p.add_argument("--baseline", metavar="VARIANT", help="the variant every other is compared with "
                   "(default: the manifest's experiment.baseline)")
    p.add_argument("--metric", metavar="NAME", help="the final metric to decide on (default: the manifest's)")
    p.add_argument("--journal", metavar="DIR", help="record the sweep's entry in DIR/journal.md + .jsonl (default: "
                   "the folder holding the sweep dir; off: no journal entry)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="lower_is_better", action="store_false", default=None,
                           help="the metric is better when higher (accuracy, reward)")
    direction.add_argument("--lower-is-better", dest="lower_is_better", action="store_true", default=None,
                           help="the metric is better when lower (loss; the default)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha {args.alpha}: accepted values are between 0 and 1, e.g. 0.05")
        if args.min_seeds < 2:
            raise UsageError(f"--min-seeds {args.min_seeds}: a t-test needs at least 2 seeds per arm")
        if args.resamples < 100:
            raise UsageError(f"--resamples {args.resamples}: use at least 100 (10000 is the default)")
        options = dict(alpha=args.alpha, min_seeds=args.min_seeds, n_resamples=args.resamples, seed=args.seed,
                       metric=args.metric, lower_is_better=args.lower_is_better)
        if args.against:
            if args.baseline is not None:
                raise UsageError("--baseline does not apply with --against (each variant is compared with the "
                                 "same variant of the other sweep)")
            from sweeper.analysis.compare import compare_sweeps

            text = compare_sweeps(args.sweep_dir, args.against, plots=not args.no_plots, **options)
        else:
            text = report_sweep(args.sweep_dir, plots=not args.no_plots, baseline=args.baseline,
                                journal=args.journal, **options)
    except UsageError as e:
        print(f"sweeper.report: error: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
