"""Checks from a short training session on a private copy of the model (the caller's model is untouched):

overfit_batch   a few examples, up to `overfit_steps` steps: the loss must fall close to the lowest value the loss
                allows on them (loss_floors.py: 0 for plain CE/MSE, the target entropy under label smoothing).
                Fails when the loss itself is broken (cannot tell examples apart: a (B,1)-(B,) broadcast; a floor
                reached only at infinite outputs: softmax fed to cross_entropy) or the loss stalls far from it.
param_movement  after `movement_steps` optimizer steps every trainable parameter has changed (not in the
                optimizer, lr 0, or gradients cleared after backward all leave it frozen).
update_ratio    per step, ||W_k - W_{k-1}|| / ||W_{k-1}|| of every matrix within a sane band (too high: the learning
                rate overwrites the weights and kills units; too low: nothing learns).
stale_grad      no backward accumulates into a .grad left over from before the previous optimizer.step()
                (optimizer.zero_grad() forgotten). Detected exactly with parameter hooks.

The session uses the caller's `train_step(model, optimizer, batch)` when given, so bugs in the step itself show.
"""
from __future__ import annotations

import copy
import math
import time

import torch

from .batching import call_model, take_examples
from .context import PreflightContext, default_train_step
from .loss_floors import LossFloors, loss_floors
from .result import CheckResult, name_list


class _StaleGradWatch:
    """Marks every parameter's gradient stale at optimizer.step(); a backward that then accumulates into a
    nonzero stale gradient (instead of None or zeros) is recorded."""

    def __init__(self, named: list[tuple[str, torch.nn.Parameter]], optimizer: torch.optim.Optimizer):
        self.stale: set[int] = set()
        self.offenders: dict[str, int] = {}
        self.steps = 0
        self.handles = [optimizer.register_step_post_hook(self._after_step)]
        self.params = named
        for name, p in named:
            self.handles.append(p.register_hook(self._before_accumulate(name, p)))

    def _after_step(self, optimizer, args, kwargs) -> None:
        self.steps += 1
        self.stale = {id(p) for _, p in self.params if p.grad is not None}

    def _before_accumulate(self, name: str, p: torch.nn.Parameter):
        def hook(grad):
            if id(p) in self.stale:
                self.stale.discard(id(p))
                if p.grad is not None and bool(p.grad.ne(0).any()):
                    self.offenders.setdefault(name, self.steps)
            return None
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def training_checks(ctx: PreflightContext) -> list[CheckResult]:
    th = ctx.thresholds
    model = copy.deepcopy(ctx.model)
    model.train()
    named = ctx.params(model)
    k = min(ctx.n, th.overfit_examples)
    batch = (take_examples(ctx.inputs, 0, k, ctx.n), take_examples(ctx.targets, 0, k, ctx.n))
    with torch.no_grad():
        floors = loss_floors(ctx.loss_fn, call_model(model, batch[0]), batch[1])
    optimizer = ctx.optimizer_factory(model.parameters())
    step_fn = ctx.train_step or default_train_step(ctx.loss_fn)
    watch = _StaleGradWatch(named, optimizer)
    start = {name: p.detach().clone() for name, p in named}
    ratios: dict[str, float] = {}
    losses: list[float] = []
    moved: dict[str, bool] | None = None
    min_steps = max(th.movement_steps, 1)
    started = time.perf_counter()
    try:
        while _keep_going(losses, max(th.overfit_steps, min_steps), th, started):
            step = len(losses)
            before = {name: p.detach().clone() for name, p in named if p.dim() >= 2} \
                if step < th.movement_steps else None
            loss = float(step_fn(model, optimizer, batch))
            losses.append(loss)
            if before is not None:
                for name, p in named:
                    if name in before:
                        w = float(before[name].double().norm())
                        if w > 0:
                            r = float((p.detach().double() - before[name].double()).norm()) / w
                            ratios[name] = max(ratios.get(name, 0.0), r)
            if step + 1 == th.movement_steps:
                moved = {name: bool((p.detach() != start[name]).any()) for name, p in named}
            if not math.isfinite(loss):
                break
            if step + 1 >= min_steps and _left(loss, losses[0], floors) <= th.overfit_pass_fraction:
                break
    finally:
        watch.remove()
    if moved is None:  # the session stopped (non-finite loss) before movement_steps
        moved = {name: bool((p.detach() != start[name]).any()) for name, p in named}
    return [_overfit(ctx, losses, k, floors), _movement(moved, len(losses), th.movement_steps),
            _update_ratio(ctx, ratios), _stale(watch, len(losses))]


