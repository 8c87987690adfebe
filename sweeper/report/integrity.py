"""report.md's section on the checks across runs, and the sweep's machine-readable record of them
(SWEEP_DIR/integrity.json, owned here): what each finding read, its cause and fix, its effect on the verdicts, the
experiment's reason when it silenced it, and what evidence each check had on this sweep (sweeper.analysis.integrity
makes the findings and the coverage; the terminal lines are sweeper.report.tables.integrity_lines).

    markdown_section(inp.findings, inp.coverage)   # the "Checks across runs" section (report.html renders it too)
    write_record(inp, sweep_dir)                   # SWEEP_DIR/integrity.json: {"findings": [...], "coverage": [...]}
"""
from __future__ import annotations

from pathlib import Path

from sweeper.analysis.analyze import ReportInput
from sweeper.analysis.integrity import CHECKS, Coverage, Finding
from sweeper.report.tables import DOCS, finding_arms, finding_effect, md_table
from sweeper.run.files.atomic import atomic_write_json

INTEGRITY = "integrity.json"


def markdown_section(findings: list[Finding] | None, coverage: list[Coverage] | None = None) -> list[str]:
    names = ", ".join(c.__name__ for c in CHECKS)
    if findings is None:
        return ["Not run for a comparison of two sweeps: each sweep's own report runs them "
                f"(`python -m sweeper.report SWEEP_DIR`; {DOCS})."]
    unchecked = [c.check for c in coverage or [] if not c.checked]
    if not findings:
        but = (f"; {len(unchecked)} could not run on this sweep ({', '.join(unchecked)}): see the evidence table"
               if unchecked else "")
        md = [f"None: no check found anything ({names}; {DOCS}){but}."]
    else:
        rows = [[f.check, finding_arms(f), finding_effect(f), f.evidence, f.message, f.silenced or "-"]
                for f in findings]
        md = [f"Checks that read every run side by side ({names}; {DOCS}). A finding's effect is the verdict of "
              "every comparison it concerns; a silenced one changes nothing.", "",
              md_table(["check", "concerns", "effect on the verdict", "evidence", "cause and fix", "silenced because"],
                       rows)]
    return md + coverage_table(coverage)


def coverage_table(coverage: list[Coverage] | None) -> list[str]:
    """What evidence each check had: a check that could not run says so (never a silent pass)."""
    if not coverage:
        return []
    rows = [[c.check, c.evidence, "yes" if c.checked else "**no: not checked**"] for c in coverage]
    return ["", "What each check had to read on this sweep (a check that could not run found nothing because it "
            "looked at nothing):", "", md_table(["check", "evidence", "checked"], rows)]


def record(inp: ReportInput) -> dict:
    """The machine-readable record: every finding and every check's coverage, as the report made them."""
    return {"findings": [f.to_dict() for f in inp.findings or []],
            "coverage": [c.to_dict() for c in inp.coverage or []]}


def write_record(inp: ReportInput, sweep_dir: str | Path) -> None:
    """SWEEP_DIR/integrity.json, atomically; nothing for a comparison of two sweeps (no checks ran)."""
    if inp.findings is not None:
        atomic_write_json(Path(sweep_dir) / INTEGRITY, record(inp))
