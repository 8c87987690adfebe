"""The checks across runs through the real CLI, on tiny projects at both integration levels (a plain argparse
script through task.command, and a script on the run API): each bug named by its check on the terminal and in
report.md, its healthy twin quiet (0 findings, exit 0); a metric whose name reads the other way warns at plan
time and its curve decides; a bad experiment.silence is refused in one line with exit status 2.

    python -m pytest -q -n 0 tests/test_integrity_cli.py
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.helpers.integrity_projects import BUGS, make_project, sweep

pytestmark = pytest.mark.slow
LEVELS = ("plain", "api")


def report_md(project) -> str:
    return (project / "sweeps" / "fit" / "report.md").read_text()


@pytest.mark.parametrize("level", LEVELS)
def test_the_healthy_project_is_quiet(tmp_path, level):
    project = make_project(tmp_path / "p", level)
    proc = sweep(project, "seeds=0-2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "checks across runs" not in out and "INTEGRITY" not in out, out[-3000:]
    assert "big vs base: " in out and "(invalid" not in out and "not comparable" not in out
    md = report_md(project)
    assert "## Checks across runs\n\nNone: no check found anything" in md
    assert "integrity_checks" in pd.read_csv(project / "sweeps" / "fit" / "summary.csv").columns


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bug", list(BUGS))
def test_each_bug_is_named_by_its_check(tmp_path, level, bug):
    _, check, _ = BUGS[bug]
    project = make_project(tmp_path / "p", level, bug)
    proc = sweep(project, "seeds=0-2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    verdicts = [line for line in out.splitlines() if line.startswith("big vs base: ")]
    assert len(verdicts) == 1 and check in verdicts[0], out[-4000:]
    assert not verdicts[0].startswith(("big vs base: BETTER", "big vs base: WORSE", "big vs base: INCONCLUSIVE"))
    assert "checks across runs: " in out and f"  {check} [" in out, out[-3000:]
    md = report_md(project)
    section = md[md.index("## Checks across runs"):md.index("## What each variant changes")]
    assert f"| {check} |" in section, section
    summary = pd.read_csv(project / "sweeps" / "fit" / "summary.csv")
    assert check in str(summary.loc[summary["variant"] == "big", "integrity_checks"].iloc[0])
    if bug == "baseline":                       # no verdict, no -inf interval, and the headline says why
        assert "No verdict against base: the baseline has no usable seed (broken_baseline" in out
        assert "-inf" not in out
    if bug == "change":                         # the keys that differ are named
        assert "hidden" in verdicts[0] and "32" in out.split(f"  {check} [")[1].splitlines()[0]
    if bug in ("budget", "early_stop"):
        assert "at the common budget (step " in out


@pytest.mark.parametrize("level", LEVELS)
def test_a_loss_declared_higher_is_better_warns_at_plan_time_and_the_curve_decides(tmp_path, level):
    project = make_project(tmp_path / "p", level)
    proc = sweep(project, "seeds=0-2", "experiment.lower_is_better=false")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    warning = [line for line in proc.stderr.splitlines() if line.startswith("sweeper: warning: ")]
    assert any("val_loss is declared higher-is-better, but its name reads like a loss" in w
               and "experiment.confirm_direction=true" in w for w in warning), proc.stderr[-2000:]
    verdicts = [line for line in out.splitlines() if line.startswith("big vs base: ")]
    assert len(verdicts) == 1 and "metric_direction" in verdicts[0], out[-3000:]   # the falling curve decides
    bad = sweep(project, "seeds=0-2", "+experiment.silence={seeds_no_efect: typo}")
    err = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(err) == 1 and "seeds_no_effect, change_no_effect" in err[0], err


def test_a_silenced_check_is_printed_with_its_reason_and_changes_no_verdict(tmp_path):
    project = make_project(tmp_path / "p", "plain", "budget")
    proc = sweep(project, "seeds=0-2", "+experiment.silence={budget_confound: 'a compute-scaling study'}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "budget_confound [silenced: a compute-scaling study]" in out
    verdict = [line for line in out.splitlines() if line.startswith("big vs base: ")][0]
    assert verdict.startswith(("big vs base: BETTER", "big vs base: WORSE", "big vs base: INCONCLUSIVE")), verdict
    manifest = json.loads((project / "sweeps" / "fit" / "sweep.json").read_text())
    assert manifest["experiment"]["silence"] == {"budget_confound": "a compute-scaling study"}
    assert "a compute-scaling study" in report_md(project)
