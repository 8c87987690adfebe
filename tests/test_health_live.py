"""Issue 29, live half: unit tests per check (curves, optimizer and memory watches, dead units, update-ratio bands,
loss_stuck above chance, the affine probe), the diagnosis tree, the run API's validation metrics and health.json
diagnosis, and the preflight false alarms fixed (zero-initialised output, a one-token-context LM).

    python -m pytest -q tests/test_health_live.py
"""
from __future__ import annotations

import collections
import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import LiveMonitor, Thresholds, preflight
from sweeper.health.common.capacity import InputCapture
from sweeper.health.diagnosis import KINDS, diagnose, read_diagnosis
from sweeper.health.live.curves import Curve, train_trend, val_checks
from sweeper.health.live.watch_optimizer import LrWatch
from sweeper.health.result import CheckResult

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")
TH = Thresholds()


def mlp(features=6, width=16, classes=3, act=True):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(features, width), nn.ReLU() if act else nn.Identity(), nn.Linear(width, classes))


def batch(step, n=16, features=6, classes=3):
    g = torch.Generator().manual_seed(step)
    return torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


# ---- curves ----------------------------------------------------------------------------------------------------
def test_curve_thins_to_a_bound_and_keeps_the_weighted_mean():
    c = Curve(max_points=16)
    values = [math.sin(i / 7) + i / 100 for i in range(1000)]
    for i, v in enumerate(values):
        c.add(i, v)
    assert len(c) <= 16
    mean = sum(v * w for _, v, w in c.data) / sum(w for *_, w in c.data)
    assert mean == pytest.approx(sum(values) / len(values), rel=1e-9)
    assert c.points()[-1][0] == 999


@pytest.mark.parametrize("shape,kind", [
    (lambda i: 2.3 * math.exp(-i / 10), "falls"),
    (lambda i: 2.3 - 0.001 * i, "flat"),
    (lambda i: 2.3 + 0.02 * i, "rises"),
    (lambda i: 2.3 * (10 if i == 7 else 1) * math.exp(-i / 30), "blew_up"),
])
def test_train_trend_kinds(shape, kind):
    points = [(10 * i + 9, shape(i)) for i in range(30)]
    assert train_trend(points, shape(0), None, TH).kind == kind
    assert train_trend(points[:4], shape(0), None, TH).kind == "short"


def test_a_loss_at_ln_c_is_flat_even_after_falling_from_a_high_init():
    points = [(10 * i + 9, math.log(10) + 2 * math.exp(-i)) for i in range(30)]
    trend = train_trend(points, math.log(10) + 3, 10, TH)
    assert trend.kind == "flat" and trend.at_chance and not trend.above_chance


def _val(train_end=0.3, val=lambda i: 1.0, acc=None, n=12, first=2.3, num_classes=10):
    train = [(10 * i + 9, first * math.exp(-i / 3) + train_end) for i in range(60)]
    vl = [(50 * (i + 1), val(i)) for i in range(n)]
    va = [(50 * (i + 1), acc(i)) for i in range(n)] if acc else []
    trend = train_trend(train, first, num_classes, TH)
    return {c.name: c for c in val_checks(train, vl, va, trend, num_classes, None, TH)}


def test_val_at_chance_while_train_falls_is_a_labels_bug():
    got = _val(val=lambda i: math.log(10) + 0.05 * i, acc=lambda i: 0.1 + 0.01 * (i % 2))
    assert got["val_at_chance"].status == "fail"
    assert got["val_at_chance"].details["diagnosis"] == "labels_do_not_match_inputs"
    healthy = _val(val=lambda i: 1.0 - 0.02 * i, acc=lambda i: 0.6)
    assert healthy["val_at_chance"].status == "pass"


def test_overfitting_names_the_step_it_began():
    got = _val(val=lambda i: 1.0 - 0.1 * i if i <= 4 else 0.6 + 0.1 * (i - 4))
    check = got["overfitting"]
    assert check.status == "warn" and check.details["step"] == 250 and "from step 250" in check.message
    assert _val(val=lambda i: 1.0 - 0.05 * i)["overfitting"].status == "pass"


