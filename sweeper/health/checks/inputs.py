"""The `inputs` check: what goes into the model, tensor by tensor (the checklist's first item: inputs
standardized, mean about 0 and std about 1).

    result, trace = inputs_check(ctx)        # ctx: a PreflightContext (runner.preflight builds it)

For every input tensor: dtype, shape, mean, std, range, non-finite entries. A tensor is judged as the model's
first layer receives it: one eval-mode forward with pre-hooks on every leaf module finds the first module fed
the tensor's values unchanged (reshaped or cast), or else the first fed a tensor of the same size (the model's
own preprocessing, e.g. x / 255 inside forward). Integer ids fed to an nn.Embedding are token indices, not
numbers: never a warning. A tensor that a normalization layer receives first is the model's to standardize.
With validation batches, each tensor's statistics are compared with the training ones (a validation pipeline
that normalizes differently). `standardized(inputs, names)` is what attribution.py re-runs other checks on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from sweeper.health.common.batching import call_model, map_tensors
from sweeper.health.common.data_sources import batch_len, named_inputs
from sweeper.health.result import CheckResult

_NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm,
          nn.LocalResponseNorm)
_EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)
_BN = nn.modules.batchnorm._BatchNorm
_AFFINE = (nn.Linear, nn.modules.conv._ConvNd)


@dataclass
class Trace:
    """What one eval-mode forward showed: per input name, the first leaf module that received it (or a tensor
    of its size derived from it), the statistics of what that module got, and the model's outputs."""

    consumers: dict[str, tuple[str, nn.Module, bool]] = field(default_factory=dict)   # name -> (module, m, direct)
    seen: dict[str, dict[str, float]] = field(default_factory=dict)                   # name -> stats as consumed
    batchnorm_after: dict[str, str] = field(default_factory=dict)     # module -> the BatchNorm fed its output as is
    outputs: Any = None
    error: str | None = None


def trace_forward(model: nn.Module, inputs: Any) -> Trace:
    """One no-grad eval-mode forward with pre-hooks on leaf modules (mode restored; buffers are the caller's)."""
    n = batch_len(inputs)
    raw = [(name, t) for name, t in named_inputs(inputs) if torch.is_tensor(t) and t.dim() > 0 and t.shape[0] == n]
    flat = {name: t.detach().reshape(-1) for name, t in raw}
    trace = Trace()
    names = {id(m): name for name, m in model.named_modules()}
    # leaves that hold state (Linear, Conv, Embedding, norms): parameter-free ones (Flatten, Dropout in eval,
    # ReLU) pass the values on or change them, and the layer after them is the one that matters
    leaves = [m for m in model.modules() if not any(True for _ in m.children())
              and (any(True for _ in m.parameters(recurse=False)) or any(True for _ in m.buffers(recurse=False)))]

    def equal(arg: torch.Tensor, x: torch.Tensor) -> bool:
        if arg.numel() != x.numel():
            return False
        if arg.dtype == x.dtype:
            return torch.equal(arg.detach().reshape(-1), x)
        return arg.is_floating_point() and torch.equal(arg.detach().reshape(-1).double(), x.double())

    produced: dict[str, torch.Tensor] = {}                  # leaf -> its output (a BatchNorm may take it next)

    def hook(module, args, kwargs=None):
        arg = next((a for a in list(args) + list((kwargs or {}).values()) if torch.is_tensor(a)), None)
        if arg is None:
            return
        if isinstance(module, _BN):
            for leaf, out in produced.items():
                if out is arg:
                    trace.batchnorm_after.setdefault(leaf, names.get(id(module), "?"))
        matches = {name for name, x in flat.items() if equal(arg, x)}
        for name, x in flat.items():
            known = trace.consumers.get(name)
            if name in matches and (known is None or not known[2]):          # direct use beats a derived one
                trace.consumers[name] = (names.get(id(module), "?"), module, True)
                trace.seen.pop(name, None)
            elif known is None and not matches and arg.is_floating_point() and arg.numel() == x.numel():
                trace.consumers[name] = (names.get(id(module), "?"), module, False)   # the model's preprocessing
                trace.seen[name] = tensor_stats(arg.detach())
    def keep(module, args, output):
        if torch.is_tensor(output):
            produced[names.get(id(module), "?")] = output

    was = model.training
    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in leaves]
    handles += [m.register_forward_hook(keep) for m in leaves]
    try:
        model.eval()
        with torch.no_grad():
            trace.outputs = call_model(model, inputs)
    except Exception as e:  # noqa: BLE001 - the init backward reports a model that fails on its batch
        trace.error = f"{type(e).__name__}: {e}"
    finally:
        for h in handles:
            h.remove()
        model.train(was)
        produced.clear()
    return trace


