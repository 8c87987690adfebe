"""The bug zoo (tests/health_zoo.py): every silent bug is flagged by the check meant for it, every healthy twin
passes every check, and every bug really is silent by the training loss.

    python -m pytest -q tests/test_health_zoo.py
"""
from __future__ import annotations

import warnings

import pytest
import torch

from sweeper.health import LiveMonitor, preflight
from tests.helpers.health_zoo import CASES, train

TRAIN_STEPS = 60
MONITOR_INTERVAL = 5


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def _quiet_fault_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DELIBERATE FAULT INJECTION.*")
        yield


def _not_passing(report):
    return {c.name: (c.status, c.message) for c in report.checks if c.status not in ("pass", "skip")}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_healthy_twin_passes_every_check(name):
    setup = CASES[name].build(False)
    report = preflight(**setup.preflight_kwargs())
    assert _not_passing(report) == {}, str(report)
    fresh = CASES[name].build(False)
    monitor = LiveMonitor(fresh.model, interval=MONITOR_INTERVAL, num_classes=fresh.num_classes)
    losses = train(fresh, TRAIN_STEPS, monitor)
    assert len(losses) == TRAIN_STEPS and monitor.diverged is None
    assert _not_passing(monitor.report()) == {}, str(monitor.report())


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.by_monitor])
def test_preflight_flags_the_bug_with_the_right_check(name):
    case = CASES[name]
    report = preflight(**case.build(True).preflight_kwargs())
    check = report[case.caught_by]
    assert check.status == case.expect, str(report)
    assert case.extra["says"] in check.message
    assert not report.ok
    if "also" in case.extra:
        assert report[case.extra["also"]].status == "fail", str(report)


def test_frozen_qk_named_in_gradient_flow_and_kernel_agreement():
    report = preflight(**CASES["rope_backward_drops_qk_grad"].build(True).preflight_kwargs())
    flow = report["gradient_flow"]
    assert flow.value == 2
    assert "q_proj.weight: gradient exactly zero" in flow.message
    assert "k_proj.weight: gradient exactly zero" in flow.message
    assert sorted(d.split(":")[0] for d in flow.details["dead"]) == ["k_proj.weight", "q_proj.weight"]
    agreement = report["kernel_agreement"]
    assert agreement.message.split(": ", 1)[1].startswith(("q_proj.weight", "k_proj.weight"))
    assert agreement.details["rel_error"]["q_proj.weight"] == pytest.approx(1.0)


@pytest.mark.parametrize("name", list(CASES))
def test_bug_is_silent_by_the_loss(name):
    """The premise of the zoo: the training loss of the buggy setup falls (before any NaN)."""
    losses = train(CASES[name].build(True), TRAIN_STEPS)
    finite = [x for x in losses if x == x]
    tail = finite[-10:]
    assert sum(tail) / len(tail) < 0.9 * losses[0], losses


def test_monitor_marks_nan_mid_run_diverged_at_its_step():
    case = CASES["nan_mid_run"]
    setup = case.build(True)
    monitor = LiveMonitor(setup.model, interval=MONITOR_INTERVAL, num_classes=setup.num_classes)
    losses = train(setup, TRAIN_STEPS, monitor)
    assert monitor.diverged == {"step": case.extra["step"], "reason": "loss is nan"}
    assert len(losses) == case.extra["step"] + 1            # the loop stopped at the bad step
    report = monitor.report()
    assert report["finite"].status == "fail" and report["finite"].value == case.extra["step"]
    assert preflight(**case.build(True).preflight_kwargs()).ok   # one clean batch shows nothing: a run-time bug


def test_monitor_sees_units_die_under_a_learning_rate_that_still_lowers_the_loss():
    setup = CASES["learning_rate_kills_units"].build(True)
    monitor = LiveMonitor(setup.model, interval=MONITOR_INTERVAL, num_classes=setup.num_classes)
    train(setup, TRAIN_STEPS, monitor)
    check = monitor.report()["zero_grad_share"]
    assert check.status == "warn" and check.value >= 0.5
    # independent count: the hidden ReLU units that output 0 for every example of the training data
    x = torch.cat([setup.stream(s)[0] for s in range(4)])
    with torch.no_grad():
        h2 = torch.relu(setup.model.fc2(torch.relu(setup.model.fc1(x))))
    assert (h2 == 0).all(dim=0).float().mean() >= 0.5
