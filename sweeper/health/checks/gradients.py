"""Checks from one forward/backward at init: the initial loss, gradient flow, and custom-kernel agreement.

init_loss       L0 vs ln(num_classes), the loss of a uniform prediction.
gradient_flow   every trainable parameter gets a finite, nonzero gradient of sane size; names the dead ones.
kernel_agreement  same weights, same batch: parameter gradients with the model's custom kernels vs with their
                reference implementation (switched by the model-provided `use_reference(bool)` callable).
"""
from __future__ import annotations

import math

import torch

from sweeper.health.common.batching import embedding_param_ids, grad_values
from sweeper.health.common.context import PreflightContext
from sweeper.health.result import CheckResult, name_list

_CAUSES = {
    "no gradient": "unused in the forward pass, or the graph is cut (detach, no_grad, .data, a custom op "
                   "returning None)",
    "non-finite gradient": "overflow, or log/sqrt/division at 0 in the forward pass",
    "gradient exactly zero": "a custom op's backward or a mask blocks it, or its output is multiplied by zero",
}


def init_loss_check(ctx: PreflightContext, loss_value: float, noise: tuple[float, int] = (0.0, 0)) -> CheckResult:
    """noise: (standard error of the batch loss from its per-example losses, number of examples). Below ln(C) the
    bands widen to what chance allows on this batch: Student-t quantiles at the coverage of 3 and 5 sigmas.
    Above ln(C) they stay fixed: a uniform prediction scores exactly ln(C) on every example, so an excess is
    the init's doing, not the batch's."""
    if ctx.num_classes is None:
        return CheckResult("init_loss", "skip", loss_value, "",
                           "not run: num_classes not given, so there is no chance level ln(C) to compare with; pass "
                           "num_classes=C for a classifier or token predictor", {"enable": "num_classes=..."})
    th = ctx.thresholds
    chance = math.log(ctx.num_classes)
    se, n = noise
    deficit_warn = max(th.init_deficit_warn, _t_quantile(3.0, n) * se)
    deficit_fail = max(th.init_deficit_fail, _t_quantile(5.0, n) * se)
    excess_warn, excess_fail = th.init_excess_warn, th.init_excess_fail
    expected = f"[{chance - deficit_warn:.3g}, {chance + excess_warn:.3g}] (ln {ctx.num_classes} = {chance:.3g})"
    if not math.isfinite(loss_value):
        return CheckResult("init_loss", "fail", loss_value, expected,
                           f"loss at init is {loss_value}: overflow in the forward pass or the loss")
    if loss_value < 0:
        return CheckResult("init_loss", "fail", loss_value, expected,
                           f"loss at init is {loss_value:.3g} < 0, impossible for a cross-entropy/NLL: nll_loss was "
                           f"given probabilities (or raw scores) instead of log-probabilities; apply log_softmax "
                           f"first, or use cross_entropy on the logits")
    delta = loss_value - chance
    if delta > excess_fail or -delta > deficit_fail:
        status = "fail"
    elif delta > excess_warn or -delta > deficit_warn:
        status = "warn"
    else:
        return CheckResult("init_loss", "pass", loss_value, expected,
                           f"loss at init {loss_value:.3f} vs ln({ctx.num_classes}) = {chance:.3f}")
    if delta > 0:
        cause = ("the untrained model is confidently wrong: output layer initialised too large (scale the last "
                 "layer down or zero it), logits multiplied by a large factor, or num_classes is wrong")
    else:
        cause = ("the untrained model already beats chance: the targets leak into the inputs (e.g. unshifted "
                 "targets with a non-causal model), or num_classes is larger than the real class count")
    return CheckResult("init_loss", status, loss_value, expected,
                       f"loss at init {loss_value:.3f} is {delta:+.2f} nats from ln({ctx.num_classes}): {cause}")


def _t_quantile(sigmas: float, n: int) -> float:
    """The one-sided Student-t quantile (n - 1 degrees of freedom) with the tail mass of `sigmas` normal sigmas."""
    if n < 2:
        return 0.0
    from scipy import special  # scipy.stats' own kernels (t.isf = -stdtrit, norm.sf = ndtr(-x)), 1 s less import
    return float(-special.stdtrit(n - 1, special.ndtr(-sigmas)))