def test_val_shift_from_the_start_of_learning():
    train = [(10 * i + 9, 2.3 * (1 - 0.4 * i / 20)) for i in range(20)] + \
            [(10 * i + 9, 1.3 * math.exp(-(i - 20) / 10)) for i in range(20, 60)]
    trend = train_trend(train, 2.3, 10, TH)
    shifted = val_checks(train, [(s, 2.2 * v) for s, v in train[4::5]], [], trend, 10, None, TH)
    assert {c.name: c.status for c in shifted}["val_shift"] == "fail"
    same = val_checks(train, [(s, 1.05 * v) for s, v in train[4::5]], [], trend, 10, None, TH)
    assert {c.name: c.status for c in same}["val_shift"] == "pass"


def test_no_validation_metrics_is_a_loud_not_run():
    got = val_checks([(9, 2.0)] * 10, [], [], train_trend([(i, 2.0) for i in range(10)], 2.0, 10, TH), 10, None, TH)
    assert [c.status for c in got] == ["skip"] * 3 and got[0].details["enable"]


# ---- loss_stuck, dead units, update ratios ---------------------------------------------------------------------
def test_loss_stuck_says_above_chance_when_far_above_and_at_chance_otherwise():
    above = LiveMonitor(mlp(), interval=10, num_classes=10)
    for step in range(TH.stuck_min_steps + 20):
        above.after_backward(step, 14242.973)
    msg = above.report()["loss_stuck"].message
    assert "far ABOVE ln(10)" in msg and "still at" not in msg
    at = LiveMonitor(mlp(), interval=10, num_classes=10)
    for step in range(TH.stuck_min_steps + 20):
        at.after_backward(step, math.log(10) + 0.01)
    assert "still at ln(10)" in at.report()["loss_stuck"].message


def test_sparse_units_idle_on_one_batch_are_not_dead():
    """A unit zero on one batch and alive on the next does not count; a unit zero on `dead_window` batches does."""
    model = mlp(width=8)
    monitor = LiveMonitor(model, interval=1)
    shares = []
    for step in range(8):
        x, y = batch(step)
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if step >= 1:
            model[0].weight.grad[: 6 if step >= 4 else (step % 2) * 6] = 0      # rows 0-5: idle, then dead from 4
        monitor.after_backward(step, 1.0)
        shares.append(monitor.units.dead_share)
    assert shares[:5] == [0.0] * 5                                               # idle on steps 1 and 3, 4
    assert shares[5] == pytest.approx(6 / 8) and monitor.units.worst == "0.weight"   # 3, 4, 5 in a row: dead
    assert monitor.report()["zero_grad_share"].status == "warn"


def _ratio_model(lr):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))
    x, y = torch.randn(16, 20), torch.randint(0, 4, (16,))
    return model, (x, y), (lambda params: torch.optim.SGD(params, lr=lr))


def _measured_ratio(lr, steps=3):
    """Independent: the largest ||W_{k+1} - W_k|| / ||W_k|| of fc1 over a few textbook SGD steps."""
    model, (x, y), make = _ratio_model(lr)
    opt, best = make(model.parameters()), 0.0
    for _ in range(steps):
        w = model[0].weight.detach().clone()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        best = max(best, float((model[0].weight.detach() - w).norm() / w.norm()))
    return best


@pytest.mark.slow
def test_update_ratio_bands_as_the_checklist_states_them():
    for lr, status in ((1e-3, "warn"), (2e-5, "fail"), (0.05, "pass")):
        model, b, make = _ratio_model(lr)
        check = preflight(model, F.cross_entropy, b, optimizer_factory=make, num_classes=4)["update_ratio"]
        assert check.status == status, (lr, check)
    assert 5e-5 < _measured_ratio(1e-3) < 3e-4                  # lr 1e-3 really gives ~1e-4: it must warn


def test_live_update_ratio_bands():
    m = LiveMonitor(mlp(), interval=1)
    for r in (0.5, 0.2, 0.2, 0.2, 0.2):
        m.ratios.setdefault("fc", []).append(r)
    assert m.report()["live_update_ratio"].status == "warn"
    m.ratios["fc"] = [0.5, 2, 2, 2, 2]
    assert m.report()["live_update_ratio"].status == "fail"
    m.ratios["fc"] = [0.05, 1e-3, 2e-3, 1e-3, 1e-3]
    assert m.report()["live_update_ratio"].status == "pass"