def tensor_stats(t: torch.Tensor) -> dict[str, Any]:
    """mean/std/min/max/rms over the finite entries (float64), the share of non-finite ones, and per-feature
    (2-D: columns; 4-D/5-D: channels) mean and std."""
    x = t.detach().cpu()
    x = x.double() if x.is_floating_point() else x.to(torch.float64)
    finite = torch.isfinite(x)
    bad = int((~finite).sum())
    vals = x[finite]
    out: dict[str, Any] = {"nonfinite": bad, "numel": x.numel(), "dtype": str(t.dtype).replace("torch.", ""),
                           "shape": tuple(t.shape)}
    if bad:
        rows = (~finite).reshape(x.shape[0], -1).any(1).nonzero().flatten() if x.dim() > 0 else torch.tensor([0])
        out["first_bad_example"] = int(rows[0]) if len(rows) else 0
    if vals.numel() == 0:
        return {**out, "mean": math.nan, "std": math.nan, "min": math.nan, "max": math.nan, "rms": math.nan}
    mean, std = float(vals.mean()), float(vals.std(unbiased=False))
    out.update(mean=mean, std=std, min=float(vals.min()), max=float(vals.max()),
               rms=math.sqrt(mean * mean + std * std),
               integral=bool(torch.equal(vals, vals.round())))
    if not bad and x.dim() in (2, 4, 5) and x.shape[1] > 1:
        per = x.transpose(0, 1).reshape(x.shape[1], -1)                       # (features, values)
        out["feature_mean"], out["feature_std"] = per.mean(1), per.std(1, unbiased=False)
    return out


def _judge(stats: dict[str, Any], th) -> list[str]:
    """Why a tensor is far from standardized ([] when it is not). With per-feature (per-channel) statistics, a
    minority of features out of line is named as such: the tensor's overall figures would blame all of them."""
    mean, std, rms = stats["mean"], stats["std"], stats["rms"]
    if not math.isfinite(rms):
        return []
    fm, fs = stats.get("feature_mean"), stats.get("feature_std")
    if fm is not None:
        frms = (fm ** 2 + fs ** 2).sqrt()
        bad = (frms > th.input_scale_high) | (fm.abs() > th.input_offset_ratio * fs.clamp(min=1.0))
        live = int((frms > 0).sum())
        if 0 < int(bad.sum()) <= live // 2:
            stats["bad_features"] = bad.nonzero().flatten().tolist()
            return ["features"]
    why = []
    if abs(mean) > th.input_offset_ratio * max(std, 1.0):
        why.append("offset")                      # the mean dominates: an offset, whatever the overall scale
    if std > th.input_scale_high or (rms > th.input_scale_high and not why):
        why.append("scale")
    elif 0 < rms < th.input_scale_low:
        why.append("tiny")
    return why


def _describe(stats: dict[str, Any]) -> str:
    return (f"mean {stats['mean']:.3g}, std {stats['std']:.3g}, range [{stats['min']:.3g}, {stats['max']:.3g}]")


def _short(stats: dict[str, Any], why: list[str], name: str) -> str:
    """'inputs: mean 127, std 74' or 'inputs features 3 (mean 4.5e+04, std 2e+04)' for other checks' messages."""
    if "features" in why:
        fm, fs = stats["feature_mean"], stats["feature_std"]
        axis = "feature" if len(stats["shape"]) == 2 else "channel"
        return f"{name} {axis}s " + ", ".join(f"{i} (mean {float(fm[i]):.3g}, std {float(fs[i]):.3g})"
                                              for i in stats["bad_features"][:3])
    return f"{name}: mean {stats['mean']:.3g}, std {stats['std']:.3g}"


