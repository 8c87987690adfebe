"""The report's tables and lines: the decision table, per-seed values, failed runs, the headline.

    print(decision_text(inp))                # what the terminal shows at the end of a sweep
    text_table(header, rows) / md_table(header, rows)
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

import sweeper.analysis.verdict as verdict
import sweeper.report.changes as report_changes
from sweeper.analysis.analyze import ReportInput
from sweeper.analysis.integrity import Coverage, Effect, Finding
from sweeper.analysis.results import MISSING
from sweeper.run.files.rundir import LOG
from sweeper.run.files.status_values import STALE, Status

SHOWN_FAILURES = 10                   # failed runs listed on the terminal (report.md lists all)
NO_BASELINE = Effect.NO_BASELINE.value
DOCS = "docs/sweep-integrity.md"


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
    """'better', ..., 'not comparable (budget_confound)' for a check across runs, or 'invalid: health checks failed
    (gradient_flow, ...)' for a health-failed comparison."""
    warned = f" (warning: {', '.join(c.integrity_warnings)})" if c.integrity_warnings else ""
    if c.integrity_checks:
        return f"{c.verdict} ({', '.join(c.integrity_checks)}){warned}"
    if c.verdict == "invalid":
        return f"invalid: health checks failed ({', '.join(c.invalid_checks) or 'see health'}){warned}"
    return c.verdict + warned


def health_cell(arm) -> str:
    """The health verdicts of a variant's runs, failures first: 'FAIL 4/4 (gradient_flow)', 'pass 4/4'."""
    counts, total = arm.health, sum(arm.health.values())
    for status in ("fail", "warn"):
        if counts.get(status):
            label = status.upper() if status == "fail" else status
            named = f" ({', '.join(arm.health_failed)})" if arm.health_failed else ""   # warn: a diagnosed bug
            return f"{label} {counts[status]}/{total}{named}"
    return f"pass {counts['pass']}/{total}" if counts.get("pass") else "not checked"


def health_lines(an: verdict.Analysis) -> list[str]:
    """One line per variant whose runs failed health checks: its numbers are not to be trusted as they stand."""
    return [f"health: {a.variant} FAILED {', '.join(a.health_failed) or 'a health check'} in "
            f"{a.health.get('fail') or 'its'} run(s); see each run's health.json (checks and diagnosis) before "
            f"trusting its numbers" for a in an.arms.values() if a.health.get("fail") or a.health_failed]


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
    short = {verdict_at: lambda v: "invalid" if v.startswith("invalid:") else v,   # the `health:` line below names
             health_at: lambda v: v.split(" (")[0]}                                # the failed checks
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
    lines += integrity_lines(inp.findings, inp.coverage)
    failed = failed_runs(inp.runs)
    if failed:
        lines += ["", f"failed runs ({len(failed)}):"]
        lines += [f"  {f['run']}: {f['error']}" for f in failed[:SHOWN_FAILURES]]
        if len(failed) > SHOWN_FAILURES:
            lines.append(f"  (+{len(failed) - SHOWN_FAILURES} more: see the Failed runs section of report.md)")
    lines += ["", headline(an)]
    lines += [f"WARNING: {d}" for d in inp.damaged] + inp.notes
    return "\n".join(lines)


def integrity_lines(findings: list[Finding] | None, coverage: list[Coverage] | None = None) -> list[str]:
    """The checks across runs on the terminal: each finding's check, effect, arms, evidence, then its cause and fix;
    then the checks that could not run on this sweep, with the evidence they lacked (a quiet sweep shows only
    those, so silence never reads as a pass)."""
    lines = []
    if findings:
        active = sum(f.silenced is None for f in findings)
        lines = ["", f"checks across runs: {active} finding(s)" + (f", {len(findings) - active} silenced by the "
                                                                   f"experiment" if len(findings) > active else "")
                 + f" (what each check reads: {DOCS})"]
        for f in findings:
            lines.append(f"  {f.check} [{finding_effect(f)}] ({finding_arms(f)}): {f.evidence}")
            lines.append(f"    -> {f.message}")
    unchecked = [c for c in coverage or [] if not c.checked]
    if unchecked:
        lines += ([] if findings else [""]) + [f"not checked on this sweep (the evidence was missing; {DOCS}):"]
        lines += [f"  {c.check}: {c.evidence}" for c in unchecked]
    return lines


def finding_arms(f: Finding) -> str:
    return ", ".join(f.variants) if f.variants else "every comparison"


def finding_effect(f: Finding) -> str:
    if f.silenced is not None:
        return f"silenced: {f.silenced}"
    return f.effect.value + ("; no test run" if f.untested else "")


def _baseline(inp: ReportInput) -> str:
    return inp.experiment.baseline if inp.experiment else ""


def headline(an: verdict.Analysis) -> str:
    """One sentence per baseline: which variants it beats, loses to, and cannot tell apart, and which comparisons a
    check across runs broke (their verdict and the checks), or why there is no verdict against it at all."""
    if not an.comparisons:
        return f"No comparison: {', '.join(an.arms) or 'no variant'} only."
    out = []
    for baseline in dict.fromkeys(c.baseline for c in an.comparisons):
        mine = [c for c in an.comparisons if c.baseline == baseline]
        broken = [c for c in mine if c.integrity_checks]
        if broken and all(c.verdict == NO_BASELINE for c in mine):
            checks = ", ".join(dict.fromkeys(k for c in mine for k in c.integrity_checks))
            out.append(f"No verdict against {baseline}: the baseline has no usable seed ({checks}: see checks "
                       f"across runs).")
            continue
        plain = [c for c in mine if not c.integrity_checks]
        group = {v: [c.variant for c in plain if c.verdict == v]
                 for v in ("worse", "better", "inconclusive", "insufficient", "invalid")}
        parts = [f"beats {', '.join(group['worse'])}" if group["worse"] else "",
                 f"loses to {', '.join(group['better'])}" if group["better"] else "",
                 f"no decision vs {', '.join(group['inconclusive'] + group['insufficient'])}"
                 if group["inconclusive"] or group["insufficient"] else "",
                 f"not compared with {', '.join(group['invalid'])} (invalid: health checks failed)"
                 if group["invalid"] else ""]
        for v in dict.fromkeys(c.verdict for c in broken):
            cs = [c for c in broken if c.verdict == v]
            checks = ", ".join(dict.fromkeys(k for c in cs for k in c.integrity_checks))
            parts.append(f"{v} vs {', '.join(c.variant for c in cs)} ({checks}: see checks across runs)")
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
