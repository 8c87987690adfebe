"""Checks that information flows only where it should (model in eval mode, so dropout and BatchNorm's batch
statistics do not legitimately couple examples):

batch_independence  the loss of example 0 sends gradient to example 0's inputs only (catches a view() used where a
                    transpose was meant, which silently mixes examples).
causality           for autoregressive sequence models: the output at position t does not depend on inputs after t
                    (catches causal masks that leak a position).
target_shift        the loss at position t does not ask for the token the model sees at position t (catches targets
                    that were not shifted by one: the model learns to copy its input).

Gradients are taken at the probe tensors of `batching.probed_forward`: float inputs, or embedding outputs.
"""
from __future__ import annotations

import math

import torch

from .batching import call_model, iter_tensors, map_tensors, primary_output, probed_forward, take_examples
from .context import PreflightContext
from .result import CheckResult

_NO_PROBE = ("no float input and no nn.Embedding indexed by an input with the batch on dim 0: nothing to take "
             "input gradients at")


def _eval(ctx: PreflightContext):
    was = ctx.model.training
    ctx.model.eval()
    return was


def batch_independence_check(ctx: PreflightContext) -> CheckResult:
    n = ctx.n
    if n < 2:
        return CheckResult("batch_independence", "skip", None, "", "batch of 1: nothing to mix")
    tol = ctx.thresholds.leak_tolerance
    was = _eval(ctx)
    try:
        torch.manual_seed(ctx.seed)
        with probed_forward(ctx.model, ctx.inputs, n) as (probe, outputs):
            if not probe.tensors:
                return CheckResult("batch_independence", "skip", None, "", _NO_PROBE)
            try:
                objective = ctx.loss_fn(take_examples(outputs, 0, 1, n), take_examples(ctx.targets, 0, 1, n))
                what = "the loss of example 0"
            except Exception:  # a loss that cannot take one example: fall back to the raw output
                out0 = primary_output(outputs)[0]
                objective = (out0 * torch.randn_like(out0)).sum()
                what = "a random projection of example 0's output"
            grads = torch.autograd.grad(objective.sum(), probe.tensors, allow_unused=True)
    finally:
        ctx.model.train(was)
    own = other = 0.0
    leaking: dict[int, float] = {}
    for g in grads:
        if g is None:
            continue
        g = g.detach().double()
        own += float(g[0].pow(2).sum())
        per_example = g.flatten(1).pow(2).sum(1).sqrt()
        other += float(per_example[1:].pow(2).sum())
        for i in per_example[1:].nonzero().flatten().tolist():
            leaking[i + 1] = max(leaking.get(i + 1, 0.0), float(per_example[i + 1]))
    own, other = math.sqrt(own), math.sqrt(other)
    where = ", ".join(probe.names)
    expected = f"<= {tol:g}"
    if own == 0 and other == 0:
        return CheckResult("batch_independence", "warn", 0.0, expected,
                           f"{what} does not depend on the inputs at all ({where}): the inputs never reach the "
                           f"output")
    ratio = other / own if own > 0 else float("inf")
    if ratio > tol:
        examples = sorted(leaking)[:6]
        return CheckResult("batch_independence", "fail", ratio, expected,
                           f"{what} has gradient at examples {examples}{'...' if len(leaking) > 6 else ''} "
                           f"({len(leaking)}/{n - 1} others; ratio {ratio:.2e}) via {where}: examples are mixed, "
                           f"typically a view()/reshape where a transpose/permute of the batch axis was meant",
                           {"leaking_examples": sorted(leaking)})
    return CheckResult("batch_independence", "pass", ratio, expected,
                       f"{what} depends on example 0 only (checked at {where})")


def causality_check(ctx: PreflightContext) -> CheckResult:
    if ctx.sequence_dim is None:
        return CheckResult("causality", "skip", None, "", "sequence_dim not given: not an autoregressive model")
    d = ctx.sequence_dim
    tol = ctx.thresholds.leak_tolerance
    n = ctx.n
    was = _eval(ctx)
    try:
        torch.manual_seed(ctx.seed)
        with probed_forward(ctx.model, ctx.inputs, n) as (probe, outputs):
            out = primary_output(outputs)
            T = out.shape[d]
            probes = [(name, t) for name, t in zip(probe.names, probe.tensors) if t.dim() > d and t.shape[d] == T]
            if not probes:
                return CheckResult("causality", "skip", None, "", _NO_PROBE + f" and length {T} on dim {d}")
            if T < 2:
                return CheckResult("causality", "skip", None, "", "sequence of length 1")
            gen = torch.Generator(device="cpu").manual_seed(ctx.seed)
            worst, first_leak = 0.0, None
            for t in sorted({0, T // 2, T - 2}):
                o = out[0:1].narrow(d, t, 1)
                r = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
                grads = torch.autograd.grad((o * r).sum(), [p for _, p in probes], retain_graph=True,
                                            allow_unused=True)
                past = future = 0.0
                for (name, _), g in zip(probes, grads):
                    if g is None:
                        continue
                    g0 = g[0:1].detach().double()
                    past += float(g0.narrow(d, 0, t + 1).pow(2).sum())
                    fut = g0.narrow(d, t + 1, T - t - 1)
                    future += float(fut.pow(2).sum())
                    pos = fut.transpose(0, d).flatten(1).abs().sum(1).nonzero().flatten()
                    if len(pos) and first_leak is None:
                        first_leak = (t, t + 1 + int(pos[0]), name)
                ratio = math.sqrt(future) / math.sqrt(past) if past > 0 else (float("inf") if future else 0.0)
                worst = max(worst, ratio)
    finally:
        ctx.model.train(was)
    expected = f"<= {tol:g}"
    if worst > tol and first_leak:
        t, s, name = first_leak
        return CheckResult("causality", "fail", worst, expected,
                           f"output at position {t} depends on input position {s} ({s - t} ahead, via {name}): "
                           f"the model sees the future; check the causal mask (triu diagonal, is_causal, "
                           f"mask applied after softmax) and any mixing along the sequence axis")
    return CheckResult("causality", "pass", worst, expected,
                       f"outputs at positions 0, {T // 2}, {T - 2} depend on no later input")


def target_shift_check(ctx: PreflightContext) -> CheckResult:
    name = "target_shift"
    if ctx.sequence_dim is None or ctx.num_classes is None:
        return CheckResult(name, "skip", None, "", "needs sequence_dim and num_classes (token prediction)")
    d = ctx.sequence_dim
    n = ctx.n
    was = _eval(ctx)
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
