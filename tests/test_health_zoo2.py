"""Issue 13: the second bug zoo (tests/health_zoo2.py) and one test per numbered item: no model crashes the
checks (errored checks say so), train-mode coupling, the full overfit budget, zero-init outputs, loud "not run",
the right causes, the (model, batch, optimizer) order, hook-attached monitoring, thresholds from the config.

    python -m pytest -q tests/test_health_zoo2.py
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import LiveMonitor, Thresholds, preflight
from tests.helpers.health_zoo2 import (
    CASES,
    FEAT,
    C,
    PlainMLP,
    SparseBag,
    ZeroInitResidual,
    adam,
    cls_batch,
    half_ce,
    lm_batch,
)

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")


def _unclean(report):
    """Healthy means: no fail, no error; a warning only for BatchNorm's by-design train-mode coupling."""
    return {c.name: (c.status, c.message) for c in report.checks
            if c.status in ("fail", "error") or c.status == "warn" and c.details.get("cause") != "batchnorm_train_mode"}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_bug_flagged_by_the_right_check_with_the_right_cause(name):
    case = CASES[name]
    report = preflight(**case.build(True))
    check = report[case.caught_by]
    assert check.status == case.status and case.says in check.message, str(report)
    assert not report.errors, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_healthy_twin_is_clean(name):
    report = preflight(**CASES[name].build(False))
    assert _unclean(report) == {}, str(report)


