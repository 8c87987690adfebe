"""Checks from a short training session on a private copy of the model (the caller's model is untouched):

overfit_batch   a few examples, up to `overfit_steps` steps: the loss must fall close to zero. A loss with a floor
                above zero (softmax fed to cross_entropy, a (B,1)-(B,) broadcast in a hand-written loss) cannot.
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

import torch

from .batching import call_model, map_tensors, primary_output, take_examples
from .context import PreflightContext, default_train_step
from .result import CheckResult


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
    constant = _constant_baseline(ctx, model, batch)
    optimizer = ctx.optimizer_factory(model.parameters())
    step_fn = ctx.train_step or default_train_step(ctx.loss_fn)
    watch = _StaleGradWatch(named, optimizer)
    start = {name: p.detach().clone() for name, p in named}
    ratios: dict[str, float] = {}
    losses: list[float] = []
    moved: dict[str, bool] | None = None
    min_steps = max(th.movement_steps, 1)
    try:
        for step in range(max(th.overfit_steps, min_steps)):
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
            if step + 1 >= min_steps and loss <= th.overfit_pass_fraction * _reference(losses[0], constant):
                break
    finally:
        watch.remove()
    if moved is None:  # the session stopped (non-finite loss) before movement_steps
        moved = {name: bool((p.detach() != start[name]).any()) for name, p in named}
    return [_overfit(ctx, losses, k, constant), _movement(moved, len(losses), th.movement_steps),
            _update_ratio(ctx, ratios), _stale(watch, len(losses))]


def _constant_baseline(ctx: PreflightContext, model: torch.nn.Module, batch) -> float | None:
    """The loss of the best prediction that ignores the inputs: one output shared by every example, fitted by
    L-BFGS. It is the floor of a model that learns nothing example-specific (the batch mean for a regression,
    the label frequencies for a classifier), so "close to zero" is judged against it, not against the
    initial loss (which a target offset alone can make large)."""
    inputs, targets = batch
    try:
        with torch.no_grad():
            outputs = call_model(model, inputs)
        out = primary_output(outputs)
        if not out.is_floating_point():
            return None
        shared = out[0:1].detach().double().mean(0, keepdim=True).clone().requires_grad_(True)  # (1, ...)
        opt = torch.optim.LBFGS([shared], lr=1, max_iter=200, line_search_fn="strong_wolfe")

        def shared_loss():
            pred = shared.to(out.dtype).expand_as(out).contiguous()
            return ctx.loss_fn(map_tensors(outputs, lambda t: pred if t is out else t), targets)

        def closure():
            opt.zero_grad()
            loss = shared_loss()
            loss.backward()
            return loss
        opt.step(closure)
        with torch.no_grad():
            value = float(shared_loss())
        return value if math.isfinite(value) else None
    except Exception:  # a loss that cannot take a shared output: judge against the initial loss
        return None


def _reference(first: float, constant: float | None) -> float:
    """The input-ignoring floor, unless the examples' targets are all alike: then a constant fits them (its loss
    is ~0) and only the initial loss is a meaningful reference."""
    return constant if constant is not None and constant > 1e-3 * first else first


def _overfit(ctx: PreflightContext, losses: list[float], k: int, constant: float | None) -> CheckResult:
    th = ctx.thresholds
    first, steps = losses[0], len(losses)
    expected = f"<= {th.overfit_pass_fraction:g} x reference in {th.overfit_steps} steps"
    if not math.isfinite(losses[-1]):
        return CheckResult("overfit_batch", "fail", losses[-1], expected,
                           f"loss became {losses[-1]} at step {steps - 1} while fitting {k} examples (from "
                           f"{first:.3g}): numerical blow-up (learning rate, log of 0, division by 0)")
    final = min(losses[-5:])
    reference = _reference(first, constant)
    use_constant = reference == constant
    ref_name = f"best constant prediction {constant:.3g}" if use_constant else f"initial loss {first:.3g}"
    ratio = final / reference if reference > 0 else (0.0 if final <= 0 else float("inf"))
    details = {"initial": first, "final": final, "constant_baseline": constant, "steps": steps, "examples": k}
    if ratio <= th.overfit_pass_fraction:
        return CheckResult("overfit_batch", "pass", ratio, expected,
                           f"{k} examples fitted: loss {first:.3g} -> {final:.3g} in {steps} steps "
                           f"({ref_name})", details)
    msg = (f"loss on {k} examples went {first:.3g} -> {final:.3g} in {steps} steps, {ratio:.0%} of the "
           f"{ref_name}")
    if ratio > th.overfit_fail_fraction:
        return CheckResult("overfit_batch", "fail", ratio, expected,
                           msg + ": the model fits nothing example-specific; the loss has a floor (softmax/sigmoid "
                                 "fed to a loss that expects logits, a (B,1) vs (B,) broadcast in a hand-written "
                                 "loss, inputs that never reach the output) or the step does not learn", details)
    return CheckResult("overfit_batch", "warn", ratio, expected,
                       msg + ": still falling slowly; a learning rate too low for this model, or raise "
                             "Thresholds.overfit_steps", details)


def _movement(moved: dict[str, bool], steps: int, wanted: int) -> CheckResult:
    frozen = [name for name, m in moved.items() if not m]
    expected = "0 unchanged parameters"
    if frozen:
        names = "; ".join(frozen[:4]) + (f"; (+{len(frozen) - 4} more)" if len(frozen) > 4 else "")
        return CheckResult("param_movement", "fail", len(frozen), expected,
                           f"{len(frozen)}/{len(moved)} parameters never changed in {min(steps, wanted)} optimizer "
                           f"steps: {names}: not given to the optimizer, learning rate 0, or gradients cleared "
                           f"between backward and step", {"unchanged": frozen})
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
        shown = "; ".join(names[:3]) + (f"; (+{len(names) - 3} more)" if len(names) > 3 else "")
        return CheckResult("stale_grad", "fail", len(names), expected,
                           f"backward accumulated into the previous step's .grad of {len(names)} parameters "
                           f"({shown}) after optimizer step {min(watch.offenders.values())}: "
                           f"optimizer.zero_grad() is missing from the training step", {"parameters": names})
    if watch.steps < 2:
        return CheckResult("stale_grad", "skip", None, expected, "fewer than 2 optimizer steps observed")
    return CheckResult("stale_grad", "pass", 0, expected,
                       f"gradients were cleared before each of {watch.steps - 1} backward passes after a step")
