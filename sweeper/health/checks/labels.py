"""Checks of the targets: do the labels fit the model, which of them reach the loss, and how a loader mixes them.

labels        range against num_classes (or the model's output width), non-finite targets, the histogram over
              the batch and the first loader batches: one value everywhere, one class dominating, classes never
              seen; validation labels outside the range. `hint` in details explains a loss that refuses the
              targets (float class indices for cross_entropy: y.long(); int targets for BCE/MSE: y.float()).
target_share  the share of targets that reach the loss, measured exactly: d loss / d output is zero at every
              position the loss ignores (ignore_index, a mask, a zero class weight). Flags a loss that counts
              nothing, real classes dropped from per-example labels, padding counted in a sequence loss, and a
              loss that counts only the padding (an inverted mask).
class_mix     the class histogram of each of the first batches a loader yields against their pooled histogram
              (chi-square homogeneity test with Cramer's V as the effect size): class-sorted, unshuffled data.
              Scalar regression targets: batch means against the pooled spread (correlation ratio).

    result = labels_check(ctx, trace)      # trace: checks.inputs.trace_forward's outputs on the batch
"""
from __future__ import annotations

import math
from typing import Any

import torch

from sweeper.health.common.batching import map_tensors, primary_output
from sweeper.health.common.data_sources import dataset_targets, label_view
from sweeper.health.result import CheckResult


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0..2, 5, 7..8'."""
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(str(start) if start == v else f"{start}..{v}")
            start = None
    return ", ".join(out[:6]) + (" ..." if len(out) > 6 else "")


def output_width(trace) -> int | None:
    try:
        out = primary_output(trace.outputs)
        return int(out.shape[-1]) if out.dim() >= 2 and out.shape[-1] > 1 else None
    except Exception:  # noqa: BLE001 - no outputs (the model failed) or no tensor in them
        return None


def _hints(targets: Any, kind: str) -> dict[str, str]:
    """What a loss that refuses these targets most likely wants, by what it asked for (data_hint picks one from
    the loss's error): "long" (class indices), "float" (values), "shape" ((N, 1) class indices)."""
    if not torch.is_tensor(targets):
        return {}
    dtype = str(targets.dtype).replace("torch.", "")
    what = (f"holding class indices ({int(targets.min())}..{int(targets.max())})"
            if kind == "classes" and targets.numel() else "")
    hints = {"long": f"targets are {dtype} {what}: cross_entropy/nll_loss want int64 class indices - pass y.long()",
             "float": f"targets are {dtype}: binary_cross_entropy(_with_logits), mse_loss and other losses on "
                      f"values want float targets - pass y.float()"}
    if targets.dim() == 2 and targets.shape[1] == 1 and not targets.is_floating_point():
        hints["shape"] = (f"targets have shape {tuple(targets.shape)}: cross_entropy wants (N,) class indices - "
                          f"pass y.squeeze(1)")
    return hints


