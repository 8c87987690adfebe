"""The LiveMonitor's checks, built from what it recorded (LiveMonitor.report() calls all_checks).

    checks = all_checks(monitor)     # finite, grad_spike, loss_stuck, zero_grad_share, live_update_ratio,
                                     # grad_accumulation, optimizer_params, lr_schedule, graph_retained, memory,
                                     # train_trend, val_at_chance, val_shift, overfitting (+ monitor on error)

A flat loss (train_trend, loss_stuck) is explained by the evidence the monitor holds, in the checklist's order:
units that died (lr too big), update/weight ratios below the healthy ~1e-3 (lr too small), else ratios healthy and
gradients alive while the loss stays at its floor: the model is too small (named affine when it is linear in its
inputs: two nn.Linear with no nonlinearity between them). A loss far ABOVE ln C is said to be above it.
"""
from __future__ import annotations

import math
from typing import Any

from sweeper.health.live.curves import _median, train_trend, val_checks
from sweeper.health.result import CheckResult

Monitor = Any          # the LiveMonitor (sweeper.health.live.monitor) whose records the checks read; not imported:
#                        monitor imports this module

_MAX_RATIO_SAMPLES = 256


def record_ratios(m: Monitor, ratios: dict[str, float]) -> None:
    """One interval's per-layer update/weight ratios; beyond 256 samples a layer's pairs merge (geometric mean)."""
    for layer, r in ratios.items():
        if not math.isfinite(r):
            continue
        samples = m.ratios.setdefault(layer, [])
        samples.append(r)
        if len(samples) > _MAX_RATIO_SAMPLES:
            m.ratios[layer] = [samples[0]] + [math.sqrt(samples[i] * samples[i + 1])
                                              for i in range(1, len(samples) - 1, 2)] + (
                [samples[-1]] if (len(samples) - 1) % 2 else [])


def layer_medians(m: Monitor, skip: int = 1) -> dict[str, float]:
    """Each layer's median ratio over the run, its first sample skipped (Adam's first step is large)."""
    return {k: _median(v[skip:]) for k, v in m.ratios.items() if len(v) > skip}


def flat_cause(m: Monitor) -> tuple[str, str]:
    """(diagnosis, explanation) for a loss that does not fall, from the evidence at hand."""
    th = m.th
    if m._died() >= th.dead_share_warn:
        return "lr_too_big", (
            f"{m.units.worst}: {m._died():.0%} of its units alive at the start now get exactly zero gradient on "
            f"every batch: the units died - learning rate too big (divide it by 3-10)"
        )
    meds = layer_medians(m)
    if not meds:
        return "not_learning", (
            "no update/weight ratios were measured (after_step not called) to tell a learning "
            "rate too small from a model too small; or the gradients are dead, or the labels do "
            "not depend on the inputs"
        )
    med = _median(list(meds.values()))
    if med < th.update_ratio_low:
        return "lr_too_small", (
            f"the weights barely move (median update/weight ratio {med:.1e} per step; about 1e-3 "
            f"is healthy): learning rate too small (raise it 3-10x)"
        )
    text = (
        f"the weights move at a healthy rate (median update/weight ratio {med:.1e} per step) and the gradients "
        f"are alive, yet the loss stays at its floor: the model is too small for the task"
    )
    affine = m.capture.affine()
    if affine and affine["affine"]:
        text += (
            f"; it is affine in its inputs (f(0.3a + 0.7b) = 0.3 f(a) + 0.7 f(b) to {affine['error']:.0e}): "
            f"linear layers with no nonlinearity between them compose to one linear map - put a nonlinearity "
            f"(nn.ReLU) between them"
        )
    return "model_too_small", text + " (labels unrelated to the inputs look the same: the data checks tell)"


def stuck_line(m: Monitor, step: int) -> str:
    chance = math.log(m.num_classes)
    if m.loss_ema > chance * m.th.chance_above_factor:
        return (
            f"loss EMA {m.loss_ema:.4g} at step {step} is far ABOVE ln({m.num_classes}) = {chance:.3f} "
            f"({m.loss_ema / chance:.3g}x): worse than predicting uniformly"
        )
    return (
        f"loss stuck at ln({m.num_classes}) = {chance:.3f} at step {step} (EMA {m.loss_ema:.3f}): the model "
        f"still predicts uniformly"
    )