# ---- optimizer watches -----------------------------------------------------------------------------------------
def _lr_run(lrs, total=None, **th):
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=1.0)
    watch, found = LrWatch(opt, total, Thresholds(**th)), None
    for step, lr in enumerate(lrs):
        opt.param_groups[0]["lr"] = lr
        watch.per_step(step)
        found = found or (watch.warning(step) and step)
    return watch.result(), found


def test_lr_schedule_zero_long_before_the_end():
    warmup_then_dead = [0.0, 0.5] + [max(0.0, 1 - k / 50) for k in range(198)]
    result, live_at = _lr_run(warmup_then_dead, total=200)
    assert result.status == "fail" and result.value == 52 and live_at == 52    # told live, at the step
    assert _lr_run(warmup_then_dead)[0].status == "fail"                        # and at the end without total
    cosine_to_zero = [0.5 * (1 + math.cos(math.pi * k / 199)) for k in range(200)]
    assert _lr_run(cosine_to_zero, total=200)[0].status == "pass"
    step_decay = [1.0] * 60 + [0.1] * 60 + [0.01] * 60 + [1e-3] * 20            # a recipe's step decays
    assert _lr_run(step_decay, total=200)[0].status == "pass"
    assert _lr_run(warmup_then_dead, total=200, lr_zero_left_fraction=1.0)[0].status == "pass"   # silenced


def test_parameter_missing_from_the_optimizer_warns_and_a_replaced_one_fails():
    model = mlp()
    opt = torch.optim.Adam(list(model.parameters())[:2], lr=1e-3)              # head left out
    m = LiveMonitor(model, interval=1, optimizer=opt)
    x, y = batch(0)
    F.cross_entropy(model(x), y).backward()
    m.after_backward(0, 1.0)
    check = m.report()["optimizer_params"]
    assert check.status == "warn" and "2.weight (3, 16)" in check.message
    model[2] = nn.Linear(16, 3)                                                  # replaced after the fact
    opt.add_param_group({"params": []})
    m2 = LiveMonitor(model, interval=1, optimizer=torch.optim.Adam(mlp().parameters()))
    m2.after_backward(0, 1.0)
    assert m2.report()["optimizer_params"].status == "fail"


@pytest.mark.parametrize("set_to_none", [True, False])
def test_micro_batch_accumulation_within_a_step_is_not_a_missing_zero_grad(set_to_none):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    m = LiveMonitor(model, interval=2)
    for step in range(12):
        opt.zero_grad(set_to_none=set_to_none)
        x, y = batch(step)
        for part in (slice(0, 8), slice(8, 16)):                                # 2 micro-batches, then one step
            (F.cross_entropy(model(x[part]), y[part]) / 2).backward()
        m.after_backward(step, 1.0)
        opt.step()
        m.after_step(step)
    check = m.report()["grad_accumulation"]
    assert check.status == "pass" and m.accum.checks >= 5


# ---- graph and memory ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("keep,status", [("window", "pass"), ("all", "warn"), ("item", "pass")])
def test_graph_retained_only_when_it_grows(keep, status):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    m = LiveMonitor(model, interval=10)
    recent, everything, total = collections.deque(maxlen=50), [], 0.0
    for step in range(260):
        opt.zero_grad()
        x, y = batch(step)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        m.after_backward(step, loss)
        opt.step()
        if keep == "window":
            recent.append(loss)                                                  # bounded: the last 50 steps
        elif keep == "all":
            everything.append(loss)                                              # grows every step
        else:
            total += loss.item()
    assert m.report()["graph_retained"].status == status


# ---- capacity --------------------------------------------------------------------------------------------------
def test_affine_probe_tells_a_linear_model_from_a_relu_one():
    for act, affine in ((False, True), (True, False)):
        model = mlp(act=act)
        capture = InputCapture(model)
        model(batch(0)[0])
        assert capture.affine()["affine"] is affine
    emb = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    capture = InputCapture(emb)
    emb(torch.randint(0, 10, (8,)))
    assert capture.affine() is None                                              # token ids cannot be mixed


# ---- the diagnosis tree ----------------------------------------------------------------------------------------
def _c(name, status, **details):
    return CheckResult(name, status, 1.0, "", f"{name} says so", details)