def labels_check(ctx, trace, share: dict | None = None) -> CheckResult:
    th = ctx.thresholds
    kind, y = label_view(ctx.targets, ctx.num_classes)
    width = output_width(trace)
    classes = ctx.num_classes or width
    source = "num_classes" if ctx.num_classes else "the model's output width"
    details: dict[str, Any] = {"kind": kind, "hint": _hints(ctx.targets, kind)}
    if kind == "none":
        return CheckResult("labels", "skip", None, "",
                           f"no tensor targets ({type(ctx.targets).__name__}): nothing to check against the inputs "
                           f"(fine for a loss that needs none)", details)
    if kind == "regression":
        t = ctx.targets.detach().float().cpu()
        nonfinite = ~torch.isfinite(t)
        mask = share.get("mask") if share else None
        if mask is not None and mask.shape == t.shape:
            nonfinite &= mask                         # NaN targets the loss masks out are missing values, fine
        bad = int(nonfinite.sum())
        if bad:
            return CheckResult("labels", "fail", bad, "finite targets",
                               f"targets hold {bad} NaN/inf values of {t.numel()}: the loss becomes NaN on them; "
                               f"clean the label column", details)
        return CheckResult("labels", "pass", None, "",
                           f"float targets read as regression values: mean {float(t.mean()):.3g}, std "
                           f"{float(t.std()) if t.numel() > 1 else 0.0:.3g}", details)
    ignore = share.get("ignored_values", set()) if share else set()
    problems, warnings, notes = [], [], []
    wrapped = wrapped_labels(ctx, kind, classes, source, ignore)
    if wrapped:
        details.update(classes=classes, diagnosis="labels_wrapped", wrapped=wrapped["evidence"],
                       fix="keep class ids in int64 (torch.long) from where they are stored to the loss")
        return CheckResult("labels", "fail", None, f"0..{classes - 1}" if classes else "", wrapped["message"],
                           details)
    for where, batches in (("targets", ctx.train_batches), ("validation targets", ctx.val_batches)):
        views = [label_view(b[1], ctx.num_classes) for b in batches]
        vals = [v for k, v in views if k == kind and v is not None]
        if not vals:
            continue
        flat = torch.cat([v.reshape(-1) for v in vals])
        negative = sorted(set(flat[flat < 0].tolist()) - ignore)
        too_big = sorted(set(flat[flat >= classes].tolist())) if classes else []
        if too_big:
            off_by_one = classes and min(flat[flat >= 0].tolist(), default=1) == 1 and max(too_big) == classes
            problems.append(f"{where} go up to {max(too_big)} but {source} is {classes}, so valid classes are "
                            f"0..{classes - 1}: " + ("labels are 1-based - subtract 1" if off_by_one else
                                                     "num_classes too small or the labels are mapped wrongly"))
        if negative:
            problems.append(f"{where} hold negative values {negative[:4]} that the loss does not ignore: class "
                            f"indices start at 0 (or give the loss ignore_index={negative[0]})")
    mix = share.get("class_mix") if share else None
    if kind == "classes" and mix is not None and mix.status == "warn":
        notes.append("the first loader batches are class-sorted (see class_mix): the histogram is not judged")
    elif kind == "classes":
        warnings += _histogram(ctx, classes, th, ignore, notes, share)
    details.update(classes=classes)
    expected = f"0..{classes - 1}" if classes else ""
    if problems:
        return CheckResult("labels", "fail", None, expected, "; ".join(problems), details)
    if warnings:
        return CheckResult("labels", "warn", None, expected, "; ".join(warnings), details)
    return CheckResult("labels", "pass", None, expected, "; ".join(notes) or f"{kind} targets within {expected}",
                       details)


_NARROW = {torch.int8: (-128, 127), torch.uint8: (0, 255), torch.int16: (-32768, 32767)}
if hasattr(torch, "uint16"):
    _NARROW[torch.uint16] = (0, 65535)


def _label_tensors(ctx) -> list[tuple[str, torch.Tensor]]:
    """Every target tensor the check can see, by where it came from: the batch, the loader's batches, the
    validation batches, a sample of the loader's dataset (stored dtype: a TensorDataset keeps int8 as int8)."""
    out = [("targets", b[1]) for b in ctx.train_batches] + [("validation targets", b[1]) for b in ctx.val_batches]
    sample = dataset_targets(ctx.loader_source, 256, ctx.seed) if ctx.loader_source is not None else None
    if sample is not None:
        out.append(("the loader's dataset targets", sample))
    return [(w, t) for w, t in out if torch.is_tensor(t) and t.numel()]


