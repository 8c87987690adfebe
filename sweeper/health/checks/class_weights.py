"""The `class_weights` check: does the loss weight the classes against their frequencies, or with them?

    result = class_weights_check(ctx, trace, share)    # share["class_weights"]: what labels_check reads

The loss's weight of each class is measured, not read from an argument: at a uniform prediction (all-zero
logits) the gradient of cross-entropy with `weight=w` at example i is w[y_i] (softmax - onehot) / sum(w), so its
size is proportional to w[y_i]; the same holds for any per-class weighting inside a custom loss (focal alpha, a
weighted NLL). One example per class (targets 0..C-1 against zero outputs) gives every class's weight; a loss that
cannot take that synthetic batch is measured on the preflight batch, for the classes in it.

The frequencies are the labels of the preflight batch, the loader's first batches and a random sample of its
dataset. Imbalanced data (a chi-square test against equal frequencies) with weights that are not flat is judged
by the share of the loss each class carries, frequency x weight: a rebalancing weight (inverse frequency,
its square root) narrows the spread of those shares; weights that rise with frequency (up-weighting the majority,
frequencies where their inverses belong) widen it. Widened by `class_weight_amplify` or more: fail.
"""
from __future__ import annotations

from typing import Any

import torch

from sweeper.health.common.batching import map_tensors, primary_output
from sweeper.health.common.data_sources import dataset_targets, label_view
from sweeper.health.result import CheckResult

_P_IMBALANCED = 1e-4        # chi-square p below which the class frequencies differ beyond sampling noise
_FLAT = 1.2                 # weights within 20% of each other are no weighting
_SYNTHETIC_MAX_CLASSES = 2048   # the one-example-per-class probe up to this many classes (C x C outputs)


def measured_weights(ctx, trace) -> tuple[dict[int, float], str]:
    """{class: relative weight} (mean 1 over the classes measured), and how it was measured ('' = not)."""
    if trace.outputs is None or not torch.is_tensor(ctx.targets):
        return {}, ""
    try:
        out = primary_output(trace.outputs)
    except TypeError:
        return {}, ""
    kind, y = label_view(ctx.targets, ctx.num_classes)
    if kind != "classes" or not out.is_floating_point() or out.dim() != 2 or ctx.targets.dim() != 1:
        return {}, ""
    c = out.shape[1]
    ways = [(torch.zeros_like(out.detach()), ctx.targets, "the batch")]
    if c <= _SYNTHETIC_MAX_CLASSES:                     # a (C, C) probe: every class, whatever the batch holds
        ways.insert(0, (torch.zeros(c, c, dtype=out.dtype, device=out.device),
                        torch.arange(c, device=ctx.targets.device).to(ctx.targets.dtype), "one example per class"))
    for logits, targets, how in ways:
        leaf = logits.clone().requires_grad_(True)
        try:
            with torch.enable_grad():
                loss = ctx.loss_fn(map_tensors(trace.outputs, lambda t: leaf if t is out else t.detach())
                                   if how == "the batch" else leaf, targets)
                (g,) = torch.autograd.grad(loss, [leaf], allow_unused=True)
        except Exception:  # noqa: BLE001 - a loss that needs the real batch's structure: try the next way
            continue
        if g is None or not torch.isfinite(g).all():
            continue
        size = g.detach().abs().sum(1).double().cpu()                                   # (n,)
        labels = targets.detach().cpu().long()
        per = {int(k): float(size[labels == k].mean()) for k in labels.unique().tolist() if k >= 0}
        per = {k: v for k, v in per.items() if v > 0}
        if len(per) >= 2:
            mean = sum(per.values()) / len(per)
            return {k: v / mean for k, v in per.items()}, how
    return {}, ""


def _frequencies(ctx) -> torch.Tensor | None:
    ys = [label_view(b[1], ctx.num_classes) for b in ctx.train_batches]
    sample = dataset_targets(ctx.loader_source, 256, ctx.seed) if ctx.loader_source is not None else None
    if sample is not None:
        ys.append(label_view(sample, ctx.num_classes))
    flat = [v.reshape(-1) for k, v in ys if k == "classes" and v is not None]
    if not flat:
        return None
    y = torch.cat(flat)
    y = y[y >= 0]
    return torch.bincount(y).double() if y.numel() else None