def _fix(stats: dict[str, Any], why: list[str], name: str) -> str:
    if "features" in why:
        idx = stats["bad_features"]
        fm, fs = stats["feature_mean"], stats["feature_std"]
        shown = ", ".join(f"{i} (mean {float(fm[i]):.3g}, std {float(fs[i]):.3g})" for i in idx[:3])
        more = f" (+{len(idx) - 3} more)" if len(idx) > 3 else ""
        axis = "feature" if len(stats["shape"]) == 2 else "channel"
        return (f"{axis}s {shown}{more} of {name} are far from standardized while the others are not: "
                f"standardize each {axis} with the training set's mean and std ((x - mean) / std)")
    pixels = stats["min"] >= 0 and 1 < stats["max"] <= 255 and stats.get("integral", False)
    if pixels and ("scale" in why or "offset" in why):
        return (f"{name} looks like raw 0-255 pixels ({_describe(stats)}): divide by 255 and standardize "
                f"((x / 255 - mean) / std per channel, e.g. transforms.Normalize)")
    kind = {"scale": "far too large in scale", "tiny": "far too small in scale",
            "offset": "offset far from 0 relative to its spread"}[why[0]]
    return (f"{name} is {kind} ({_describe(stats)}, rms {stats['rms']:.3g}): standardize it "
            f"((x - mean) / std with the training set's statistics) so the first layer sees mean about 0, std about 1")


def inputs_check(ctx) -> tuple[CheckResult, Trace]:
    th = ctx.thresholds
    trace = trace_forward(ctx.model, ctx.inputs)
    n = batch_len(ctx.inputs)
    per: dict[str, dict[str, Any]] = {}
    notes, flagged, broken = [], [], []
    standardize: dict[str, str] = {}
    skipped = []
    summary: dict[str, str] = {}
    for name, t in named_inputs(ctx.inputs):
        if not torch.is_tensor(t):
            skipped.append(f"{name} ({type(t).__name__}: not a tensor)")
            continue
        if t.dim() == 0 or t.shape[0] != n:
            skipped.append(f"{name} (shape {tuple(t.shape)}: no example dim)")
            continue
        if t.dtype == torch.bool or t.is_complex():
            skipped.append(f"{name} ({t.dtype}: a mask)")
            continue
        consumer = trace.consumers.get(name)
        if not t.is_floating_point():
            if consumer is None or isinstance(consumer[1], _EMBEDDINGS) or not consumer[2] and name not in trace.seen:
                per[name] = {"dtype": str(t.dtype), "role": "ids"}
                notes.append(f"{name}: integer ids {int(t.min())}..{int(t.max())}"
                             + (f" into {consumer[0]}" if consumer else ""))
                continue
        stats = tensor_stats(t)
        per[name] = stats
        if stats["nonfinite"]:
            broken.append(f"{name}: {stats['nonfinite']} of {stats['numel']} entries are NaN/inf (first in example "
                          f"{stats['first_bad_example']}): the data pipeline produced them (a division by 0 in "
                          f"normalization, a missing value); clean or impute them")
            continue
        judged, where = stats, ""
        if consumer is not None and isinstance(consumer[1], _NORMS):
            notes.append(f"{name}: {_describe(stats)}, normalized by the model's first layer {consumer[0]}")
            stats["role"] = "normalized by the model"
            continue
        if consumer is not None and consumer[2] and isinstance(consumer[1], _AFFINE) and \
                consumer[0] in trace.batchnorm_after:
            # Linear/conv straight into BatchNorm: BatchNorm removes any per-unit offset and scale of W x + b, in
            # the forward and in the gradient (its backward sums to zero over the batch), so the input's offset
            # and scale cannot hurt training
            notes.append(f"{name}: {_describe(stats)}, into {consumer[0]} whose output "
                         f"{trace.batchnorm_after[consumer[0]]} normalizes (offset and scale do not matter)")
            stats["role"] = "normalized after the first layer"
            continue
        if consumer is not None and not consumer[2] and name in trace.seen:
            judged, where = trace.seen[name], f" (as {consumer[0]} receives it after the model's own preprocessing)"
        why = _judge(judged, th)
        if why:
            flagged.append(name)
            standardize[name] = "features" if len(stats["shape"]) in (2, 4, 5) else "global"
            msg = _fix(judged, why, name)
            notes.insert(len(flagged) - 1, msg + where)
            stats["why"] = why
            summary[name] = _short(judged, why, name)
        else:
            notes.append(f"{name}: {_describe(judged)}{where}")
    shift = _val_shift(ctx, per, th)
    details = {"tensors": {k: {kk: vv for kk, vv in v.items() if kk not in ("feature_mean", "feature_std")}
                           for k, v in per.items()},
               "flagged": flagged, "summary": summary, "standardize": standardize, "skipped": skipped,
               "val_shift": shift}
    expected = f"rms in [{th.input_scale_low:g}, {th.input_scale_high:g}], |mean| <= {th.input_offset_ratio:g} std"
    worst = max((per[f]["rms"] for f in flagged), default=None)
    if broken:
        return CheckResult("inputs", "fail", len(broken), "finite inputs", "; ".join(broken), details), trace
    if not per:
        return CheckResult(
            "inputs",
            "skip",
            None,
            "",
            "no input tensor with one row per example to look at" + (f": {'; '.join(skipped)}" if skipped else ""),
            details,
        ), trace
    if flagged or shift:
        parts = [notes[i] for i in range(len(flagged))] + [s["message"] for s in shift]
        value = worst if worst is not None else max(s["sigmas"] for s in shift)
        details["cause"] = "not_standardized" if flagged else "val_shift"
        return CheckResult("inputs", "warn", value, expected, "; ".join(parts), details), trace
    return CheckResult(
        "inputs",
        "pass",
        max((v.get("rms", 0.0) for v in per.values()), default=0.0),
        expected,
        "; ".join(notes) + (f" (not judged: {'; '.join(skipped)})" if skipped else ""),
        details,
    ), trace