def wrapped_labels(ctx, kind: str, classes: int | None, source: str, ignore: set) -> dict[str, Any] | None:
    """Class ids wrapped around by a narrow integer dtype (int8/uint8/int16/uint16), by three signatures:
    the ids stored in a dtype that cannot hold `classes` of them; negative ids that are ids >= 128 (or 32768) in
    two's complement (v + 256 < classes); ids that stop exactly at a dtype's top (255, 65535, ...) while
    `classes` is larger and an id above it would have appeared by chance (uint8 wraps ids >= 256 onto 0..).
    None when no signature fits."""
    if kind not in ("classes", "sequence") or not classes:
        return None
    tensors = _label_tensors(ctx)
    for where, t in tensors:
        if t.dtype in _NARROW and not t.is_floating_point():
            lo, hi = _NARROW[t.dtype]
            if classes > hi + 1:
                dtype = str(t.dtype).replace("torch.", "")
                return {"evidence": {"dtype": dtype, "where": where, "classes": classes},
                        "message": f"labels wrapped by a narrow integer dtype: {where} are {dtype}, which holds "
                                   f"{lo}..{hi}, but there are {classes} classes ({source}), so class ids above {hi} "
                                   f"wrap around (mod {hi - lo + 1}) onto "
                                   + ("negative values" if lo < 0 else "other classes' ids")
                                   + f" and the model learns the wrong classes - store the labels as int64 "
                                     f"(torch.long), not {dtype}"}
    flat = torch.cat([t.detach().reshape(-1).long().cpu() for where, t in tensors
                      if not t.is_floating_point() and where != "validation targets"] or [torch.zeros(0).long()])
    if not flat.numel():
        return None
    neg = sorted(set(flat[flat < 0].tolist()) - ignore - {-100})   # -100: cross_entropy's ignore_index convention
    for bits, span in ((8, 256), (16, 65536)):
        if neg and min(neg) >= -span // 2 and all(v + span < classes for v in neg) and classes > span // 2:
            shown = ", ".join(f"{v} = {v + span}" for v in neg[:3])
            return {"evidence": {"negative": neg[:8], "bits": bits, "classes": classes},
                    "message": f"labels wrapped by a narrow integer dtype: targets hold negative ids ({shown} - "
                               f"{len(neg)} values) that are class ids >= {span // 2} in int{bits} two's complement "
                               f"({classes} classes, {source}): the labels passed through int{bits} on the way "
                               f"(int8 holds -128..127) - keep them int64 (torch.long) end to end"}
    top, n = int(flat.max()), int((flat >= 0).sum())
    for span in (128, 256, 32768, 65536):
        if top == span - 1 and classes > span:
            above = (classes - span) / classes           # share of ids above the top under a uniform label mix
            chance = math.exp(n * math.log1p(-above)) if above < 1 else 0.0
            if chance < 1e-6:
                dtype = {128: "int8", 256: "uint8", 32768: "int16", 65536: "uint16"}[span]
                return {"evidence": {"max": top, "examples": n, "classes": classes, "chance": chance},
                        "message": f"labels wrapped by a narrow integer dtype: the {n} targets seen stop at {top}, "
                                   f"the top of {dtype}, while there are {classes} classes ({source}); ids "
                                   f"{span}..{classes - 1} never appear (chance {chance:.1g} for uniform labels): "
                                   f"they wrapped around (mod {span}) onto ids 0..{classes - span - 1}, which now "
                                   f"mix two classes each - store the labels as int64 (torch.long), not {dtype}"}
    return None


