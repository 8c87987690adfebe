"""Checks from a short training session on a private copy of the model (the caller's model is untouched):

overfit_batch   a few examples, the full `overfit_steps` budget (no early stop, so a loss that blows up at step 20
                is seen): the loss must fall close to the lowest value the loss allows on them (loss_floors.py:
                0 for plain CE/MSE, the target entropy under label smoothing). Any non-finite loss or gradient at
                any step fails, naming the step (and the first parameter).
                Fails when the loss itself is broken (cannot tell examples apart: a (B,1)-(B,) broadcast; a floor
                reached only at infinite outputs: softmax fed to cross_entropy) or the loss stalls far from it.
param_movement  after `movement_steps` optimizer steps every trainable parameter has changed (not in the
                optimizer, lr 0, or gradients cleared after backward all leave it frozen).
update_ratio    per step, ||W_k - W_{k-1}|| / ||W_{k-1}|| of every matrix (over the rows that moved: an embedding's
                rows of tokens absent from the batch do not count) at the first `movement_steps` steps and at
                steps 10, 30 and 100; a matrix's figure is its largest. Bands as the debugging checklist states
                them: about 1e-3 healthy, a warning below 3e-4 (lr too small), a failure at 1e-5 and below (barely
                learning); a warning above 0.3 and a failure at >= 1 (the lr overwrites the weights, units die).
stale_grad      no backward accumulates into a .grad left over from before the previous optimizer.step()
                (optimizer.zero_grad() forgotten). Detected exactly with parameter hooks.

The session uses the caller's `train_step(model, batch, optimizer)` when given, so bugs in the step itself show.
"""
from __future__ import annotations

import copy
import math
import time

import torch

from sweeper.health.common.batching import call_model, grad_values, primary_output, take_examples
from sweeper.health.common.context import PreflightContext, default_train_step
from sweeper.health.common.context_floor import context_floor
from sweeper.health.common.loss_floors import LossFloors, boxed_floor, loss_floors
from sweeper.health.result import CheckResult, name_list

_LATE_STEPS = (10, 30, 100)     # update ratios measured here too: a layer behind a zero-initialised one starts slow


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
                if p.grad is not None and bool(grad_values(p.grad).ne(0).any()):
                    self.offenders.setdefault(name, self.steps)
            return None
        return hook

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


class _FiniteGradWatch:
    """Records, without a host sync per parameter, whether every accumulated gradient of a step is finite
    (post-accumulate-grad hooks); `first_bad()` names the first non-finite parameter of the step."""

    def __init__(self, named: list[tuple[str, torch.nn.Parameter]]):
        self.flags: list[tuple[str, torch.Tensor]] = []
        self.handles = [p.register_post_accumulate_grad_hook(self._hook(name)) for name, p in named]

    def _hook(self, name: str):
        def hook(p):
            if p.grad is not None:
                self.flags.append((name, torch.isfinite(grad_values(p.grad)).all()))
        return hook

    def first_bad(self) -> str | None:
        flags, self.flags = self.flags, []
        if not flags or bool(torch.stack([f for _, f in flags]).all()):
            return None
        return next(name for name, f in flags if not bool(f))

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
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    outside = [name for name, p in named if id(p) not in in_optimizer]
    watch = _StaleGradWatch([(n, p) for n, p in named if id(p) in in_optimizer], optimizer)
    finite = _FiniteGradWatch(named)
    start = {name: p.detach().clone() for name, p in named}
    initial_norm = {name: float(t.double().norm()) for name, t in start.items()}
    ratios: dict[str, float] = {}
    losses: list[float] = []
    bad_grad: tuple[int, str] | None = None
    moved: dict[str, bool] | None = None
    min_steps = max(th.movement_steps, 1)
    started = time.perf_counter()
    limited: list = []          # [context floor or None], measured once when the budget is spent unfitted

    def passing() -> bool:
        final = min(losses[-5:])
        if _left(final, losses[0], floors) <= th.overfit_pass_fraction:
            return True
        if not limited:
            limited.append(context_floor(ctx, model, batch, k) if floors is not None else None)
        return _left_by_context(final, floors, limited[0], th) <= th.overfit_pass_fraction

    try:
        while _keep_going(losses, max(th.overfit_steps, min_steps), th, started, passing):
            step = len(losses)
            before = {name: p.detach().clone() for name, p in named if p.dim() >= 2} \
                if step < th.movement_steps or step in _LATE_STEPS else None
            loss = float(step_fn(model, batch, optimizer))
            losses.append(loss)
            culprit = finite.first_bad()
            if culprit is not None:
                bad_grad = (step, culprit)
            if before is not None:
                for name, p in named:
                    if name in before and initial_norm[name] > 0:   # a zero-initialised matrix has no scale yet
                        r = _ratio(before[name], p.detach())
                        if r is not None:
                            ratios[name] = max(ratios.get(name, 0.0), r)
            if step + 1 == th.movement_steps:
                moved = {name: bool((p.detach() != start[name]).any()) for name, p in named}
            if not math.isfinite(loss) or bad_grad is not None:
                break                      # the rest of the session would only train on NaN
    finally:
        watch.remove()
        finite.remove()
    if moved is None:  # the session stopped (non-finite loss) before movement_steps
        moved = {name: bool((p.detach() != start[name]).any()) for name, p in named}
    if bad_grad is not None and math.isfinite(losses[-1]):
        overfit = CheckResult("overfit_batch", "fail", bad_grad[0], "finite loss and gradients",
                              f"gradient of {bad_grad[1]} became non-finite at step {bad_grad[0]} while fitting {k} "
                              f"examples (loss still {losses[-1]:.3g}): overflow in the backward pass (exp of "
                              f"growing logits in a hand-written loss, division by a vanishing norm)",
                              {"step": bad_grad[0], "parameter": bad_grad[1], "steps": len(losses)})
    else:
        if not limited and floors is not None and math.isfinite(losses[-1]) and \
                _left(min(losses[-5:]), losses[0], floors) > th.overfit_pass_fraction:
            limited.append(context_floor(ctx, model, batch, k))   # what the model's outputs see allows less
        overfit = _overfit(ctx, losses, k, floors, _confined(ctx, model, batch, floors),
                           limited[0] if limited else None)
    return [overfit, _movement(moved, len(losses), th.movement_steps, outside),
            _update_ratio(ctx, ratios), _stale(watch, len(losses), outside)]