def _val_shift(ctx, per: dict[str, dict[str, Any]], th) -> list[dict[str, Any]]:
    """Validation input tensors whose mean or spread differs from the training ones far beyond batch noise."""
    out = []
    for inputs, _ in getattr(ctx, "val_batches", [])[:1]:
        for name, t in named_inputs(inputs):
            train = per.get(name)
            if train is None or "mean" not in train or not torch.is_tensor(t) or not t.is_floating_point():
                continue
            if train.get("role") == "normalized by the model":
                continue
            val = tensor_stats(t)
            if val["nonfinite"] or not math.isfinite(val["mean"]):
                continue
            s_train = max(train["std"], 1e-12)
            sigmas = abs(val["mean"] - train["mean"]) / s_train
            ratio = max(val["std"], 1e-12) / s_train
            if sigmas > th.val_shift_sigmas or not 1 / th.val_scale_ratio <= ratio <= th.val_scale_ratio:
                out.append(
                    {
                        "name": name,
                        "sigmas": sigmas,
                        "std_ratio": ratio,
                        "message": f"validation {name} ({_describe(val)}) is far from training {name} "
                        f"({_describe(train)}): mean {sigmas:.2g} training stds away, std "
                        f"{ratio:.2g}x: the validation data is not preprocessed like the training "
                        f"data (normalize both with the training set's statistics)",
                    }
                )
    return out


def standardized(inputs: Any, how: dict[str, str]) -> Any:
    """`inputs` with the named tensors standardized by their own statistics (per feature/channel where `how`
    says "features"); what the flagged inputs would look like after the fix the check recommends."""
    targets = {name for name in how}
    lookup = {id(t): name for name, t in named_inputs(inputs) if torch.is_tensor(t)}

    def fix(t: torch.Tensor) -> torch.Tensor:
        name = lookup.get(id(t))
        if name not in targets:
            return t
        x = t.detach().double()
        if how[name] == "features" and x.dim() in (2, 4, 5):
            dims = [d for d in range(x.dim()) if d != 1]
            mean, std = x.mean(dims, keepdim=True), x.std(dims, keepdim=True, unbiased=False)
        else:
            mean, std = x.mean(), x.std(unbiased=False)
        out = (x - mean) / std.clamp(min=1e-8)
        return out.to(t.dtype if t.is_floating_point() else torch.float32)

    return map_tensors(inputs, fix)