def _histogram(ctx, classes: int | None, th, ignore: set, notes: list[str], ctx_share: dict | None = None
               ) -> list[str]:
    ys = [label_view(b[1], ctx.num_classes) for b in ctx.train_batches]
    flat = torch.cat([y for k, y in ys if k == "classes"])
    flat = flat[flat >= 0]
    n = flat.numel()
    if n == 0:
        return []
    counts = torch.bincount(flat, minlength=classes or 0)
    present = (counts > 0).nonzero().flatten().tolist()
    top = int(counts.argmax())
    share = float(counts[top]) / n
    batches = f"{len(ys)} batches" if len(ys) > 1 else "the batch"
    out = []
    c_eff = max(classes or 2, 2)
    if len(present) == 1:
        if c_eff * (1.0 / c_eff) ** n < 1e-3:
            return [f"all {n} targets in {batches} are class {top}: the labels were overwritten or read from the "
                    f"wrong key, or the data is sorted by class (shuffle it; pass loader=... to tell)"]
        return []
    weighted = (ctx_share or {}).get("class_weights") or {}
    if share >= th.label_dominant_share and n >= 20 and weighted.get(top, 1.0) < th.label_dominant_share:
        notes.append(f"class {top} is {share:.0%} of {n} targets in {batches}, and the loss's class weights bring "
                     f"it to {weighted[top]:.0%} of the loss (see class_weights)")
    elif share >= th.label_dominant_share and n >= 20:
        out.append(f"class {top} is {share:.0%} of {n} targets in {batches}: a model that always predicts it scores "
                   f"{share:.0%} accuracy without learning; check the labels, rebalance (weights, a sampler) or "
                   f"judge with a balanced metric")
    if classes and n / classes >= th.label_min_per_class_seen:
        missing = [c for c in range(classes) if counts[c] == 0]
        if missing:
            out.append(f"classes {_ranges(missing)} never appear in {n} targets ({batches}; about {n / classes:.0f} "
                       f"each expected): num_classes={classes} is larger than the label set, or a filter or label "
                       f"mapping dropped them")
    notes.append(f"{len(present)} classes in {n} targets, the largest {share:.0%} (class {top})")
    return out


# ---- target_share ------------------------------------------------------------------------------------------------
def contributions(ctx, trace) -> tuple[torch.Tensor | None, str]:
    """Bool mask in the targets' shape (or one per example): True where d loss / d output is nonzero."""
    if trace.outputs is None:
        return None, f"the model failed on the batch ({trace.error})"
    targets = ctx.targets
    if not torch.is_tensor(targets) or targets.dim() == 0:
        return None, f"targets are {type(targets).__name__}, not a tensor with one row per example"
    try:
        out = primary_output(trace.outputs)
    except TypeError as e:
        return None, str(e)
    if not out.is_floating_point():
        return None, "the model's output is not a float tensor"
    # the gradient at the model's outputs (float64, so a saturated softmax still gives nonzero gradients) and at
    # small random outputs (no saturation at all; a regression target that equals the output is not hit twice):
    # a target counts when either is nonzero, an ignored one is zero at both
    wide = torch.float32 if out.device.type == "mps" else torch.float64                # MPS has no float64
    noise = torch.randn(out.shape, dtype=wide, generator=torch.Generator().manual_seed(ctx.seed))
    points = [out.detach().to(wide), 0.01 * noise.to(out.device)]
    g, error = None, ""
    own = [p.to(out.dtype) for p in points] if out.dtype != wide else []
    for i, point in enumerate(points + own):     # then in the output's own dtype: a loss holding float32 class
        if g is not None and i >= len(points):   # weights refuses float64 outputs
            break
        leaf = point.clone().requires_grad_(True)
        try:
            with torch.enable_grad():
                loss = ctx.loss_fn(map_tensors(trace.outputs, lambda t: leaf if t is out else t.detach()), targets)
                (gp,) = torch.autograd.grad(loss, [leaf], allow_unused=True)
        except Exception as e:  # noqa: BLE001 - a loss that refuses float64 / substituted outputs
            error = error or f"the loss failed on the outputs: {type(e).__name__}: {e}"
            continue
        if gp is not None:
            g = gp.abs() if g is None else g + gp.abs()
    if g is None:
        return None, error or "the loss does not depend on the model's (first) output"
    g = g.detach().abs()
    t = targets
    if tuple(g.shape[:t.dim()]) == tuple(t.shape):
        return g.reshape(*t.shape, -1).sum(-1) != 0, ""               # NaN counts: it reaches the loss
    if t.numel() and g.numel() % t.numel() == 0:                  # e.g. (B*T,) targets, (B, T, V) outputs
        return g.reshape(t.numel(), -1).sum(-1).reshape(t.shape) != 0, ""
    return g.reshape(g.shape[0], -1).sum(-1) != 0, "per example"