# ---- 1. no model crashes the checks ------------------------------------------------------------------------------
def test_sparse_embedding_model_runs_every_check_and_the_monitor_trains_through_it():
    report = preflight(**CASES["sparse_embedding_detached"].build(False))
    assert {c.name for c in report.checks} >= {"init_loss", "gradient_flow", "overfit_batch", "batch_independence"}
    assert report["gradient_flow"].status == "pass" and not report.errors
    torch.manual_seed(0)
    model = SparseBag(bug=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    monitor = LiveMonitor(model, interval=2, num_classes=C)
    x, y = lm_batch(16)[0], lm_batch(16)[0][:, 0] % C
    logged = []
    for step in range(6):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        assert model.emb.weight.grad.is_sparse
        rec = monitor.after_backward(step, loss)
        opt.step()
        rec.update(monitor.after_step(step))
        logged.append(rec)
    assert monitor.error is None and monitor.diverged is None
    norms = [r["health/layer_grad_norm"]["emb"] for r in logged if "health/layer_grad_norm" in r]
    assert len(norms) == 3 and all(n > 0 for n in norms)
    assert "monitor" not in monitor.report()


class EvalRefuses(nn.Module):
    """Trains fine; its eval-mode forward is not implemented (the dependence checks run it)."""

    def __init__(self):
        super().__init__()
        self.net = PlainMLP()

    def forward(self, x):
        if not self.training:
            raise NotImplementedError("eval path not written yet")
        return self.net(x)


def test_a_check_that_cannot_handle_the_model_is_errored_with_the_reason_and_the_others_run():
    torch.manual_seed(0)
    report = preflight(EvalRefuses(), F.cross_entropy, cls_batch(), num_classes=C, optimizer_factory=adam(3e-3))
    check = report["batch_independence"]
    assert check.status == "error"
    assert "NotImplementedError: eval path not written yet" in check.message
    assert report["gradient_flow"].status == "pass" and report["overfit_batch"].status == "pass"
    assert report.verdict == "warn" and [c.name for c in report.errors] == ["batch_independence"]
    assert report.to_dict()["errored"] == ["batch_independence"]
    assert "errored: batch_independence" in str(report).splitlines()[-1]


def test_live_monitor_never_raises_into_the_run():
    model = PlainMLP()
    monitor = LiveMonitor(model, interval=1)
    loss = F.cross_entropy(model(cls_batch()[0]), cls_batch()[1])
    loss.backward()
    per_example = F.cross_entropy(model(cls_batch()[0]), cls_batch()[1], reduction="none")   # not a scalar
    assert monitor.after_backward(0, per_example)["health/warning"].startswith("health monitor could not measure")
    assert monitor.after_step(0) == {}
    assert monitor.report()["monitor"].status == "error"


# ---- 2. batch coupling in the mode the model trains in -----------------------------------------------------------
def test_train_only_coupling_fails_and_says_which_modes_were_checked():
    report = preflight(**CASES["train_only_batch_centering"].build(True))
    check = report["batch_independence"]
    assert check.details["modes_checked"] == ["eval", "train"] and check.details["cause"] == "train_only"
    assert check.details["mode"] == "train"


# ---- 3. the full overfit budget; a non-finite loss at any step ---------------------------------------------------
def test_overfit_runs_its_whole_budget_and_names_the_step_of_a_late_blow_up():
    healthy = preflight(**CASES["half_precision_ce_overflows_mid_session"].build(False))
    assert healthy["overfit_batch"].status == "pass"
    assert healthy["overfit_batch"].details["steps"] == Thresholds().overfit_steps   # no early stop
    broken = preflight(**CASES["half_precision_ce_overflows_mid_session"].build(True))
    check = broken["overfit_batch"]
    step = int(check.message.split(" at step ")[1].split()[0])
    # independent replay of the session: the first step whose loss is non-finite
    torch.manual_seed(0)
    kwargs = CASES["half_precision_ce_overflows_mid_session"].build(True)
    model, (x, y) = kwargs["model"], kwargs["batch"]
    x, y = x[:4], y[:4]
    opt = kwargs["optimizer_factory"](model.parameters())
    for k in range(100):
        opt.zero_grad(set_to_none=True)
        loss = half_ce(model(x), y)
        if not math.isfinite(float(loss)):
            break
        loss.backward()
        opt.step()
    assert step == k > 0


def test_non_finite_gradient_with_a_finite_loss_fails_naming_step_and_parameter():
    class SqrtAtZero(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.head = nn.Linear(FEAT, 8), nn.Linear(8, C)

        def forward(self, x):
            return self.head(torch.sqrt(F.relu(self.fc(x)) * 0.0 + 0.0) + self.fc(x))   # d sqrt(0) = inf

    torch.manual_seed(0)
    report = preflight(SqrtAtZero(), F.cross_entropy, cls_batch(), num_classes=C, optimizer_factory=adam(1e-3),
                       skip=["gradient_flow", "init_loss"])
    check = report["overfit_batch"]
    assert check.status == "fail" and check.details["step"] == 0
    assert check.details["parameter"] in ("fc.weight", "fc.bias")


# ---- 4. zero-initialised output projection -----------------------------------------------------------------------
def test_zero_initialised_output_projection_is_not_dead():
    torch.manual_seed(0)
    report = preflight(
        ZeroInitResidual(bug=False), F.cross_entropy, cls_batch(), num_classes=C, optimizer_factory=adam(3e-3)
    )
    flow = report["gradient_flow"]
    assert flow.status == "pass", str(report)
    assert sorted(flow.details["zero_at_init_then_alive"]) == ["fc.bias", "fc.weight"]
    assert "only after one optimizer step" in flow.message


# ---- 5. not run, loudly ------------------------------------------------------------------------------------------
def test_checks_left_out_for_a_missing_argument_are_listed_as_not_run():
    torch.manual_seed(0)
    kwargs = CASES["tied_lm_without_causal_mask"].build(False)
    kwargs.update(num_classes=None, sequence_dim=None)
    report = preflight(**kwargs, skip=["overfit_batch"])
    assert report.not_run == [
        "init_loss (pass num_classes=...)",
        "causality (pass sequence_dim=...)",
        "target_shift (pass sequence_dim=... and num_classes=...)",
    ]
    assert report.to_dict()["not_run"] == report.not_run
    assert str(report).splitlines()[-1] == (
        "verdict: PASS; not run: init_loss (pass num_classes=...), causality "
        "(pass sequence_dim=...), target_shift (pass sequence_dim=... and "
        "num_classes=...)"
    )


# ---- 6. causes ---------------------------------------------------------------------------------------------------
def test_nan_input_gradients_are_named_as_nan_not_as_mixing():
    class PerExampleNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = PlainMLP()

        def forward(self, x):
            return self.net(x / x.std(dim=-1, keepdim=True))  # 0/0 on a blank example

    torch.manual_seed(0)
    x, y = cls_batch()
    x[5] = 0.0
    report = preflight(
        PerExampleNorm(), F.cross_entropy, (x, y), num_classes=C, skip=["overfit_batch", "init_loss", "gradient_flow"]
    )
    check = report["batch_independence"]
    assert check.status == "fail" and "NaN/inf input gradients at examples [5]" in check.message
    assert "mix" not in check.message.split(":")[0]


def test_a_closed_gate_is_vanishing_and_no_healthy_weight_is_called_exploding():
    report = preflight(**CASES["closed_sigmoid_gate"].build(True))
    weak = report["gradient_flow"].details["weak"]
    assert weak and all("vanishing" in w for w in weak) and not any("exploding" in w for w in weak)
    assert {w.split(":")[0] for w in weak} == {
        "gate.weight",
        "branch.0.weight",
        "branch.2.weight",
        "branch.4.weight",
        "branch.6.weight",
        "out.weight",
    }


def test_params_missing_from_the_optimizer_are_not_blamed_on_zero_grad():
    report = preflight(**CASES["params_missing_from_optimizer"].build(True))
    assert report["stale_grad"].status == "pass"
    assert report["param_movement"].details["not_in_optimizer"] == ["head.weight", "head.bias"]


# ---- 7. API: step order, hooks, thresholds from the config -------------------------------------------------------
def test_both_train_step_orders_give_the_same_report():
    def common(model, batch, optimizer):
        optimizer.zero_grad()
        F.cross_entropy(model(batch[0]), batch[1]).backward()
        optimizer.step()

    def older(model, optimizer, batch):
        common(model, batch, optimizer)

    reports = []
    for step in (common, older):
        torch.manual_seed(0)
        reports.append(
            preflight(
                PlainMLP(),
                F.cross_entropy,
                cls_batch(),
                num_classes=C,
                train_step=step,
                optimizer_factory=adam(3e-3),
                skip=["batch_independence"],
            ).to_dict()
        )
    assert reports[0] == reports[1]


def test_monitor_attached_by_hooks_watches_a_closed_training_step():
    torch.manual_seed(0)
    model = PlainMLP()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    monitor = LiveMonitor(model, interval=2, num_classes=C).attach(opt)
    x, y = cls_batch()
    records = []
    for step in range(6):

        def closed_step():  # one call: nothing can be put between backward and step
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y if step < 4 else y * 0 + 10**9 % C)
            loss.backward()
            if step == 5:
                model.fc1.weight.grad[0, 0] = float("nan")
            opt.step()
            return loss

        monitor.observe_loss(closed_step())
        records.append(monitor.take_metrics())
    monitor.detach()
    assert [("health/grad_norm" in r) for r in records[:4]] == [False, True, False, True]
    assert "health/update_ratio_max" in records[1]
    shares = {k: v for k, v in records[1].items() if k.startswith("health/grad_share/")}
    assert set(shares) == {"health/grad_share/fc1", "health/grad_share/fc2", "health/grad_share/head"}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert monitor.diverged["step"] == 5 and "fc1.weight" in monitor.diverged["reason"]


def test_thresholds_from_the_config_are_checked_in_one_line():
    from sweeper.train.config import ConfigError, RunConfig

    cfg = RunConfig.from_dict({"health": {"thresholds": {"overfit_steps": 40, "batchnorm_coupling": "pass"}}})
    th = Thresholds.from_dict(cfg.health.thresholds)
    assert th.overfit_steps == 40 and isinstance(th.overfit_steps, int) and th.batchnorm_coupling == "pass"
    with pytest.raises(
        ConfigError,
        match=r"^health\.thresholds\.overfit_stepz: unknown threshold; accepted: "
        r"batchnorm_coupling, ",
    ):
        RunConfig.from_dict({"health": {"thresholds": {"overfit_stepz": 40}}})
    with pytest.raises(
        ConfigError,
        match=r"^health\.thresholds\.overfit_steps=2\.5: expected a finite number >= 0 "
        r"\(a whole number\)$",
    ):
        RunConfig.from_dict({"health": {"thresholds": {"overfit_steps": 2.5}}})
    with pytest.raises(
        ConfigError,
        match=r"^health\.thresholds\.batchnorm_coupling='maybe': expected pass, warn "
        r"or fail$",
    ):
        RunConfig.from_dict({"health": {"thresholds": {"batchnorm_coupling": "maybe"}}})