def gradient_flow_check(ctx: PreflightContext, named_grads: list[tuple[str, torch.nn.Parameter, torch.Tensor | None]],
                        after_step=None) -> CheckResult:
    """after_step(): {name: gradient} after one optimizer step on a copy. A gradient exactly zero at init is
    re-checked there before the parameter is called dead: everything upstream of a zero-initialised output
    projection gets exactly zero gradient at step 0 and a real one from step 1 on."""
    th = ctx.thresholds
    zero_at_init = [name for name, _, g in named_grads if g is not None and torch.isfinite(grad_values(g)).all()
                    and not grad_values(g).ne(0).any()]
    revived: list[str] = []
    if zero_at_init and after_step is not None:
        later = after_step()
        swapped = []
        for name, p, g in named_grads:
            g1 = later.get(name)
            if name in zero_at_init and g1 is not None and bool(grad_values(g1).ne(0).any()):
                revived.append(name)
                g = g1
            swapped.append((name, p, g))
        named_grads = swapped
    lookup = embedding_param_ids(ctx.model)
    dead: list[str] = []      # fail: "name: problem"
    causes: dict[str, str] = {}
    weak: list[str] = []      # warn: half the rows dead, vanishing or exploding
    rms: dict[str, float] = {}
    for name, p, g in named_grads:
        values = None if g is None else grad_values(g)
        if g is None:
            problem = "no gradient"
        elif not torch.isfinite(values).all():
            problem = "non-finite gradient"
        elif not values.ne(0).any():
            problem = "gradient exactly zero"
        else:
            problem = None
        if problem is not None:
            dead.append(f"{name}: {problem}")
            causes[problem] = _CAUSES[problem]
            continue
        if name in revived:
            continue                      # legitimately small after one step: not judged for size
        rms[name] = float(values[values != 0].float().pow(2).mean().sqrt())
        if g.dim() >= 2 and g.layout == torch.strided and id(p) not in lookup:
            nonzero = g != 0
            rows_zero = (~nonzero.flatten(1).any(dim=1))
            frac = float(rows_zero.float().mean())
            if frac >= th.dead_rows_warn_fraction:
                idx = rows_zero.nonzero().flatten()
                weak.append(f"{name}: {int(rows_zero.sum())}/{g.shape[0]} output rows get exactly zero gradient "
                            f"(rows {int(idx[0])}..{int(idx[-1])}: dead units, or part of a fused projection "
                            f"blocked)")
    if rms:
        # Judged on matrices only: a 1-D bias or gain can be legitimately cancelled (a bias right before a
        # BatchNorm has a true gradient of exactly zero; float rounding leaves ~1e-8 of noise). The reference is
        # the median of the upper half: many parameters behind a closed gate (a sigmoid near 0) would drag a
        # plain median down and make the healthy weights look "exploding"; vanishing is named first.
        dims = {name: p.dim() for name, p, _ in named_grads}
        ordered = sorted(rms.values())
        upper = ordered[len(ordered) // 2:]
        median = upper[len(upper) // 2]
        vanishing, exploding = [], []
        for name, r in rms.items():
            if dims[name] < 2:
                continue
            ratio = r / median if median > 0 else float("inf")
            if ratio < th.grad_rms_ratio_low:
                vanishing.append(f"{name}: gradient rms {r:.2e} is {ratio:.1e}x the typical parameter's (vanishing: "
                                 f"a closed gate - a sigmoid/tanh saturated near 0 - or a tiny factor in front of "
                                 f"it)")
            elif ratio > th.grad_rms_ratio_high:
                exploding.append(f"{name}: gradient rms {r:.2e} is {ratio:.1e}x the typical parameter's (exploding: "
                                 f"a large init scale or an unnormalised input)")
        weak += vanishing + exploding
    total = len(named_grads)
    details = {"dead": dead, "weak": weak, "grad_rms": rms, "zero_at_init_then_alive": revived}
    expected = "0 dead parameters"
    if dead:
        why = "; ".join(f"{problem}: {cause}" for problem, cause in causes.items())
        return CheckResult("gradient_flow", "fail", len(dead), expected,
                           f"{len(dead)}/{total} trainable parameters get no usable gradient: {name_list(dead)}. "
                           f"Likely cause - {why}", details)
    if weak:
        return CheckResult("gradient_flow", "warn", 0, expected, name_list(weak), details)
    later = (f" ({len(revived)} only after one optimizer step, downstream of a zero-initialised layer: "
             f"{name_list(revived, 3)})" if revived else "")
    return CheckResult("gradient_flow", "pass", 0, expected,
                       f"all {total} trainable parameters get a finite, nonzero gradient{later}", details)


def _grads(ctx: PreflightContext) -> tuple[float, dict[str, torch.Tensor | None]]:
    named = ctx.params()
    torch.manual_seed(ctx.seed)
    loss = ctx.loss()
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return float(loss.detach()), {name: (None if g is None else g.detach().clone()) for (name, _), g in
                                   zip(named, grads)}


def kernel_agreement_check(ctx: PreflightContext) -> CheckResult:
    if ctx.use_reference is None:
        return CheckResult("kernel_agreement", "skip", None, "",
                           "no use_reference toggle given: the model declares no custom kernel with a reference")
    th = ctx.thresholds
    was_training = ctx.model.training
    ctx.model.eval()  # dropout off: both passes see the same function
    try:
        loss_fast, fast = _grads(ctx)
        ctx.use_reference(True)
        try:
            loss_ref, ref = _grads(ctx)
        finally:
            ctx.use_reference(False)
    finally:
        ctx.model.train(was_training)
    dtypes = {name: p.dtype for name, p in ctx.params()}
    ref_norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in ref.values() if g is not None))
    floor = 1e-6 * ref_norm + 1e-30
    bad, worst_name, worst = [], "", 0.0
    rel_errors = {}
    for name in ref:
        gf, gr = fast[name], ref[name]
        if gf is None and gr is None:
            continue
        gf = torch.zeros_like(gr) if gf is None else gf
        gr = torch.zeros_like(gf) if gr is None else gr
        diff = float((gf.double() - gr.double()).norm())
        rel = diff / max(float(gr.double().norm()), float(gf.double().norm()), floor)
        rel_errors[name] = rel
        tol = th.kernel_rel_tol_fp32 if dtypes[name] in (torch.float32, torch.float64) \
            else th.kernel_rel_tol_low_precision
        if rel > tol:
            kind = "zero with the custom kernel" if float(gf.abs().sum()) == 0 else f"rel. error {rel:.1e}"
            bad.append((rel, f"{name}: {kind}"))
        if rel > worst:
            worst, worst_name = rel, name
    loss_rel = abs(loss_fast - loss_ref) / max(abs(loss_ref), 1e-30)
    details = {"rel_error": rel_errors, "loss_fast": loss_fast, "loss_reference": loss_ref}
    expected = f"<= {th.kernel_rel_tol_fp32:g} (fp32)"
    if bad:
        return CheckResult("kernel_agreement", "fail", worst, expected,
                           f"{len(bad)} parameter gradients differ from the reference kernel's by more than "
                           f"{th.kernel_rel_tol_fp32:g}: "
                           f"{name_list([m for _, m in sorted(bad, key=lambda b: -b[0])])}. "
                           f"Likely cause - the custom kernel's backward is wrong", details)
    if loss_rel > th.kernel_rel_tol_fp32:
        return CheckResult("kernel_agreement", "fail", loss_rel, expected,
                           f"loss differs from the reference path by {loss_rel:.2e} relative: the custom forward is "
                           f"wrong", details)
    return CheckResult("kernel_agreement", "pass", worst, expected,
                       f"all {len(rel_errors)} parameter gradients match the reference kernel (worst {worst:.1e}"
                       f"{' at ' + worst_name if worst_name else ''})", details)