def _padding(t: torch.Tensor) -> tuple[int | None, torch.Tensor | None]:
    """A value that fills the ends of most sequences (runs of >= 2): (value, mask of those tail positions)."""
    if t.dim() != 2 or t.shape[1] < 4 or t.is_floating_point():
        return None, None
    last = t[:, -1]
    v = int(torch.mode(last).values)
    rows = last == v
    if float(rows.float().mean()) < 0.5:
        return None, None
    same = (t == v)                                                              # (B, T)
    # trailing run: positions from the last non-v token to the end
    tail = torch.flip(torch.cumprod(torch.flip(same.long(), [1]), 1), [1]).bool() & rows[:, None]
    if float(tail.sum(1).float()[rows].mean()) < 2 or float(tail.float().mean()) < 0.1:
        return None, None
    return v, tail


def target_share_check(ctx, trace, share: dict) -> CheckResult:
    th = ctx.thresholds
    mask, how = contributions(ctx, trace)
    if mask is None:
        return CheckResult("target_share", "skip", None, "", f"not measured: {how}")
    t = ctx.targets.detach().cpu()
    mask = mask.cpu()
    share["mask"] = mask
    total, counted = mask.numel(), int(mask.sum())
    frac = counted / max(total, 1)
    expected = f">= {th.target_share_warn:g} of targets counted"
    unit = "examples" if how == "per example" or t.dim() == 1 else "target positions"
    details: dict[str, Any] = {"share": frac, "counted": counted, "total": total}
    if mask.shape == t.shape and not t.is_floating_point():
        dropped = t[~mask]
        share["ignored_values"] = set(dropped.tolist()) - set(t[mask].tolist())
        values, counts = (torch.unique(dropped, return_counts=True) if dropped.numel() else (torch.tensor([]),) * 2)
        top = sorted(zip(counts.tolist(), values.tolist()), reverse=True)[:3]
        dropped_desc = ", ".join(f"{int(v)} x{c}" for c, v in top)
        details["ignored"] = {int(v): int(c) for c, v in top}
    else:
        dropped_desc = ""
    if counted == 0:
        return CheckResult("target_share", "fail", 0.0, expected,
                           f"no target reaches the loss: d loss / d output is exactly 0 for all {total} {unit}"
                           + (f" (their values: {dropped_desc})" if dropped_desc else "")
                           + ": every target is ignored (all set to ignore_index) or masked out - check the label "
                             "masking; the model learns nothing", details)
    if mask.shape == t.shape and not t.is_floating_point() and t.dim() == 1 and counted < total:
        real = [v for v in details["ignored"] if v >= 0]
        if real and th.ignored_real_class in ("warn", "fail"):
            return CheckResult("target_share", th.ignored_real_class, frac, expected,
                               f"{total - counted} of {total} examples do not reach the loss, with real class labels "
                               f"({dropped_desc}): ignore_index (or a class weight of 0) drops class "
                               f"{real[0]}; set ignore_index to a value no class uses (-100), or, if intended, "
                               f"+health.thresholds.ignored_real_class=pass", details)
    if mask.shape == t.shape and t.dim() == 2:
        pad, tail = _padding(t)
        if pad is not None:
            tail_counted = float(mask[tail].float().mean())
            rest = mask[~tail]
            details.update(padding_value=pad, padding_share=float(tail.float().mean()))
            if tail_counted > 0.5 and (rest.numel() == 0 or float(rest.float().mean()) < 0.05):
                return CheckResult("target_share", "fail", frac, expected,
                                   f"the loss counts only the padding: the trailing runs of {pad} "
                                   f"({float(tail.float().mean()):.0%} of positions) reach it, the real targets "
                                   f"do not - the padding mask is inverted", details)
            if tail_counted > 0.5 and th.padding_in_loss in ("warn", "fail"):
                return CheckResult("target_share", th.padding_in_loss, frac, expected,
                                   f"padding counted in the loss: the trailing runs of {pad} fill "
                                   f"{float(tail.float().mean()):.0%} of target positions and reach the loss; "
                                   f"ignore them (ignore_index={pad}, or set padded targets to -100), or, if "
                                   f"intended, +health.thresholds.padding_in_loss=pass", details)
    if frac < th.target_share_warn:
        return CheckResult("target_share", "warn", frac, expected,
                           f"only {counted} of {total} {unit} ({frac:.1%}) reach the loss"
                           + (f"; ignored values: {dropped_desc}" if dropped_desc else "")
                           + ": the effective batch is tiny - check the mask / ignore_index", details)
    msg = f"{counted} of {total} {unit} ({frac:.0%}) reach the loss"
    return CheckResult("target_share", "pass", frac, expected,
                       msg + (f"; ignored: {dropped_desc}" if dropped_desc and counted < total else ""), details)


