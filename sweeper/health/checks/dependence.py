"""Checks that information flows only where it should, in eval mode and in the mode the model trains in (train
mode: a coupling that only BatchNorm's batch statistics explain is named as such, a pass by default):

batch_independence  the loss of example 0 sends gradient to example 0's inputs only (catches a view() used where a
                    transpose was meant, which silently mixes examples).
causality           for autoregressive sequence models: the output at position t does not depend on inputs after t
                    (catches causal masks that leak a position).
target_shift        the loss at position t does not ask for the token the model sees at position t (catches targets
                    that were not shifted by one: the model learns to copy its input).

Gradients are taken at the probe tensors of `batching.probed_forward`: float inputs, or embedding outputs. When
nothing at all reaches the output at init (a zero-initialised output layer, which gradient_flow accepts too), both
dependence checks look again on a private copy after one optimizer step, instead of calling the inputs unused or
a mask causal on no evidence.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn

from sweeper.health.common.batching import (
    call_model,
    iter_tensors,
    map_tensors,
    primary_output,
    probed_forward,
    take_examples,
)
from sweeper.health.common.context import PreflightContext, stepped_copy
from sweeper.health.result import CheckResult

_NO_PROBE = ("no float input and no nn.Embedding indexed by an input with the batch on dim 0: nothing to take "
             "input gradients at")


_BN = (nn.modules.batchnorm._BatchNorm,)


def _set_mode(ctx: PreflightContext, mode: str) -> None:
    """eval; train (the mode the model trains in); train_bn_eval (train, BatchNorm on its running statistics)."""
    ctx.model.train(mode != "eval")
    if mode == "train_bn_eval":
        for m in ctx.model.modules():
            if isinstance(m, _BN):
                m.eval()


def _batchnorms(ctx: PreflightContext) -> list[str]:
    return [name for name, m in ctx.model.named_modules() if isinstance(m, _BN)]


def _modes(ctx: PreflightContext, run) -> tuple[str, Any, list[str]]:
    """run(mode) -> (leak figure, payload) or a CheckResult (skip). Eval first (dropout off), then train mode;
    a leak seen only in train mode is re-measured with BatchNorm on its running statistics to name the cause.
    Returns (verdict kind, eval/train payload, modes checked); kind: clean, leak, train_only, batchnorm."""
    was = ctx.model.training
    try:
        first = run("eval")
        if isinstance(first, CheckResult) or first[0] != 0 and not first[0] <= ctx.thresholds.leak_tolerance:
            return ("leak", first, ["eval"]) if not isinstance(first, CheckResult) else ("skip", first, ["eval"])
        second = run("train")
        if isinstance(second, CheckResult) or second[0] <= ctx.thresholds.leak_tolerance:
            return "clean", first, ["eval", "train"]
        if _batchnorms(ctx):
            third = run("train_bn_eval")
            if not isinstance(third, CheckResult) and third[0] <= ctx.thresholds.leak_tolerance:
                return "batchnorm", second, ["eval", "train"]
        return "train_only", second, ["eval", "train"]
    finally:
        ctx.model.train(was)


def _bn_status(ctx: PreflightContext) -> str:
    """BatchNorm's train-mode coupling is by design (a BatchNorm MLP is healthy): pass unless the thresholds
    ask to flag it (batchnorm_coupling=warn|fail, e.g. contrastive losses where batch statistics leak)."""
    return ctx.thresholds.batchnorm_coupling if ctx.thresholds.batchnorm_coupling in ("warn", "fail") else "pass"


def _bn_message(ctx: PreflightContext, what: str) -> str:
    names = _batchnorms(ctx)
    head = (f"{what} in train mode only, through BatchNorm's batch statistics ({', '.join(names[:4])}"
            f"{'...' if len(names) > 4 else ''}): expected for BatchNorm, which normalises with the statistics of "
            f"the whole batch; clean in eval mode and with BatchNorm on running statistics")
    if _bn_status(ctx) == "pass":
        return (head + ". Where batch statistics must not couple examples (a contrastive loss), flag it with "
                "Thresholds(batchnorm_coupling='warn') (+health.thresholds.batchnorm_coupling=warn)")
    return (head + ". If that is intended, silence it with Thresholds(batchnorm_coupling='pass') "
            "(+health.thresholds.batchnorm_coupling=pass); otherwise use LayerNorm/GroupNorm (per example) or "
            "batches that may share statistics")


def _first_nonfinite(grads) -> list[int]:
    bad: set[int] = set()
    for g in grads:
        if g is not None and not torch.isfinite(g).all():
            bad.update((~torch.isfinite(g.detach())).flatten(1).any(1).nonzero().flatten().tolist())
    return sorted(bad)


def _nonfinite_result(name: str, what: str, bad: list[int], mode: str) -> CheckResult:
    return CheckResult(name, "fail", float("nan"), "finite input gradients",
                       f"{what} has NaN/inf input gradients at examples {bad[:6]}{'...' if len(bad) > 6 else ''} "
                       f"({mode} mode): a NaN in the forward pass (0/0 in a per-example normalisation, log of 0, "
                       f"sqrt at 0), not necessarily mixing of examples; fix the NaN first",
                       {"nonfinite_examples": bad, "mode": mode})


def _locate(ctx: PreflightContext, mode: str, objective, leaky, probes: list[str]) -> str:
    """Which module mixes: forward hooks record every module output; the gradient of the objective at each
    tells whether something after it mixes (leaky(g) for a gradient at that output, None when the output has
    no such axis). The fault lies between the last leaky output and the first clean one after it."""
    records: list[tuple[str, torch.Tensor]] = []

    def hook_for(name):
        def hook(module, args, output):
            t = output if torch.is_tensor(output) else next(iter_tensors(output), None)
            if torch.is_tensor(t) and t.is_floating_point() and t.requires_grad:
                records.append((name, t))
        return hook
    handles = [m.register_forward_hook(hook_for(name)) for name, m in ctx.model.named_modules() if name]
    try:
        _set_mode(ctx, mode)
        torch.manual_seed(ctx.seed)
        with probed_forward(ctx.model, ctx.inputs, ctx.n) as (probe, outputs):
            for h in handles:
                h.remove()
            grads = torch.autograd.grad(objective(outputs), [t for _, t in records], allow_unused=True)
    except Exception:  # noqa: BLE001 - no localisation: the probe-level message stands
        return ""
    finally:
        for h in handles:
            h.remove()
    flags = [(name, leaky(g, t)) for (name, t), g in zip(records, grads)]
    flags = [(name, f) for name, f in flags if f is not None]
    last = max((i for i, (_, f) in enumerate(flags) if f), default=None)
    if last is None:
        first = flags[0][0] if flags else "the output"
        return (f"; the module at fault: the mixing happens between {', '.join(probes)} and the output of {first} "
                f"(that module, or the forward code before it)")
    after = next((name for name, f in flags[last + 1:] if not f), None)
    before = flags[last][0]
    if after is None:
        return f"; the mixing happens after the output of {before} (in the forward code after it, or in the loss)"
    common = ".".join(a for a, b in zip(before.split("."), after.split(".")) if a == b) if "." in before else ""
    inside = f" inside {common}" if common and common not in (before, after) else ""
    return (f"; the module at fault: the mixing happens between the output of {before} and the output of "
            f"{after}{inside} (that module, or the forward code between the two)")


def _example_objective(ctx: PreflightContext, outputs, k: int = 0):
    n = ctx.n
    try:
        return ctx.loss_fn(take_examples(outputs, k, k + 1, n), take_examples(ctx.targets, k, k + 1, n)).sum(), \
            f"the loss of example {k}"
    except Exception:  # a loss that cannot take one example: fall back to the raw output
        out0 = primary_output(outputs)[k]
        gen = torch.Generator(device="cpu").manual_seed(ctx.seed)
        r = torch.randn(out0.shape, generator=gen, dtype=torch.float64).to(out0.device, out0.dtype)
        return (out0 * r).sum(), f"a random projection of example {k}'s output"


def _stepped(ctx: PreflightContext) -> PreflightContext | None:
    """The context on a private copy of the model after one textbook optimizer step on the batch (None when that
    step cannot be taken): a zero-initialised output layer has moved, so the inputs reach the output."""
    try:
        model = stepped_copy(ctx)
        return dataclasses.replace(ctx, model=model, use_reference=None)
    except Exception:  # noqa: BLE001 - no second look: the step-0 verdict stands
        return None


_AFTER_STEP = (" (measured after one optimizer step: at init nothing reaches the output, e.g. a zero-initialised "
               "output layer)")


def _second_look(ctx: PreflightContext, check, reached) -> CheckResult | None:
    """check(stepped ctx) when the copy after one step shows dependence (reached(result)); else None."""
    stepped = _stepped(ctx)
    if stepped is None:
        return None
    result = check(stepped, second_look=False)
    if not reached(result):
        return None
    result.message += _AFTER_STEP
    result.details["after_one_step"] = True
    return result


def batch_independence_check(ctx: PreflightContext, second_look: bool = True) -> CheckResult:
    n = ctx.n
    name = "batch_independence"
    if n < 2:
        return CheckResult(name, "skip", None, "", "batch of 1: nothing to mix")
    tol = ctx.thresholds.leak_tolerance
    state: dict[str, Any] = {}

    def run(mode: str):
        _set_mode(ctx, mode)
        torch.manual_seed(ctx.seed)
        with probed_forward(ctx.model, ctx.inputs, n) as (probe, outputs):
            if not probe.tensors:
                return CheckResult(name, "skip", None, "", _NO_PROBE)
            per_k = []
            for k in sorted({0, n - 1}):     # first and last: a leak that runs one way along the batch shows
                objective, what = _example_objective(ctx, outputs, k)
                per_k.append((k, torch.autograd.grad(objective, probe.tensors, allow_unused=True,
                                                     retain_graph=True)))
        state.update(what=what.replace(f"example {n - 1}", "example 0 / the last example"),
                     where=", ".join(probe.names), probes=list(probe.names))
        bad = _first_nonfinite([g for _, grads in per_k for g in grads])
        if bad:
            return float("inf"), {"nonfinite": bad, "mode": mode}
        own = other = 0.0
        leaking: dict[int, float] = {}
        for k, grads in per_k:
            for g in grads:
                if g is None:
                    continue
                g = g.detach().double()
                per_example = g.flatten(1).pow(2).sum(1).sqrt()                 # (n,)
                own += float(per_example[k].pow(2))
                others = torch.cat([per_example[:k], per_example[k + 1:]])
                other += float(others.pow(2).sum())
                for i in per_example.nonzero().flatten().tolist():
                    if i != k:
                        leaking[i] = max(leaking.get(i, 0.0), float(per_example[i]))
        own, other = math.sqrt(own), math.sqrt(other)
        ratio = other / own if own > 0 else (float("inf") if other > 0 else 0.0)
        leaks_k0 = any(g is not None and bool(g.detach()[1:].ne(0).any()) for g in per_k[0][1])
        return ratio, {"own": own, "leaking": leaking, "mode": mode, "k": 0 if leaks_k0 else n - 1}

    kind, result, modes = _modes(ctx, run)
    if kind == "skip":
        return result
    ratio, info = result
    what, where = state["what"], state["where"]
    expected = f"<= {tol:g}"
    checked = f"checked in {' and '.join(modes)} mode"
    details = {"modes_checked": modes, "mode": info["mode"]}
    if "nonfinite" in info:
        return _nonfinite_result(name, what, info["nonfinite"], info["mode"])
    if kind == "clean" and info["own"] == 0 and ratio == 0:
        again = _second_look(ctx, batch_independence_check, lambda r: r.details.get("own", 0) > 0) \
            if second_look else None
        if again is not None:
            return again
        return CheckResult(name, "warn", 0.0, expected,
                           f"{what} does not depend on the inputs at all ({where}): the inputs never reach the "
                           f"output", details)
    details["own"] = info.get("own", 0.0)
    if kind == "clean":
        return CheckResult(name, "pass", ratio, expected, f"{what} depends on example 0 only ({checked}, at {where})",
                           details)
    leaking = info["leaking"]
    examples = sorted(leaking)[:6]
    details.update(leaking_examples=sorted(leaking), cause=kind)
    if kind == "batchnorm":
        status = _bn_status(ctx)
        details["cause"] = "batchnorm_train_mode"
        return CheckResult(name, status, ratio, expected, _bn_message(ctx, f"{what} depends on other examples"),
                           details)

    k = 0 if info.get("k", 0) == 0 else n - 1

    def objective(outputs):
        return _example_objective(ctx, outputs, k)[0]

    def leaky(g, t):
        if g is None or t.dim() == 0 or t.shape[0] != n:
            return None
        g = g.detach()
        return bool(torch.cat([g[:k], g[k + 1:]]).ne(0).any())
    located = _locate(ctx, info["mode"], objective, leaky, state["probes"])
    mode_note = ("only in train mode (clean in eval mode): a train-only branch of the forward mixes examples"
                 if kind == "train_only" else "in eval mode")
    return CheckResult(name, "fail", ratio, expected,
                       f"{what} has gradient at examples {examples}{'...' if len(leaking) > 6 else ''} "
                       f"({len(leaking)} of {n} examples; ratio {ratio:.2e}; {mode_note}) via {where}: examples are "
                       f"mixed, typically a view()/reshape where a transpose/permute of the batch axis was meant"
                       f"{located}", details)


def causality_check(ctx: PreflightContext, second_look: bool = True) -> CheckResult:
    name = "causality"
    if ctx.sequence_dim is None:
        return CheckResult(name, "skip", None, "",
                           "not run: sequence_dim not given; pass sequence_dim=1 (the time axis of the outputs) for "
                           "an autoregressive model, or leave it out for a bidirectional one",
                           {"enable": "sequence_dim=..."})
    d = ctx.sequence_dim
    tol = ctx.thresholds.leak_tolerance
    n = ctx.n
    state: dict[str, Any] = {}

    def run(mode: str):
        _set_mode(ctx, mode)
        torch.manual_seed(ctx.seed)
        with probed_forward(ctx.model, ctx.inputs, n) as (probe, outputs):
            out = primary_output(outputs)
            T = out.shape[d]
            probes = [(pn, t) for pn, t in zip(probe.names, probe.tensors) if t.dim() > d and t.shape[d] == T]
            if not probes:
                return CheckResult(name, "skip", None, "", _NO_PROBE + f" and length {T} on dim {d}")
            if T < 2:
                return CheckResult(name, "skip", None, "", "sequence of length 1")
            gen = torch.Generator(device="cpu").manual_seed(ctx.seed)
            worst, first_leak, bad, reach = 0.0, None, [], 0.0
            for t in sorted({0, T // 2, T - 2}):
                o = out[0:1].narrow(d, t, 1)
                r = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
                grads = torch.autograd.grad((o * r).sum(), [p for _, p in probes], retain_graph=True,
                                            allow_unused=True)
                bad = bad or _first_nonfinite(grads)
                past = future = 0.0
                for (pn, _), g in zip(probes, grads):
                    if g is None:
                        continue
                    g0 = torch.nan_to_num(g[0:1].detach().double())
                    past += float(g0.narrow(d, 0, t + 1).pow(2).sum())
                    fut = g0.narrow(d, t + 1, T - t - 1)
                    future += float(fut.pow(2).sum())
                    pos = fut.transpose(0, d).flatten(1).abs().sum(1).nonzero().flatten()
                    if len(pos) and first_leak is None:
                        first_leak = (t, t + 1 + int(pos[0]), pn)
                ratio = math.sqrt(future) / math.sqrt(past) if past > 0 else (float("inf") if future else 0.0)
                worst = max(worst, ratio)
                reach += past + future
        state.update(T=T)
        if bad:
            return float("inf"), {"nonfinite": bad, "mode": mode}
        return (worst if first_leak else 0.0), {"first_leak": first_leak, "mode": mode, "reach": reach}

    kind, result, modes = _modes(ctx, run)
    if kind == "skip":
        return result
    worst, info = result
    expected = f"<= {tol:g}"
    details = {"modes_checked": modes, "mode": info["mode"]}
    T = state["T"]
    if "nonfinite" in info:
        return _nonfinite_result(name, "the output at a probed position", info["nonfinite"], info["mode"])
    details["reach"] = info.get("reach", 0.0)
    if kind == "clean" and info.get("reach", 1.0) == 0 and second_look:
        again = _second_look(ctx, causality_check, lambda r: r.details.get("reach", 0) > 0)
        if again is not None:
            return again
    if kind == "clean":
        return CheckResult(name, "pass", worst, expected,
                           f"outputs at positions 0, {T // 2}, {T - 2} depend on no later input (checked in "
                           f"{' and '.join(modes)} mode)", details)
    t, s_, where = info["first_leak"]
    details.update(cause=kind, position=t, leaks_from=s_)
    if kind == "batchnorm":
        details["cause"] = "batchnorm_train_mode"
        status = _bn_status(ctx)
        return CheckResult(name, status, worst, expected,
                           _bn_message(ctx, f"the output at position {t} depends on later positions"), details)

    def objective(outputs):
        o = primary_output(outputs)[0:1].narrow(d, t, 1)
        return o.sum()

    def leaky(g, x):
        if g is None or x.dim() <= d or x.shape[d] != T or x.shape[0] != n:
            return None
        return bool(g.detach()[0:1].narrow(d, t + 1, T - t - 1).ne(0).any())
    located = _locate(ctx, info["mode"], objective, leaky, [where])
    mode_note = " (only in train mode: a train-only branch of the forward)" if kind == "train_only" else ""
    return CheckResult(name, "fail", worst, expected,
                       f"output at position {t} depends on input position {s_} ({s_ - t} ahead, via {where})"
                       f"{mode_note}: the model sees the future; check the causal mask (triu diagonal, is_causal, "
                       f"mask applied after softmax) and any mixing along the sequence axis{located}", details)


def target_shift_check(ctx: PreflightContext) -> CheckResult:
    name = "target_shift"
    if ctx.sequence_dim is None or ctx.num_classes is None:
        missing = " and ".join(f"{k}=..." for k, v in (("sequence_dim", ctx.sequence_dim),
                                                       ("num_classes", ctx.num_classes)) if v is None)
        return CheckResult(name, "skip", None, "", f"not run: needs sequence_dim and num_classes (token "
                           f"prediction); pass {missing}", {"enable": missing})
    d = ctx.sequence_dim
    n = ctx.n
    was = ctx.model.training
    ctx.model.eval()
    try:
        with torch.no_grad():
            outputs = call_model(ctx.model, ctx.inputs)
    finally:
        ctx.model.train(was)
    out = primary_output(outputs)
    C = ctx.num_classes
    if d != 1 or out.dim() != 3 or out.shape[-1] != C:
        return CheckResult(name, "skip", None, "", f"output shape {tuple(out.shape)} is not (B, T, {C})")
    T = out.shape[1]
    tokens = [t for t in iter_tensors(ctx.inputs) if not t.is_floating_point() and tuple(t.shape) == (n, T)]
    if not tokens:
        return CheckResult(name, "skip", None, "", f"no integer input of shape ({n}, {T}) to compare targets with")
    # Uniform logits: d loss / d logit = (1/C - onehot(target)) * weight, so the target class at each position is
    # the most negative entry. This reads the target the LOSS uses, whatever shifting loss_fn does internally.
    probe = torch.zeros_like(out, dtype=torch.float32).requires_grad_(True)
    swapped = map_tensors(outputs, lambda t: probe if t is out else t)
    (g,) = torch.autograd.grad(ctx.loss_fn(swapped, ctx.targets), [probe])
    gmin, target = g.min(dim=-1)                                        # (B, T)
    has_target = gmin < 0
    if not has_target.any():
        return CheckResult(name, "skip", None, "", "loss gradient at uniform logits names no target class")
    same = max(float((target == x)[has_target].float().mean()) for x in tokens)
    nxt_mask = has_target[:, :-1]
    nxt = max(float((target[:, :-1] == x[:, 1:])[nxt_mask].float().mean()) if nxt_mask.any() else 0.0
              for x in tokens)
    th = ctx.thresholds.target_copy_fail
    expected = f"< {th:g}"
    details = {"same_position_match": same, "next_position_match": nxt}
    if same >= th and nxt < th:
        return CheckResult(name, "fail", same, expected,
                           f"the loss at position t asks for input token t at {same:.0%} of positions (input "
                           f"t+1 only {nxt:.0%}): targets are not shifted, the model just copies its input",
                           details)
    if same >= th:
        return CheckResult(name, "warn", same, expected,
                           f"targets equal the input at the same position ({same:.0%}) and the next ({nxt:.0%}): "
                           f"sequences are constant, the shift cannot be checked", details)
    return CheckResult(name, "pass", same, expected,
                       f"targets match the input at t for {same:.0%} of positions, at t+1 for {nxt:.0%}", details)
