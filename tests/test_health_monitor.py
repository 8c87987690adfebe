"""LiveMonitor: figures against independent computations, the warnings, divergence, and checkpointing.

    python -m pytest -q tests/test_health_monitor.py
"""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import LiveMonitor, Thresholds


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)


def run(model, monitor, steps, lr=1e-2, records=None, start=0, opt=None):
    opt = opt or torch.optim.SGD(model.parameters(), lr=lr)
    for step in range(start, steps):
        x, y = batch(step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        rec = monitor.after_backward(step, loss)
        opt.step()
        rec.update(monitor.after_step(step))
        if records is not None and rec:
            records[step] = rec
    return opt


def test_metrics_only_on_interval_steps_and_match_independent_figures():
    model = make_model()
    monitor = LiveMonitor(model, interval=4, num_classes=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    records, losses = {}, []
    for step in range(10):
        x, y = batch(step)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        losses.append(loss.item())
        rec = monitor.after_backward(step, loss)
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        weights = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        rec.update(monitor.after_step(step))
        if not rec:
            continue
        records[step] = rec
        # independent: global norm, per-layer norms, zero share, update/weight ratio per layer
        assert rec["health/grad_norm"] == pytest.approx(
            math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values())), rel=1e-6)
        for layer in ("0", "2"):
            expect = math.sqrt(float(grads[f"{layer}.weight"].double().pow(2).sum()
                                     + grads[f"{layer}.bias"].double().pow(2).sum()))
            assert rec["health/layer_grad_norm"][layer] == pytest.approx(expect, rel=1e-6)
            w = weights[f"{layer}.weight"]
            ratio = float((model.get_submodule(layer).weight.detach() - w).norm() / w.norm())
            assert rec["health/layer_update_ratio"][layer] == pytest.approx(ratio, rel=1e-5)
        zeros = sum(int((g == 0).sum()) for g in grads.values())
        assert rec["health/zero_grad_share"] == zeros / sum(g.numel() for g in grads.values())
    assert sorted(records) == [3, 7]                      # the last update of each interval of 4
    # loss EMA = pandas' bias-corrected exponentially weighted mean (adjust=True) with alpha = 1 - beta
    ema = pd.Series(losses).ewm(alpha=1 - Thresholds().ema_beta, adjust=True).mean()
    assert records[7]["health/loss_ema"] == pytest.approx(ema[7], rel=1e-12)


def test_nonfinite_grad_norm_diverges_and_names_the_parameter():
    model = make_model()
    monitor = LiveMonitor(model, interval=5)
    x, y = batch(0)
    F.cross_entropy(model(x), y).backward()
    model[2].weight.grad[0, 0] = float("inf")
    assert monitor.after_backward(3, 1.0, grad_norm=float("inf")) == {"health/diverged": True}
    assert monitor.diverged == {"step": 3, "reason": "gradient norm is inf (first non-finite: 2.weight.grad)"}
    assert monitor.report()["finite"].status == "fail"


def test_nonfinite_gradient_found_on_an_interval_step_without_grad_norm():
    model = make_model()
    monitor = LiveMonitor(model, interval=5)
    x, y = batch(0)
    F.cross_entropy(model(x), y).backward()
    model[0].bias.grad[1] = float("nan")
    monitor.after_backward(9, 1.0)
    assert monitor.diverged["step"] == 9 and "0.bias.grad" in monitor.diverged["reason"]


def test_grad_spike_is_a_warning_with_its_step():
    monitor = LiveMonitor(make_model(), interval=1000)
    for step in range(30):
        monitor.after_backward(step, 1.0, grad_norm=1.0 + 0.01 * (step % 3))
    monitor.after_backward(30, 1.0, grad_norm=25.0)
    check = monitor.report()["grad_spike"]
    assert check.status == "warn" and "step 30" in check.message and check.value == pytest.approx(25 / 1.01)
    quiet = LiveMonitor(make_model(), interval=1000)
    for step in range(31):
        quiet.after_backward(step, 1.0, grad_norm=1.0 + 0.5 * (step % 3))     # noisy but no spike
    assert quiet.report()["grad_spike"].status == "pass"


def test_loss_stuck_at_ln_v_warns_and_learning_passes():
    th = Thresholds()
    stuck = LiveMonitor(make_model(), interval=10, num_classes=50)
    learning = LiveMonitor(make_model(), interval=10, num_classes=50)
    for step in range(th.stuck_min_steps + 50):
        stuck.after_backward(step, math.log(50) + 0.001)
        learning.after_backward(step, math.log(50) * math.exp(-step / 100))
    assert stuck.report()["loss_stuck"].status == "warn"
    first_judged = next(s for s in range(th.stuck_min_steps, 10**6) if (s + 1) % 10 == 0)
    assert f"since step {first_judged}" in stuck.report()["loss_stuck"].message
    assert learning.report()["loss_stuck"].status == "pass"
    short = LiveMonitor(make_model(), interval=10, num_classes=50)
    short.after_backward(0, math.log(50))
    assert short.report()["loss_stuck"].status == "skip"


def test_new_warning_appears_in_the_metrics_of_its_step():
    model = make_model()
    monitor = LiveMonitor(model, interval=1)
    x, y = batch(0)
    F.cross_entropy(model(x), y).backward()
    for step in range(6):
        assert "health/warning" not in monitor.after_backward(step, 1.0)
    for p in model.parameters():
        p.grad.mul_(100)
    rec = monitor.after_backward(6, 1.0)
    assert rec["health/warning"].startswith("grad-norm spike at step 6")


@pytest.mark.slow
@pytest.mark.parametrize("split", [20, 21])     # 21: right after interval step 20, whose checks are still due
def test_state_dict_resume_gives_the_same_report(split):
    reference = make_model()
    whole = LiveMonitor(reference, interval=3, num_classes=3)
    run(reference, whole, 40)
    model = make_model()
    first = LiveMonitor(model, interval=3, num_classes=3)
    opt = run(model, first, split)
    second = LiveMonitor(model, interval=3, num_classes=3)
    second.load_state_dict(first.state_dict())
    run(model, second, 40, start=split, opt=opt)
    def same(report):      # the memory check's figures are this process's, not the run's: compared apart
        d = report.to_dict()
        d["checks"] = [c for c in d["checks"] if c["name"] != "memory"]
        return d
    assert same(second.report()) == same(whole.report())
    assert second.report()["memory"].status == whole.report()["memory"].status == "pass"
    assert second.loss_ema == whole.loss_ema


def test_report_at_any_point_of_a_run():
    model = make_model()
    monitor = LiveMonitor(model, interval=10, num_classes=3)
    assert monitor.report().verdict == "pass"                   # before any step (a run resumed at its end)
    run(model, monitor, 1)                                       # baseline taken, no interval step yet
    restored = LiveMonitor(model, interval=10, num_classes=3)
    restored.load_state_dict(monitor.state_dict())
    for m in (monitor, restored):
        assert m.report()["zero_grad_share"].status == "pass"


def test_bad_interval_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"interval=0: expected an int >= 1"):
        LiveMonitor(make_model(), interval=0)