# ---- class_mix ---------------------------------------------------------------------------------------------------
def class_mix_check(ctx) -> CheckResult:
    th = ctx.thresholds
    batches = ctx.loader_batches
    expected = f"Cramer's V < {th.class_mix_cramers_v:g} (or p >= {th.class_mix_p:g})"
    sample = dataset_targets(ctx.loader_source, 256, ctx.seed) if ctx.loader_source is not None else None
    if len(batches) < 2 and (sample is None or not batches):
        return CheckResult("class_mix", "skip", None, "",
                           "not run: needs the first batches of the training loader; pass loader=<your DataLoader>"
                           + (f" ({ctx.data_notes['loader']})" if ctx.data_notes.get("loader") else ""))
    views = [label_view(b[1], ctx.num_classes) for b in batches]
    ref = label_view(sample, ctx.num_classes) if sample is not None else ("none", None)
    kinds = {k for k, _ in views}
    if kinds == {"classes"}:
        return _class_table(views, ref[1] if ref[0] == "classes" else None, th, expected)
    if kinds == {"regression"} and all(v.shape[1] == 1 for _, v in views):
        return _sorted_values(views, ref[1] if ref[0] == "regression" else None, th, expected)
    return CheckResult("class_mix", "skip", None, "",
                       f"targets read as {', '.join(sorted(kinds))}: the mix is judged for one class label or one "
                       f"value per example")


def _chi2(table: torch.Tensor) -> tuple[float, float]:
    """(p, Cramer's V) of a contingency table (rows x classes), empty rows and columns dropped."""
    from scipy import special  # deferred: scipy, only when this runs

    table = table[:, table.sum(0) > 0]
    table = table[table.sum(1) > 0]
    k, c = table.shape
    if k < 2 or c < 2:
        return 1.0, 0.0
    n = float(table.sum())
    exp = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / n
    stat = float(((table - exp) ** 2 / exp).sum())
    return float(special.chdtrc((k - 1) * (c - 1), stat)), math.sqrt(stat / (n * (min(k, c) - 1)))