def _stuck_result(m: Monitor) -> CheckResult:
    if m.num_classes is None:
        return CheckResult("loss_stuck", "skip", None, "", "num_classes not given")
    chance = math.log(m.num_classes)
    expected = f"EMA < {chance * (1 - m.th.stuck_tolerance):.3f} after step {m.th.stuck_min_steps}"
    if m.stuck_last:
        above = m.loss_ema > chance * m.th.chance_above_factor
        if above:
            return CheckResult(
                "loss_stuck",
                "warn",
                m.loss_ema,
                expected,
                f"loss EMA {m.loss_ema:.4g} far ABOVE ln({m.num_classes}) = {chance:.3f} "
                f"({m.loss_ema / chance:.3g}x) since step {m.stuck_since}: worse than a uniform "
                f"prediction - outputs on the wrong scale (inputs not standardized, logits blown up by "
                f"a learning rate too big) or a loss that does not match the outputs",
                {"above_chance": True},
            )
        cause, why = flat_cause(m)
        return CheckResult(
            "loss_stuck",
            "warn",
            m.loss_ema,
            expected,
            f"loss EMA {m.loss_ema:.3f} still at ln({m.num_classes}) = {chance:.3f} since step {m.stuck_since}: {why}",
            {"diagnosis": cause},
        )
    if m.stuck_since is not None:
        return CheckResult(
            "loss_stuck",
            "pass",
            m.loss_ema,
            expected,
            f"loss sat at ln({m.num_classes}) at step {m.stuck_since}, then fell",
        )
    if m.stuck_last is None:
        return CheckResult(
            "loss_stuck", "skip", m.loss_ema, expected, f"run too short to judge (< {m.th.stuck_min_steps} steps)"
        )
    return CheckResult(
        "loss_stuck",
        "pass",
        m.loss_ema,
        expected,
        f"loss EMA {m.loss_ema:.3f} below ln({m.num_classes}) = {chance:.3f}",
    )


def _zero_share_result(m: Monitor) -> CheckResult:
    expected = f"< {m.th.dead_share_warn:.0%} of live units die"
    if m.zero_share_first is None:
        return CheckResult("zero_grad_share", "skip", None, expected, "no interval step observed")
    (s0, a), (s1, b) = m.zero_share_first, m.zero_share_last or m.zero_share_first
    if m.zero_share_warned:
        return CheckResult(
            "zero_grad_share",
            "warn",
            m._died(),
            expected,
            f"{m.units.worst}: {m._died():.0%} of its units alive at step {s0} get exactly zero gradient on every "
            f"batch "
            f"by step {s1} (exactly-zero gradient entries {a:.1%} -> {b:.1%}): dead units, typically a "
            f"learning rate so high that ReLUs die",
        )
    return CheckResult(
        "zero_grad_share",
        "pass",
        m._died(),
        expected,
        f"dead units {m._died():.0%}; exactly-zero gradient entries: {a:.1%} at step {s0}, {b:.1%} at step {s1}",
    )


def _ratio_result(m: Monitor) -> CheckResult:
    th = m.th
    name = "live_update_ratio"
    expected = f"median per layer in ({th.live_update_ratio_low:g}, {th.live_update_ratio_high:g}]"
    meds = {k: v for k, v in layer_medians(m).items() if v > 0}
    if len(next(iter(m.ratios.values()), [])) < 4 or not meds:
        return CheckResult(name, "skip", None, expected, "fewer than 3 interval samples after the first")
    hi_name, lo_name = max(meds, key=meds.get), min(meds, key=meds.get)
    hi, lo = meds[hi_name], meds[lo_name]
    details = {"median_by_layer": meds}
    if hi >= th.update_ratio_fail:
        return CheckResult(
            name,
            "fail",
            hi,
            expected,
            f"{hi_name}: each step changes it by {hi:.2g}x its norm (median over the run): the weights "
            f"are replaced every step and nothing learned accumulates - learning rate far too big",
            {**details, "diagnosis": "lr_too_big"},
        )
    if hi > th.live_update_ratio_high:
        return CheckResult(
            name,
            "warn",
            hi,
            expected,
            f"{hi_name}: median update/weight ratio {hi:.2g} per step (about 1e-3 is healthy, 1e-1 "
            f"rewrites the weights every step): learning rate too big for this layer, or its weights "
            f"shrank toward zero",
            details,
        )
    if lo <= th.live_update_ratio_low:
        return CheckResult(
            name,
            "warn",
            lo,
            expected,
            f"{lo_name}: median update/weight ratio {lo:.1e} per step (about 1e-3 is healthy): this "
            f"layer barely learns - learning rate too small, or its gradient vanishes",
            details,
        )
    return CheckResult(
        name,
        "pass",
        hi,
        expected,
        f"median update/weight ratios {lo:.1e}..{hi:.1e} per step over {len(meds)} layers",
        details,
    )


