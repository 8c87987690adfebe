"""The evidence table of the checks across runs (issue 45 item 11): what each check had on this sweep, shown
wherever findings show (the terminal names the checks that could not run, report.md / report.html has a table,
SWEEP_DIR/integrity.json records it), so a report never implies that a check passed when it could not run.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_integrity_coverage.py
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweeper.analysis.integrity import COVERAGE, Coverage, sweep_coverage
from sweeper.analysis.integrity.records.isolation import isolation_coverage
from sweeper.report.integrity import markdown_section
from sweeper.report.tables import integrity_lines
from sweeper.run.files.isolation import IsolationRecord, write_isolation
from tests.helpers.integrity_evidence_projects import make_project, sweep, user_env
from tests.test_integrity_evidence_checks import evidence, grid

COVERED = Coverage("shared_state", "4 of 4 ended runs recorded what they changed", True)
BLIND = Coverage("nondeterminism", "no A/A control and no determinism probe: not checked", False)


def test_the_isolation_checks_and_several_concerns_register_their_coverage():
    assert {"shared_checkpoint", "writes_outside_run_dir", "shared_state", "several_concerns"} <= set(COVERAGE)


def test_isolation_coverage_counts_the_runs_that_recorded_and_says_not_checked_when_none_did(tmp_path):
    rows = grid({"base": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0, 1))
    cover = isolation_coverage("shared_state")
    assert cover(evidence(rows, tmp_path)) == Coverage(
        "shared_state", "none of 4 ended runs recorded what it changed in the project folder; 4 recorded nothing "
        "(started outside sweeper's run wrappers, or the record is damaged): not checked", False)
    write_isolation(tmp_path / "runs" / "base" / "seed_0", IsolationRecord(str(tmp_path), 0.0, 1.0))
    write_isolation(tmp_path / "runs" / "wide" / "seed_0", IsolationRecord(str(tmp_path), 0.0, 1.0, watched=False))
    assert cover(evidence(rows, tmp_path)).evidence == (
        "1 of 4 ended runs recorded what they changed in the project folder (isolation.json); 1 in a folder too big "
        "to watch; 2 recorded nothing (started outside sweeper's run wrappers, or the record is damaged)")
    names = [c.check for c in sweep_coverage(evidence(rows, tmp_path))]
    assert names.index("shared_checkpoint") < names.index("shared_state") < names.index("several_concerns")


def test_the_terminal_names_the_checks_that_could_not_run_even_on_a_quiet_sweep():
    assert integrity_lines([], [COVERED]) == []
    lines = integrity_lines([], [COVERED, BLIND])
    assert lines == ["", "not checked on this sweep (the evidence was missing; docs/sweep-integrity.md):",
                     "  nondeterminism: no A/A control and no determinism probe: not checked"]


def test_report_md_has_the_evidence_table_and_never_calls_a_blind_check_passed():
    md = "\n".join(markdown_section([], [COVERED, BLIND]))
    assert md.startswith("None: no check found anything (")
    assert "; 1 could not run on this sweep (nondeterminism): see the evidence table." in md
    assert "| check | evidence | checked |" in md
    assert "| nondeterminism | no A/A control and no determinism probe: not checked | **no: not checked** |" in md
    assert "| shared_state | 4 of 4 ended runs recorded what they changed | yes |" in md
    assert markdown_section(None, None)[0].startswith("Not run for a comparison of two sweeps")


@pytest.mark.slow
def test_runs_that_recorded_nothing_are_shown_not_checked_by_the_report_command(tmp_path):
    """A sweep through the real CLI, then its isolation records gone (runs started outside sweeper's wrappers
    look the same): `python -m sweeper.report` names the isolation checks as not checked everywhere."""
    project = make_project(tmp_path, "command", command=["python", "train_np.py", "--out", "{out_dir}"])
    proc, sweep_dir = sweep(project, "seeds=0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((sweep_dir / "integrity.json").read_text())
    checked = {c["check"]: c["checked"] for c in record["coverage"]}
    assert checked["shared_state"] and checked["several_concerns"] and record["findings"] == []
    assert "| shared_state | 2 of 2 ended runs recorded what they changed in the project folder (isolation.json) " \
           "| yes |" in (sweep_dir / "report.md").read_text()
    for path in sweep_dir.glob("runs/*/seed_0/isolation.json"):
        path.unlink()
    again = subprocess.run([sys.executable, "-m", "sweeper.report", str(sweep_dir)], cwd=project, env=user_env(),
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    blind = ("none of 2 ended runs recorded what it changed in the project folder; 2 recorded nothing (started "
             "outside sweeper's run wrappers, or the record is damaged): not checked")
    assert f"  shared_state: {blind}" in again.stdout and f"  shared_checkpoint: {blind}" in again.stdout
    assert "not checked on this sweep" in again.stdout
    md = (sweep_dir / "report.md").read_text()
    assert f"| shared_state | {blind} | **no: not checked** |" in md
    unchecked = md.split(" could not run on this sweep (", 1)[1].split(")", 1)[0].split(", ")  # other checks too
    assert {"shared_checkpoint", "writes_outside_run_dir", "shared_state"} <= set(unchecked), unchecked
    page = (sweep_dir / "report.html").read_text()
    assert f"<td>shared_state</td><td>{blind.replace(chr(39), '&#x27;')}</td><td><strong>no: not checked</strong>" \
        in page
    record = json.loads((sweep_dir / "integrity.json").read_text())
    assert {"check": "shared_state", "evidence": blind, "checked": False} in record["coverage"]