def _ratio(old: torch.Tensor, new: torch.Tensor) -> float | None:
    """||new - old|| / ||old|| over the rows that moved (all rows of a dense layer; an embedding's looked-up rows)."""
    step = (new.double() - old.double()).flatten(1)                        # (rows, rest)
    rows = step.ne(0).any(1)                                               # (rows,)
    w = float(old.double().flatten(1)[rows].norm()) if bool(rows.any()) else float(old.double().norm())
    return float(step.norm()) / w if w > 0 else None


def _confined(ctx: PreflightContext, model, batch, floors: LossFloors | None) -> str | None:
    """When the trained model's outputs sit pinned at the edges of a narrow range [lo, hi] (a softmax,
    sigmoid, tanh or clamp as its last operation) and no output inside that range could fit the examples,
    say so: a loss that expects unbounded logits is then fed squashed values."""
    if floors is None or floors.gap <= 0:
        return None
    try:
        with torch.no_grad():
            out = primary_output(call_model(model, batch[0])).detach().double()
        lo, hi = float(out.min()), float(out.max())
        span = hi - lo
        if not span > 0:
            return None
        pinned = float(((out - lo).abs() <= 0.02 * span).logical_or((hi - out).abs() <= 0.02 * span)
                       .double().mean())
        if pinned < 0.5:
            return None
        boxed = boxed_floor(ctx.loss_fn, call_model(model, batch[0]), batch[1], lo, hi)
        if boxed is None or boxed - floors.free < 0.5 * floors.gap:
            return None
        return (f"the model's outputs are pinned at the edges of [{lo:.3g}, {hi:.3g}] ({pinned:.0%} of entries), "
                f"and no output inside that range scores below {boxed:.3g}: the model squashes its outputs (a "
                f"softmax, sigmoid, tanh or clamp as its last operation) before a loss that expects unbounded "
                f"logits - return the raw logits")
    except Exception:  # noqa: BLE001 - no diagnosis, the plain message stands
        return None


def _left(loss: float, first: float, floors: LossFloors | None) -> float:
    """Share of the achievable improvement still left: 0 = fitted as well as the loss allows, 1 = no better
    than one output shared by all examples. Without floors (or when a shared output already fits, i.e. the
    targets are all alike) the initial loss and zero are the ends of the scale."""
    if floors is None or floors.gap <= 1e-3 * first:
        return loss / first if first > 0 else 0.0
    return (loss - floors.free) / floors.gap


def _left_by_context(final: float, floors: LossFloors | None, limited: dict | None, th) -> float:
    """The share of the gap left when the floor is what the model's outputs can see (context_floor.py); inf when
    that floor does not apply (none found, or it leaves no gap: the inputs would not matter at all)."""
    if floors is None or limited is None or floors.constant - limited["floor"] <= th.loss_pairing_gap * floors.constant:
        return math.inf
    return (final - limited["floor"]) / (floors.constant - limited["floor"])


def _keep_going(losses: list[float], budget: int, th, started: float, passing) -> bool:
    """The whole budget, always (a blow-up late in it must be seen); past it, only while the examples are not
    yet fitted and the loss still falls (up to overfit_max_steps / _seconds)."""
    if len(losses) < budget:
        return True
    return (not passing() and len(losses) < th.overfit_max_steps and not _plateaued(losses, th.overfit_plateau)
            and time.perf_counter() - started <= th.overfit_max_seconds)


