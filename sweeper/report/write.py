"""Writing a sweep's report into its dir: report.md, report.html, summary.csv, integrity.json (the checks across
runs: findings and what evidence each check had), plots/*.png, the journal entry.

    text = report_sweep(sweep_dir, options)            # what every sweep ends with; the terminal text is returned
    text = compare_sweeps(new_dir, old_dir, options)   # `python -m sweeper.report NEW --against OLD`

`options` is the sweep's sweeper.decision (a sweeper.config.decision.DecisionOptions) or the report's flags
(ReportFlags: over what the sweep recorded).

Every variant is compared with the experiment's baseline, metric and direction as the manifest records them;
baseline / metric / lower_is_better override them (a Hydra multirun's manifest may record none). The statistics
and the decision rule are in sweeper.analysis.verdict (its docstring is printed in the Methods section of
report.md). Files are only read (sweeper.analysis.results): a damaged run file is a WARNING line naming it, a
damaged manifest is exit status 2. Runs of a Slurm sweep whose jobs ended without a word stay running/pending
here until `python -m sweeper.slurm status SWEEP_DIR` settles them (the report says so; it never asks Slurm).
"""
from __future__ import annotations

from pathlib import Path

import sweeper.report.integrity as report_integrity
import sweeper.report.journal as journal_mod
from sweeper.analysis.analyze import ReportInput, analyze_sweep
from sweeper.analysis.compare import analyze_pair
from sweeper.config.decision import DecisionOptions, ReportFlags
from sweeper.errors import os_error_line
from sweeper.report.html import write_html
from sweeper.report.looks import add_looks
from sweeper.report.markdown import markdown, summary_frame
from sweeper.report.plots import write_plots
from sweeper.report.tables import decision_text, headline
from sweeper.run.files.atomic import atomic_write_text
from sweeper.run.files.reading import UnreadableFile


def write_report(inp: ReportInput, out_dir: str | Path, plots: bool = True, unwritten: list | None = None) -> str:
    """Write report.md, report.html, summary.csv, integrity.json (and plots/) into out_dir; return the decision
    table as text. Each file is written on its own: one that cannot be written (a read-only dir, a full disk) is
    named in the text (and appended to `unwritten`), the others are still written, and the decision table is always
    returned."""
    out_dir = Path(out_dir)
    failed: list[str] = []
    plot_paths = _written(failed, out_dir / "plots", lambda: _plots(out_dir / "plots", inp, failed)) if plots \
        else None
    _written(
        failed,
        out_dir / "summary.csv",
        lambda: atomic_write_text(
            out_dir / "summary.csv",
            summary_frame(inp.analysis, inp.secondary, inp.changes, inp.declared).to_csv(index=False),
        ),
    )
    _written(failed, out_dir / report_integrity.INTEGRITY, lambda: report_integrity.write_record(inp, out_dir))
    text = markdown(inp, plot_paths, out_dir)
    if _written(failed, out_dir / "report.md", lambda: atomic_write_text(out_dir / "report.md", text)) is not None:
        _written(
            failed, out_dir / "report.html", lambda: write_html(text, out_dir) or True
        )  # the same report, one page
    if unwritten is not None:
        unwritten.extend(failed)
    return _with_unwritten(decision_text(inp), failed)


def _plots(plots_dir: Path, inp: ReportInput, failed: list[str]) -> dict[str, Path]:
    """Every plot that can be written; each one that cannot is named in `failed` (the others are still drawn)."""
    not_drawn: list[tuple[Path, OSError]] = []
    paths = write_plots(plots_dir, inp.curves, inp.analysis, failed=not_drawn)
    for path, e in not_drawn:
        line = os_error_line(e)
        failed.append(line if str(path) in line else f"{path}: {line}")
    return paths


def _written(failed: list[str], path: Path, write):
    """write()'s result, or None after naming in `failed` why `path` could not be written (OSError)."""
    try:
        result = write()
    except OSError as e:
        line = os_error_line(e)
        failed.append(line if str(path) in line else f"{path}: {line}")
        return None
    return True if result is None else result


def _with_unwritten(text: str, failed: list[str]) -> str:
    if not failed:
        return text
    return text + "\n" + "\n".join(f"WARNING: not written: {line}" for line in failed)


def report_sweep(
    sweep_dir: str | Path,
    options: DecisionOptions | ReportFlags,
    plots: bool = True,
    baseline: str | None = None,
    metric: str | None = None,
    lower_is_better: bool | None = None,
    journal: str | None = None,
    unwritten: list | None = None,
) -> str:
    """Write report.md, summary.csv and plots/*.png into sweep_dir and record the sweep's entry in the journal
    (sweeper.journal: `journal` is a folder, `off`, or None for the folder holding the sweep dir); return the
    terminal text (decision table, failed runs, one WARNING line per damaged file and per file not written:
    those are also appended to `unwritten`)."""
    inp = analyze_sweep(sweep_dir, options, baseline, metric, lower_is_better)   # reads the manifest, once
    failed: list[str] = []
    text = write_report(inp, sweep_dir, plots, failed)
    looks = _written(failed, Path(sweep_dir) / "report.md", lambda: add_looks(sweep_dir, text))  # seeds=adaptive
    text = looks if isinstance(looks, str) else text
    if unwritten is not None:
        unwritten.extend(failed)
    if journal is None:  # the journal the sweep was started with, if it named one
        journal = inp.manifest.extra.get("journal") if inp.manifest is not None else None
    folder = journal_mod.journal_dir(sweep_dir, journal)
    if folder is None:
        return text
    try:
        page = journal_mod.record(folder, journal_mod.entry_of(inp, sweep_dir, inp.code, headline(inp.analysis)))
    except UnreadableFile as e:
        return _before_notes(text, f"WARNING: the journal was not updated: {e}")
    except OSError as e:
        return _before_notes(text, f"WARNING: the journal was not updated: {os_error_line(e)}")
    return _before_notes(text, f"journal: {page}")


def compare_sweeps(
    new_dir: str | Path,
    old_dir: str | Path,
    options: DecisionOptions | ReportFlags,
    plots: bool = True,
    metric: str | None = None,
    lower_is_better: bool | None = None,
    any_experiment: bool = False,
    unwritten: list | None = None,
) -> str:
    """Write report.md, summary.csv and plots into NEW/compare_vs_<old name>/; return the decision table text."""
    inp = analyze_pair(new_dir, old_dir, options, metric, lower_is_better, any_experiment=any_experiment)
    out_dir = Path(new_dir) / f"compare_vs_{Path(old_dir).resolve().name}"
    failed: list[str] = []
    if _written(failed, out_dir, lambda: out_dir.mkdir(parents=True, exist_ok=True)) is None:
        if unwritten is not None:
            unwritten.extend(failed)
        return _with_unwritten(decision_text(inp), failed)
    return write_report(inp, out_dir, plots, unwritten)


def _before_notes(text: str, line: str) -> str:
    """Add `line` to the terminal text above its closing `note:` lines (what to do next stays last)."""
    lines = text.splitlines()
    end = len(lines)
    while end and lines[end - 1].startswith("note: "):
        end -= 1
    return "\n".join(lines[:end] + [line] + lines[end:])