def test_tree_order_and_invalidates():
    assert diagnose([_c("train_trend", "pass")])["name"] == "healthy"
    d = diagnose([_c("train_trend", "warn", diagnosis="lr_too_small"), _c("overfitting", "warn",
                                                                          diagnosis="overfitting")])
    assert d["name"] == "lr_too_small" and d["invalidates"] is False              # train level before val level
    d = diagnose([_c("overfitting", "warn", diagnosis="overfitting", step=1200)])
    assert (d["name"], d["kind"], d["step"], d["invalidates"]) == ("overfitting", "benign", 1200, False)
    d = diagnose([_c("init_loss", "fail"), _c("grad_accumulation", "fail", diagnosis="zero_grad_missing")])
    assert d["name"] == "init_or_last_layer_bug" and d["invalidates"] is True      # init before one batch
    d = diagnose([_c("val_at_chance", "fail", diagnosis="labels_do_not_match_inputs")])
    assert d["invalidates"] is True and d["kind"] == "bug"
    assert all(kind in ("healthy", "benign", "tuning", "resource", "bug") for kind, _ in KINDS.values())


def test_a_data_check_names_the_cause_first():
    data_fail = _c("input_scale", "fail", diagnosis="inputs_not_standardized", fix="divide by 255")
    d = diagnose([_c("init_loss", "fail"), data_fail])
    assert d["name"] == "inputs_not_standardized" and d["check"] == "input_scale" and d["fix"] == "divide by 255"
    data_warn = _c("input_scale", "warn", diagnosis="inputs_not_standardized")
    assert diagnose([_c("train_trend", "warn", diagnosis="lr_too_big"), data_warn])["name"] == \
        "inputs_not_standardized"                                                 # the inputs explain the blow-up
    assert diagnose([data_warn])["name"] == "healthy"                               # a warning alone names nothing


def test_read_diagnosis_from_a_run_dir(tmp_path):
    from sweeper.health.result import HealthReport

    HealthReport([_c("finite", "fail")]).write(tmp_path / "health.json")          # an older file: no diagnosis
    assert read_diagnosis(tmp_path)["name"] == "diverged"
    assert read_diagnosis(tmp_path / "nothing") is None


# ---- the run API -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_run_api_takes_validation_metrics_by_convention_and_writes_the_diagnosis(tmp_path):
    import sweeper

    run = sweeper.init(tmp_path / "run", {"seed": 0})
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    run.health(model, num_classes=3, interval=10, optimizer=opt, total_steps=300)
    for step in range(300):
        x, y = batch(step % 4)                                                   # 4 batches: memorised
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        run._health.after_backward(step, loss)
        opt.step()
        run._health.after_step(step)
        if (step + 1) % 25 == 0:
            run.log(step + 1, train_loss=loss.item(), val_loss=math.log(3) + 0.002 * step, val_acc=0.33)
    run.finish(val_loss=1.1)
    health = json.loads((tmp_path / "run" / "health.json").read_text())
    assert health["diagnosis"]["name"] == "labels_do_not_match_inputs" and health["diagnosis"]["invalidates"]
    checks = {c["name"]: c["status"] for c in health["checks"]}
    assert checks["val_at_chance"] == "fail" and checks["lr_schedule"] == "pass"
    assert read_diagnosis(tmp_path / "run") == health["diagnosis"]


def test_run_api_val_keys_declares_other_names_and_rejects_bad_ones(tmp_path):
    import sweeper

    run = sweeper.init(tmp_path / "run", {"seed": 0})
    with pytest.raises(ValueError, match=r"val_keys=.*expected a dict \{'loss': KEY, 'acc': KEY\}"):
        run.health(mlp(), val_keys=["test_nll"])
    health = run.health(mlp(), num_classes=3, val_keys={"loss": "test_nll"})
    run.log(10, test_nll=1.5, val_loss=99.0, valid_acc=0.9)
    assert health.monitor.val_loss.points() == [(10, 1.5)] and not health.monitor.val_acc.points()


@pytest.mark.slow
def test_builtin_trainer_gives_the_monitor_its_optimizer_and_total_steps(tmp_path):
    import sweeper.train as train
    from tests.helpers.train_runs import tiny_config

    train.run(tiny_config(0, **{"train.steps": 40}), tmp_path / "run")
    health = json.loads((tmp_path / "run" / "health.json").read_text())
    checks = {c["name"]: c for c in health["checks"]}
    assert checks["lr_schedule"]["status"] == "pass" and checks["lr_schedule"]["details"]["total_steps"] == 40
    assert checks["optimizer_params"]["status"] == "pass"
    assert health["diagnosis"]["name"] == "healthy"


