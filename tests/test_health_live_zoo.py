"""The live bug zoo (tests/helpers/health_live_zoo.py), issue 29: every bug is real by an independent measurement,
flagged
by the check that names its cause, and diagnosed by the run's one named diagnosis; every healthy twin trains with
no warning, no failure and the diagnosis "healthy". Two seeds each (sizes and data change with the seed).

    python -m pytest -q tests/test_health_live_zoo.py              # the slow memory case: add -m slow
"""
from __future__ import annotations

import pytest

from tests.helpers.health_live_zoo import CASES, train

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")
SEEDS = (0, 1)


def _params():
    for name, case in CASES.items():
        marks = [pytest.mark.slow] if case.slow else []
        for seed in SEEDS:
            yield pytest.param(name, seed, marks=marks, id=f"{name}-{seed}")


@pytest.mark.slow
@pytest.mark.parametrize("name,seed", list(_params()))
def test_bug_is_real_flagged_by_its_check_and_diagnosed(name, seed):
    case = CASES[name]
    setup = case.build(True, seed)
    monitor = setup.monitor()
    record = train(setup, monitor)
    case.proof(record, setup)                                   # the bug is real, measured independently
    report = monitor.report()
    check = report[case.caught_by]
    assert check.status == case.status and case.says in check.message, str(report)
    assert report.diagnosis["name"] == case.diagnosis, (report.diagnosis, str(report))
    assert not report.errors, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name,seed", list(_params()))
def test_healthy_twin_is_clean(name, seed):
    setup = CASES[name].build(False, seed)
    monitor = setup.monitor()
    train(setup, monitor)
    report = monitor.report()
    assert {c.name: c.message for c in report.checks if c.status in ("warn", "fail", "error")} == {}, str(report)
    assert report.diagnosis["name"] == "healthy" and report.diagnosis["invalidates"] is False


@pytest.mark.slow
def test_the_proofs_can_fail():
    """Each proof measures the bug, not a constant: on its healthy twin's record every proof raises."""
    for name, case in CASES.items():
        if case.slow:
            continue
        setup = case.build(False, 0)
        record = train(setup)
        if name == "grad_spike_between_samples":
            setup.spike_at = 37                                 # where the proof looks: the twin had no spike there
        with pytest.raises((AssertionError, StopIteration, IndexError, ZeroDivisionError)):
            case.proof(record, setup)