def _trend_result(m: Monitor) -> CheckResult:
    th = m.th
    trend = train_trend(m.train_curve.points(), m.first_loss, m.num_classes, th)
    name = "train_trend"
    expected = f"falls by >= {th.trend_flat:.0%} of its first value, never {th.trend_blowup:g}x above it"
    details: dict[str, Any] = {"trend": trend.to_dict()}
    if trend.kind == "short":
        return CheckResult(name, "skip", None, expected, "fewer than 5 interval points of the train loss", details)
    if trend.kind == "unknown":
        return CheckResult(name, "skip", None, expected, "the loss is not positive: no relative fall to judge", details)
    span = f"{trend.first:.4g} -> {trend.end:.4g} over {m.train_curve.points()[-1][0] + 1} steps"
    if trend.kind == "blew_up":
        return CheckResult(
            name,
            "warn",
            trend.peak / trend.first,
            expected,
            f"the train loss peaked at {trend.peak:.4g} (step {trend.peak_step}), "
            f"{trend.peak / trend.first:.3g}x its first value ({span}): the steps overshoot - "
            f"learning rate too big (divide it by 3-10, clip gradients)",
            {**details, "diagnosis": "lr_too_big", "step": trend.peak_step},
        )
    if trend.kind == "rises":
        return CheckResult(
            name,
            "warn",
            trend.end / trend.first,
            expected,
            f"the train loss rose ({span}): learning rate too big (divide it by 3-10)",
            {**details, "diagnosis": "lr_too_big"},
        )
    if trend.kind == "flat":
        cause, why = flat_cause(m)
        where = (
            f" at ln({m.num_classes})"
            if trend.at_chance
            else f", far above ln({m.num_classes})"
            if trend.above_chance
            else ""
        )
        return CheckResult(
            name,
            "warn",
            (trend.first - trend.end) / trend.first,
            expected,
            f"the train loss stays flat{where} ({span}): {why}",
            {**details, "diagnosis": cause},
        )
    return CheckResult(
        name, "pass", (trend.first - trend.end) / trend.first, expected, f"the train loss falls ({span})", details
    )


def all_checks(m: Monitor) -> list[CheckResult]:
    th = m.th
    checks = []
    if m.diverged:
        ckpt = m.diverged.get("last_good_checkpoint")
        checks.append(
            CheckResult(
                "finite",
                "fail",
                m.diverged["step"],
                "no NaN/inf",
                f"diverged at step {m.diverged['step']}: {m.diverged['reason']}"
                + (f"; last good checkpoint: step {ckpt}" if ckpt is not None else ""),
                dict(m.diverged),
            )
        )
    else:
        checks.append(
            CheckResult("finite", "pass", None, "no NaN/inf", f"loss and gradients finite over {m.steps_seen} steps")
        )
    if m.spikes:
        big = max(m.spikes, key=lambda s: s["grad_norm"] / s["median"])
        checks.append(
            CheckResult(
                "grad_spike",
                "warn",
                big["grad_norm"] / big["median"],
                f"< {th.spike_factor:g}x running median",
                f"{len(m.spikes)} grad-norm spikes; largest at step {int(big['step'])}: "
                f"{big['grad_norm']:.3g} vs median {big['median']:.3g} (lr too high for this "
                f"stage, a bad batch, or missing clipping)",
                {"spikes": m.spikes, "step": int(big["step"])},
            )
        )
    else:
        checks.append(
            CheckResult(
                "grad_spike",
                "pass",
                None,
                f"< {th.spike_factor:g}x running median",
                "no grad-norm spikes (every step's norm seen)",
            )
        )
    checks += [_stuck_result(m), _zero_share_result(m)]
    reach = m.reach.result(len(m.named))          # only when a parameter was never reached (see watch_reach.py)
    if reach is not None:
        checks.append(reach)
    if m.error:
        checks.append(
            CheckResult(
                "monitor",
                "error",
                None,
                "",
                f"the live monitor could not measure this model ({m.error}); training went "
                f"on, the other monitor checks cover the steps before it",
                {"error": m.error},
            )
        )
    trend = _trend_result(m)
    checks += [
        _ratio_result(m),
        m.accum.result(),
        m.members.result(),
        m.lr.result(),
        m.graph.result(),
        m.memory.result(),
        trend,
    ]
    checks += val_checks(
        m.train_curve.points(),
        m.val_loss.points(),
        m.val_acc.points(),
        train_trend(m.train_curve.points(), m.first_loss, m.num_classes, th),
        m.num_classes,
        m.total_steps,
        th,
    )
    return checks
