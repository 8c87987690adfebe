"""The checks on what runs used, through the real CLI on tiny projects (tests/helpers/usage_projects.py): a key a
variant sets that no run read (key_never_read), a budget moved through examples per step (budget_confound from
the compute ledger), an evaluation of another size (evaluation_identity), a debug limit left on the training data
(train_subset) and a generator handed out and never drawn from (generator_unused: no "paired by seed" claim);
each at the integration levels where the evidence exists, beside its healthy twin, which stays quiet.

    python -m pytest -q -n 0 tests/test_integrity_usage_cli.py
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.usage_projects import CASES, make_project, sweep

pytestmark = pytest.mark.slow
PAIRED = "paired by seed: both arms drew their data order from the run's seed stream"


def swept(tmp_path, level: str, name: str) -> tuple[str, str]:
    project = make_project(tmp_path / "p", level, CASES[name], name)
    proc = sweep(project, "seeds=0-2")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return out, (project / "sweeps" / "use" / "report.md").read_text()


@pytest.mark.parametrize("level, name", [("api", "unread_key"), ("api", "examples_per_step"),
                                         ("plain", "examples_per_step"), ("plain", "eval_size"),
                                         ("api", "debug_limit"), ("api", "generator_unused")])
def test_each_bug_is_named_by_its_check(tmp_path, level, name):
    check = CASES[name].check
    out, md = swept(tmp_path, level, name)
    assert f"  {check} [" in out, out[-3000:]
    section = md[md.index("## Checks across runs"):md.index("## What each variant changes")]
    assert f"| {check} |" in section, section
    verdict = [line for line in out.splitlines() if line.startswith("big vs base: ")][0]
    if check in ("budget_confound", "evaluation_identity"):      # the verdict says why it is not comparable
        assert check in verdict and "not comparable" in verdict.lower(), verdict
    if check == "key_never_read":
        assert "dropout" in out.split(f"  {check} [")[1].splitlines()[0]
    if check == "generator_unused":                   # the pairing claim is gone, not false
        assert PAIRED not in md and "data_order" in out.split(f"  {check} [")[1].splitlines()[0]


@pytest.mark.parametrize("level, name", [("api", "read_key"), ("plain", "same_budget"), ("api", "same_budget")])
def test_the_healthy_twins_are_quiet(tmp_path, level, name):
    out, md = swept(tmp_path, level, name)
    assert "checks across runs" not in out and "## Checks across runs\n\nNone: no check found anything" in md, \
        out[-3000:]
    runs = tmp_path / "p" / "sweeps" / "use" / "runs"
    used = json.loads((runs / "big" / "seed_0" / "summary.json").read_text())["used"]
    assert used["examples"] == 160 and used["steps"] == 40 and used["eval_size"] == 64, used
    if level == "api":                                # what the run API saw: the keys read, the generator drawn
        assert {"lr", "dropout", "batch", "steps"} <= set(used["config_read"]) and used["generators"] == \
            {"data_order": True}
        assert PAIRED in md
    else:
        assert "config_read" not in used