def class_weights_check(ctx, trace, share: dict) -> CheckResult:
    th = ctx.thresholds
    name = "class_weights"
    expected = f"weighted class shares no wider than {th.class_weight_amplify:g}x the raw ones"
    weights, how = measured_weights(ctx, trace)
    counts = _frequencies(ctx)
    if not weights or counts is None:
        return CheckResult(name, "skip", None, "", "not measured: needs class-index targets (n,) and outputs (n, C) "
                                                  "that the loss accepts")
    classes = [k for k in sorted(weights) if k < len(counts) and counts[k] > 0]
    if len(classes) < 2:
        return CheckResult(name, "skip", None, "", "fewer than two classes both in the labels and measured")
    f = torch.tensor([float(counts[k]) for k in classes], dtype=torch.float64)
    w = torch.tensor([weights[k] for k in classes], dtype=torch.float64)
    freq = f / f.sum()
    eff = freq * w / float((freq * w).sum())
    raw_spread, eff_spread = float(freq.max() / freq.min()), float(eff.max() / eff.min())
    share["class_weights"] = {k: float(e) for k, e in zip(classes, eff.tolist())}
    details: dict[str, Any] = {"measured_on": how, "frequency": {k: float(v) for k, v in zip(classes, freq.tolist())},
                               "weight": {k: float(v) for k, v in zip(classes, w.tolist())},
                               "loss_share": share["class_weights"], "raw_spread": raw_spread,
                               "weighted_spread": eff_spread}
    if float(w.max() / w.min()) < _FLAT:
        return CheckResult(name, "pass", 1.0, expected, f"the loss weights the {len(classes)} classes alike "
                           f"(measured on {how})", details)
    from scipy import special  # deferred: scipy, only when this runs

    expect = f.sum() / len(f)
    p = float(special.chdtrc(len(f) - 1, float(((f - expect) ** 2 / expect).sum())))
    details["p_imbalanced"] = p
    top, low = int(freq.argmax()), int(freq.argmin())
    amplify = eff_spread / raw_spread
    table = ", ".join(f"class {k}: {float(fr):.1%} of labels, weight {float(wt):.2g}"
                      for k, fr, wt in sorted(zip(classes, freq.tolist(), w.tolist()), key=lambda r: -r[1])[:4])
    if p >= _P_IMBALANCED:
        return CheckResult(name, "pass", amplify, expected,
                           f"the loss weights classes unequally ({table}) on labels balanced within sampling "
                           f"noise: a deliberate cost weighting, not judged", details)
    rises = float(torch.corrcoef(torch.stack([freq.log(), w.log()]))[0, 1]) if len(classes) > 2 else \
        (1.0 if (w[top] > w[low]) else -1.0)
    details.update(amplify=amplify, weight_frequency_correlation=rises)
    if amplify >= th.class_weight_amplify and rises > 0:
        return CheckResult(name, "fail", amplify, expected,
                           f"class weights favour the frequent classes: {table}; weighted, class {classes[top]} "
                           f"carries {float(eff[top]):.0%} of the loss instead of its {float(freq[top]):.0%} of the "
                           f"labels (spread of per-class loss shares {raw_spread:.3g}x -> {eff_spread:.3g}x): the "
                           f"weights rise with frequency where they should fall (frequencies, or counts, passed "
                           f"where their inverses belong, or weights indexed by the wrong class order) - weight "
                           f"each class by n / (C * count); if this weighting is intended, "
                           f"+health.thresholds.class_weight_amplify=<larger>",
                           {**details, "diagnosis": "class_weights_inverted"})
    return CheckResult(name, "pass", amplify, expected,
                       f"the class weights rebalance the imbalanced labels: {table}; per-class loss shares spread "
                       f"{eff_spread:.3g}x (labels {raw_spread:.3g}x)", details)