def _class_table(views, sample: torch.Tensor | None, th, expected: str) -> CheckResult:
    ys = [v[v >= 0] for _, v in views]
    ref = sample[sample >= 0] if sample is not None else None
    size = max([int(y.max()) for y in ys if y.numel()] + ([int(ref.max())] if ref is not None and ref.numel() else
                                                            [])) + 1
    table = torch.stack([torch.bincount(y, minlength=size) for y in ys]).double()      # (K, C)
    k = len(ys)
    per_batch = [sorted(y.unique().tolist()) for y in ys]
    mean_classes = sum(len(b) for b in per_batch) / k
    pooled_classes = int((table.sum(0) > 0).sum())
    p, v = _chi2(table) if k >= 2 else (1.0, 0.0)
    details: dict[str, Any] = {"cramers_v": v, "p": p, "classes_per_batch": mean_classes, "batches": k}
    sorted_msg = ("the loader yields class-sorted data, so every step sees a few classes and the model chases them "
                  "- shuffle (DataLoader(..., shuffle=True))")
    shown = "; ".join(f"batch {i}: {_ranges(b)}" for i, b in enumerate(per_batch[:3]))
    if p < th.class_mix_p and v >= th.class_mix_cramers_v:
        return CheckResult("class_mix", "warn", v, expected,
                           f"the first {k} loader batches hold {mean_classes:.1f} classes each on average "
                           f"({pooled_classes} in all; {shown}): {sorted_msg}", details)
    if ref is not None and ref.numel():
        ref_counts = torch.bincount(ref, minlength=size).double()
        p2, v2 = _chi2(torch.stack([table.sum(0), ref_counts]))
        details.update(dataset_p=p2, dataset_cramers_v=v2, dataset_classes=int((ref_counts > 0).sum()))
        if p2 < th.class_mix_p and v2 >= th.class_mix_cramers_v:
            return CheckResult("class_mix", "warn", v2, expected,
                               f"the first {k} loader batches hold classes {_ranges(sorted(set(sum(per_batch, []))))}"
                               f" only ({shown}), while {ref.numel()} examples drawn at random from its dataset hold "
                               f"{int((ref_counts > 0).sum())} classes: {sorted_msg}", details)
    return CheckResult("class_mix", "pass", max(v, details.get("dataset_cramers_v", 0.0)), expected,
                       f"{k} batches hold {mean_classes:.1f} of {pooled_classes} classes each; their mix matches "
                       f"the pooled one" + (" and the dataset's" if ref is not None else ""), details)


def _sorted_values(views, sample: torch.Tensor | None, th, expected: str) -> CheckResult:
    from scipy import special  # deferred: scipy, only when this runs

    ys = [v[:, 0].double() for _, v in views]
    allv = torch.cat(ys)
    n, k = allv.numel(), len(ys)
    msg = "the data is sorted by its target - shuffle (DataLoader(..., shuffle=True))"
    details: dict[str, Any] = {"batch_means": [float(y.mean()) for y in ys]}
    eta = 0.0
    if k >= 2:
        grand = allv.mean()
        ss_between = sum(float(y.numel() * (y.mean() - grand) ** 2) for y in ys)
        ss_total = float(((allv - grand) ** 2).sum())
        if ss_total > 0 and n - k >= 1:
            ss_within = max(ss_total - ss_between, 1e-300)
            f = (ss_between / (k - 1)) / (ss_within / (n - k))
            p = float(special.fdtrc(k - 1, n - k, f))
            eta = math.sqrt(ss_between / ss_total)
            details.update(correlation_ratio=eta, p=p)
            if p < th.class_mix_p and eta >= th.class_mix_cramers_v:
                means = ", ".join(f"{float(y.mean()):.3g}" for y in ys[:4])
                return CheckResult("class_mix", "warn", eta, expected,
                                   f"the first {k} loader batches have target means {means}...: batches explain "
                                   f"{eta:.0%} (correlation ratio) of the targets' spread, so {msg}", details)
    if sample is not None and sample.numel() > 2:
        ref = sample.reshape(-1).double()
        sd = float(torch.cat([allv, ref]).std())
        if sd > 0:
            d = abs(float(allv.mean() - ref.mean())) / sd
            z = d / math.sqrt(1 / n + 1 / ref.numel())
            p2 = float(special.ndtr(-z)) * 2
            details.update(dataset_effect=d, dataset_p=p2)
            if p2 < th.class_mix_p and d >= th.class_mix_cramers_v:
                return CheckResult("class_mix", "warn", d, expected,
                                   f"the first {k} loader batches' targets (mean {float(allv.mean()):.3g}) are "
                                   f"{d:.2g} standard deviations from a random sample of the dataset's (mean "
                                   f"{float(ref.mean()):.3g}): {msg}", details)
    return CheckResult("class_mix", "pass", eta, expected,
                       f"{k} batches' targets agree with the pooled spread" +
                       (" and the dataset's" if sample is not None else ""), details)