def _plateaued(losses: list[float], tolerance: float) -> bool:
    """No longer falling: the last fifth of the session is within `tolerance` of the fifth before it."""
    n = max(5, len(losses) // 5)
    if len(losses) < 2 * n:
        return False
    last, prev = sum(losses[-n:]) / n, sum(losses[-2 * n:-n]) / n
    return prev - last <= tolerance * abs(prev)


def _overfit(ctx: PreflightContext, losses: list[float], k: int, floors: LossFloors | None,
             confined: str | None = None, limited: dict | None = None) -> CheckResult:
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
    if ctx.num_classes is not None and min(losses) < 0:
        return CheckResult("overfit_batch", "fail", min(losses), expected,
                           f"the loss went negative ({min(losses):.3g}), impossible for a cross-entropy/NLL: nll_loss "
                           f"was given probabilities (or raw scores) instead of log-probabilities; apply "
                           f"log_softmax first, or use cross_entropy on the logits", details)
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
    left_seen = _left_by_context(final, floors, limited, th)
    if math.isfinite(left_seen):
        details.update(context_floor=limited["floor"], window=limited["window"], left_by_context=left_seen)
        if left_seen <= th.overfit_pass_fraction:
            sees = (f"each output depends on the last {limited['window']} input position(s)" if limited["window"]
                    else "some examples have identical inputs")
            return CheckResult("overfit_batch", "pass", left_seen, expected,
                               msg + f"; at the floor of what the model sees ({limited['floor']:.3g}): {sees}, so the "
                                     f"{limited['outputs']} outputs fall into {limited['contexts']} contexts that must "
                                     f"share a prediction", details)
    plateau = _plateaued(losses, th.overfit_plateau)
    if left > th.overfit_fail_fraction and confined:
        return CheckResult("overfit_batch", "fail", left, expected, msg + "; " + confined, details)
    if left > th.overfit_fail_fraction and plateau:
        return CheckResult("overfit_batch", "fail", left, expected,
                           msg + f"; stuck with {left:.0%} of the gap left: the model fits nothing example-specific"
                                 " (inputs that never reach the output, a step that does not learn)", details)
    if plateau:
        return CheckResult("overfit_batch", "warn", left, expected,
                           msg + f"; stopped falling with {left:.0%} of the gap left: the model fits the examples only "
                                 f"in part (too small for them, or a learning rate too low to go further)", details)
    return CheckResult("overfit_batch", "warn", left, expected,
                       msg + f"; {left:.0%} of the gap left and still falling when the budget ran out: learning "
                             f"rate too low for this model, or raise Thresholds.overfit_max_steps", details)


def _movement(moved: dict[str, bool], steps: int, wanted: int, outside: list[str] = ()) -> CheckResult:
    frozen = [name for name, m in moved.items() if not m]
    expected = "0 unchanged parameters"
    missing = [name for name in frozen if name in outside]
    if missing:
        return CheckResult("param_movement", "fail", len(frozen), expected,
                           f"{len(missing)}/{len(moved)} trainable parameters are not in the optimizer's param_groups "
                           f"and never changed: {name_list(missing)}: build the optimizer from model.parameters() "
                           f"after every layer exists (or add a param group for them)",
                           {"unchanged": frozen, "not_in_optimizer": missing})
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
    if lo <= th.update_ratio_low_fail:
        return CheckResult("update_ratio", "fail", lo, expected,
                           f"{lo_name}: update/weight ratio {lo:.1e} per step at most (about 1e-3 is healthy; "
                           f"{th.update_ratio_low_fail:g} and below barely learns): learning rate far too low, or its "
                           f"gradient vanishes", details)
    if hi > th.update_ratio_high:
        return CheckResult("update_ratio", "warn", hi, expected,
                           f"{hi_name}: update/weight ratio {hi:.2g} per step ({len(too_high)} matrices above "
                           f"{th.update_ratio_high:g}): learning rate high for this init scale", details)
    if lo < th.update_ratio_low:
        return CheckResult("update_ratio", "warn", lo, expected,
                           f"{lo_name}: update/weight ratio {lo:.1e} per step at most (about 1e-3 is healthy): this "
                           f"matrix learns slowly - learning rate too low, or its gradient vanishes", details)
    return CheckResult("update_ratio", "pass", hi, expected,
                       f"update/weight ratios {lo:.1e}..{hi:.1e} per step over {len(live)} matrices", details)


def _stale(watch: _StaleGradWatch, steps: int, outside: list[str] = ()) -> CheckResult:
    expected = "0 parameters"
    note = (f" ({len(outside)} parameters outside the optimizer not judged: its zero_grad never clears them; "
            f"see param_movement)" if outside else "")
    if watch.offenders:
        names = sorted(watch.offenders)
        return CheckResult("stale_grad", "fail", len(names), expected,
                           f"backward accumulated into the previous step's .grad of {len(names)} parameters "
                           f"({name_list(names, 3)}) after optimizer step {min(watch.offenders.values())}: "
                           f"optimizer.zero_grad() is missing from the training step", {"parameters": names})
    if watch.steps < 2:
        return CheckResult("stale_grad", "skip", None, expected, "fewer than 2 optimizer steps observed" + note)
    return CheckResult("stale_grad", "pass", 0, expected,
                       f"gradients were cleared before each of {watch.steps - 1} backward passes after a step" + note)
