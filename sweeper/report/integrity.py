"""report.md's section on the checks across runs: what each finding read, its cause and fix, its effect on the
verdicts, and the experiment's reason when it silenced it (sweeper.analysis.integrity makes the findings; the
terminal lines are sweeper.report.tables.integrity_lines).

    markdown_section(inp.findings)   # the "Checks across runs" section (report.html renders the same markdown)
"""
from __future__ import annotations

from sweeper.analysis.integrity import CHECKS, Finding
from sweeper.report.tables import DOCS, finding_arms, finding_effect, md_table


def markdown_section(findings: list[Finding]) -> list[str]:
    names = ", ".join(c.__name__ for c in CHECKS)
    if not findings:
        return [f"None: no check found anything ({names}; {DOCS})."]
    rows = [[f.check, finding_arms(f), finding_effect(f), f.evidence, f.message, f.silenced or "-"] for f in findings]
    return [f"Checks that read every run side by side ({names}; {DOCS}). A finding's effect is the verdict of "
            "every comparison it concerns; a silenced one changes nothing.", "",
            md_table(["check", "concerns", "effect on the verdict", "evidence", "cause and fix", "silenced because"],
                     rows)]
