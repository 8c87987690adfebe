"""All the project's code a run executes (issue 45 item 7): every project source file a run imported is hashed into
its fingerprint (code_files), mixed_code compares them, and `sweeper.extend=true` onto an edited module warns naming
it. The project folder is not a git checkout: the script itself is unchanged, only a module it imports is edited.

    python -m pytest -q -n 0 tests/test_code_files.py
"""
from __future__ import annotations

import json

import pytest

from sweeper.analysis.integrity import COVERAGE, SweepEvidence
from sweeper.analysis.results import load_experiment, load_manifest, load_runs
from tests.helpers.integrity_evidence_projects import findings_of, make_project, sweep

pytestmark = pytest.mark.slow
HELPER = "SCALE = 1.0\n"


def project_with_module(tmp_path, level):
    project = make_project(tmp_path, level, extra="import helpers_np\nw = w * helpers_np.SCALE")
    (project / "helpers_np.py").write_text(HELPER)
    return project


def summary_files(sweep_dir, variant="base", seed=0) -> dict:
    summary = json.loads((sweep_dir / "runs" / variant / f"seed_{seed}" / "summary.json").read_text())
    return summary["fingerprint"]["code_files"]


@pytest.mark.parametrize("level", ["command", "api"])
def test_an_imported_module_edited_before_extend_is_named(tmp_path, level):
    project = project_with_module(tmp_path, level)
    proc, sweep_dir = sweep(project, "seeds=0-1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = summary_files(sweep_dir)
    assert {"train_np.py", "helpers_np.py"} <= set(files), files
    assert findings_of(sweep_dir) == []
    (project / "helpers_np.py").write_text(HELPER + "# edited, same numbers\n")
    proc, _ = sweep(project, "seeds=0-2", "sweeper.extend=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "onto changed code (project files changed: helpers_np.py)" in proc.stderr, proc.stderr[-3000:]
    [found] = [f for f in findings_of(sweep_dir) if f.check == "mixed_code"]
    assert "project files helpers_np.py differ" in found.message and "helpers_np.py: " in found.evidence, found
    assert set(found.variants) == {"base", "wide"}


def test_mixed_code_coverage_counts_the_runs_that_recorded_files(tmp_path):
    project = project_with_module(tmp_path, "api")
    proc, sweep_dir = sweep(project, "seeds=0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = load_manifest(sweep_dir)
    experiment, _ = load_experiment(sweep_dir, manifest)
    cover = COVERAGE["mixed_code"](SweepEvidence(sweep_dir, experiment, load_runs(sweep_dir, manifest),
                                                 curves=None))
    assert cover.checked and "2 of 2 runs recorded their commit or script, 2 their project files" in cover.evidence