def _left(loss: float, first: float, floors: LossFloors | None) -> float:
    """Share of the achievable improvement still left: 0 = fitted as well as the loss allows, 1 = no better
    than one output shared by all examples. Without floors (or when a shared output already fits, i.e. the
    targets are all alike) the initial loss and zero are the ends of the scale."""
    if floors is None or floors.gap <= 1e-3 * first:
        return loss / first if first > 0 else 0.0
    return (loss - floors.free) / floors.gap


def _keep_going(losses: list[float], budget: int, th, started: float) -> bool:
    """Within the budget, always; past it, only while the loss still falls (up to overfit_max_steps / _seconds)."""
    if len(losses) < budget:
        return True
    return (len(losses) < th.overfit_max_steps and not _plateaued(losses, th.overfit_plateau)
            and time.perf_counter() - started <= th.overfit_max_seconds)


def _plateaued(losses: list[float], tolerance: float) -> bool:
    """No longer falling: the last fifth of the session is within `tolerance` of the fifth before it."""
    n = max(5, len(losses) // 5)
    if len(losses) < 2 * n:
        return False
    last, prev = sum(losses[-n:]) / n, sum(losses[-2 * n:-n]) / n
    return prev - last <= tolerance * abs(prev)


def _overfit(ctx: PreflightContext, losses: list[float], k: int, floors: LossFloors | None) -> CheckResult:
    th = ctx.thresholds
    first, steps = losses[0], len(losses)
    expected = f"<= {th.overfit_pass_fraction:g} of the gap left"
    details = {"initial": first, "steps": steps, "examples": k, "constant_floor": floors and floors.constant,
               "free_floor": floors and floors.free, "saturating": floors and floors.saturating}
    if not math.isfinite(losses[-1]):
        return CheckResult("overfit_batch", "fail", losses[-1], expected,
                           f"loss became {losses[-1]} at step {steps - 1} while fitting {k} examples (from "
                           f"{first:.3g}): numerical blow-up (learning rate, log of 0, division by 0)", details)
    final = min(losses[-5:])
    details["final"] = final
    targets_differ = floors is not None and floors.constant > 1e-3 * first
    if targets_differ and floors.gap <= th.loss_pairing_gap * floors.constant:
        return CheckResult("overfit_batch", "fail", 1.0, expected,
                           f"the loss cannot tell the {k} examples apart: the best separate output per example "
                           f"scores {floors.free:.3g}, no better than one shared output ({floors.constant:.3g}); "
                           f"it pairs outputs with other examples' targets, e.g. a (B,1) vs (B,) broadcast in a "
                           f"hand-written loss", details)
    if targets_differ and floors.saturating and floors.free > th.overfit_pass_fraction * floors.constant:
        return CheckResult("overfit_batch", "fail", floors.free / floors.constant, expected,
                           f"no output gets the loss below {floors.free:.3g} (a shared output scores "
                           f"{floors.constant:.3g}), and it only approaches that floor as the outputs grow without "
                           f"bound: the loss squashes its input first - a softmax/sigmoid fed to a loss that "
                           f"expects logits (cross_entropy, binary_cross_entropy_with_logits)", details)
    left = _left(final, first, floors)
    ref = (f"floors: {floors.free:.3g} per-example, {floors.constant:.3g} shared" if floors is not None
           else "reference: the initial loss")
    msg = f"{k} examples: loss {first:.3g} -> {final:.3g} in {steps} steps ({ref})"
    if left <= th.overfit_pass_fraction:
        return CheckResult("overfit_batch", "pass", left, expected, msg, details)
    if left > th.overfit_fail_fraction and _plateaued(losses, th.overfit_plateau):
        return CheckResult("overfit_batch", "fail", left, expected,
                           msg + f"; stuck with {left:.0%} of the gap left: the model fits nothing example-specific"
                                 " (inputs that never reach the output, a step that does not learn)", details)
    return CheckResult("overfit_batch", "warn", left, expected,
                       msg + f"; {left:.0%} of the gap left and still falling when the budget ran out: learning "
                             f"rate too low for this model, or raise Thresholds.overfit_max_steps", details)


def _movement(moved: dict[str, bool], steps: int, wanted: int) -> CheckResult:
    frozen = [name for name, m in moved.items() if not m]
    expected = "0 unchanged parameters"
    if frozen:
        return CheckResult("param_movement", "fail", len(frozen), expected,
                           f"{len(frozen)}/{len(moved)} parameters never changed in {min(steps, wanted)} optimizer "
                           f"steps: {name_list(frozen)}: not given to the optimizer, learning rate 0, or gradients "
                           f"cleared between backward and step", {"unchanged": frozen})
    return CheckResult("param_movement", "pass", 0, expected,
                       f"all {len(moved)} trainable parameters changed within {min(steps, wanted)} steps")


def _update_ratio(ctx: PreflightContext, ratios: dict[str, float]) -> CheckResult:
    th = ctx.thresholds
    expected = f"[{th.update_ratio_low:g}, {th.update_ratio_high:g}] per step"
    live = {n: r for n, r in ratios.items() if r > 0}
    if not live:
        return CheckResult("update_ratio", "skip", None, expected, "no weight matrix moved (see param_movement)")
    hi_name = max(live, key=live.get)
    lo_name = min(live, key=live.get)
    hi, lo = live[hi_name], live[lo_name]
    details = {"ratio": ratios}
    too_high = sorted((n for n, r in live.items() if r > th.update_ratio_high), key=live.get, reverse=True)
    if hi >= th.update_ratio_fail:
        return CheckResult("update_ratio", "fail", hi, expected,
                           f"{hi_name}: one step changes it by {hi:.2g}x its own norm ({len(too_high)} matrices "
                           f"above {th.update_ratio_high:g}): learning rate far too high, units die and nothing "
                           f"learned accumulates", details)
    if hi > th.update_ratio_high:
        return CheckResult("update_ratio", "warn", hi, expected,
                           f"{hi_name}: update/weight ratio {hi:.2g} per step ({len(too_high)} matrices above "
                           f"{th.update_ratio_high:g}): learning rate high for this init scale", details)
    if lo < th.update_ratio_low:
        return CheckResult("update_ratio", "warn", lo, expected,
                           f"{lo_name}: update/weight ratio {lo:.1e} per step: this matrix barely learns "
                           f"(learning rate too low, or its gradient vanishes)", details)
    return CheckResult("update_ratio", "pass", hi, expected,
                       f"update/weight ratios {lo:.1e}..{hi:.1e} per step over {len(live)} matrices", details)


def _stale(watch: _StaleGradWatch, steps: int) -> CheckResult:
    expected = "0 parameters"
    if watch.offenders:
        names = sorted(watch.offenders)
        return CheckResult("stale_grad", "fail", len(names), expected,
                           f"backward accumulated into the previous step's .grad of {len(names)} parameters "
                           f"({name_list(names, 3)}) after optimizer step {min(watch.offenders.values())}: "
                           f"optimizer.zero_grad() is missing from the training step", {"parameters": names})
    if watch.steps < 2:
        return CheckResult("stale_grad", "skip", None, expected, "fewer than 2 optimizer steps observed")
    return CheckResult("stale_grad", "pass", 0, expected,
                       f"gradients were cleared before each of {watch.steps - 1} backward passes after a step")