# ---- preflight false alarms ------------------------------------------------------------------------------------
class ZeroHead(nn.Module):
    def __init__(self, reach: bool = True):
        super().__init__()
        self.fc1, self.head = nn.Linear(10, 32), nn.Linear(32, 5)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.reach = reach

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return self.head(h if self.reach else h.detach() * 0)


@pytest.mark.slow
def test_zero_initialised_output_layer_is_not_called_disconnected():
    torch.manual_seed(0)
    x, y = torch.randn(16, 10), torch.randint(0, 5, (16,))
    check = preflight(ZeroHead(), F.cross_entropy, (x, y), num_classes=5)["batch_independence"]
    assert check.status == "pass" and check.details["after_one_step"], check
    broken = preflight(ZeroHead(reach=False), F.cross_entropy, (x, y), num_classes=5)["batch_independence"]
    assert broken.status == "warn" and "never reach the output" in broken.message


class Bigram(nn.Module):
    """tokens (B, T) -> logits (B, T, V): each output sees one token. blind: sees none."""

    def __init__(self, vocab=16, blind=False):
        super().__init__()
        self.emb, self.head, self.blind = nn.Embedding(vocab, 16), nn.Linear(16, vocab), blind

    def forward(self, idx):
        e = self.emb(idx)
        return self.head(e * 0 + self.emb.weight.mean(0) if self.blind else e)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_one_token_context_lm_passes_at_the_floor_its_context_allows(seed):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(0, 16, (8, 9), generator=g)
    torch.manual_seed(seed)

    def loss(z, t):
        return F.cross_entropy(z.flatten(0, 1), t.flatten())
    check = preflight(Bigram(), loss, (tok[:, :-1], tok[:, 1:]), num_classes=16, sequence_dim=1)["overfit_batch"]
    assert check.status == "pass" and check.details["window"] == 1 and "floor of what the model sees" in check.message
    # independent: the conditional entropy of next given current token over the 4 examples is the floor
    cur, nxt = tok[:4, :-1].flatten().tolist(), tok[:4, 1:].flatten().tolist()
    counts = collections.Counter(zip(cur, nxt))
    totals = collections.Counter(cur)
    entropy = -sum(n * math.log(n / totals[c]) for (c, _), n in counts.items()) / len(cur)
    assert check.details["context_floor"] == pytest.approx(entropy, abs=0.02)
    blind = preflight(Bigram(blind=True), loss, (tok[:, :-1], tok[:, 1:]), num_classes=16,
                      sequence_dim=1)["overfit_batch"]
    assert blind.status != "pass"                                                 # no input at all: no excuse


@pytest.mark.slow
def test_a_parameter_a_custom_function_returns_none_for_is_named_not_a_crash():
    """Issue 37: a custom autograd.Function whose backward returns None for a parameter made the monitor's
    accumulation hook read None.device; now the run trains on, no "monitor" error, and gradient_flow names it -
    in the explicit loop and through attach(optimizer) hooks, across a checkpoint of the monitor."""
    from tests.helpers.health_live_zoo import GatedMLP

    for hooks in (False, True):
        torch.manual_seed(0)
        model = GatedMLP(8, 16, 3, drop_w=True)
        x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        monitor = LiveMonitor(model, interval=5, num_classes=3)
        if hooks:
            monitor.attach(opt)
        for step in range(30):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if hooks:
                monitor.observe_loss(loss)
            else:
                monitor.after_backward(step, loss)
            opt.step()
            if not hooks:
                monitor.after_step(step)
            if step == 14:
                state = monitor.state_dict()
                monitor = LiveMonitor(model, interval=5, num_classes=3)
                monitor.load_state_dict(state)
                if hooks:
                    monitor.attach(opt)
        report = monitor.report()
        assert not report.errors, str(report)
        flow = report["gradient_flow"]
        assert flow.status == "fail" and flow.details["parameters"] == ["gate"], str(report)
        assert "returns None" in flow.message and report.diagnosis["name"] == "dead_gradients"
