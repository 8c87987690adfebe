"""batchnorm_stats: BatchNorm running statistics against the batch statistics they should track.

    result = batchnorm_report(model, train_batches, val_batches, thresholds)          # preflight (calibrates)
    result = batchnorm_report(model, [], val_batches, thresholds, calibrate=False, trained=True)   # end of a run

Per layer, the median over channels of |batch mean - running mean| / running std and of |log(batch var /
running var)|, with the batch statistics of the layer's input in eval-mode forwards. Preflight: a layer that
never tracked anything (num_batches_tracked 0) first gets one train-mode forward per training batch on a copy,
averaging them cumulatively (where an exponential average settles); a momentum of 0 never moves. Training batches far
from the
running statistics: they do not track (fail); validation batches far from them while the training ones are not:
the validation data is distributed differently (warn). At the end of a run (RunHealth.finish), a layer that never
updated means the model trained in eval mode (fail).
"""
from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from sweeper.health.common.batching import call_model
from sweeper.health.result import CheckResult, name_list

_BN = nn.modules.batchnorm._BatchNorm


# ---- batchnorm_stats ---------------------------------------------------------------------------------------------
def _bn_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, _BN) and m.track_running_stats and m.running_mean is not None]


def _batch_stats(model: nn.Module, batches: list, layers: list[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Per layer: per-channel mean and variance of its input over the given batches (eval-mode forwards)."""
    sums: dict[str, list] = {}
    mods = dict(model.named_modules())

    def hook(name: str):
        def fn(module, args):
            x = args[0].detach().float()                                         # (B, C, ...)
            dims = [d for d in range(x.dim()) if d != 1]
            cnt = x.numel() // x.shape[1]
            s = sums.setdefault(name, [0, 0.0, 0.0])
            s[0] += cnt
            s[1] = s[1] + x.sum(dims).double().cpu()                             # (C,)
            s[2] = s[2] + (x * x).sum(dims).double().cpu()
        return fn
    handles = [mods[name].register_forward_pre_hook(hook(name)) for name in layers]
    was = model.training
    try:
        model.eval()
        with torch.no_grad():
            for inputs, _ in batches:
                call_model(model, inputs)
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    out = {}
    for name, (cnt, s1, s2) in sums.items():
        mean = s1 / cnt
        out[name] = (mean, (s2 / cnt - mean * mean).clamp(min=0))
    return out


def _distance(bn: nn.Module, mean: torch.Tensor, var: torch.Tensor) -> tuple[float, float]:
    """Median over channels of |batch mean - running mean| / running std, and of |log(batch var / running var)|."""
    rm, rv = bn.running_mean.detach().double().cpu(), bn.running_var.detach().double().cpu()
    mean, var = mean.cpu(), var.cpu()
    z = ((mean - rm).abs() / (rv + bn.eps).sqrt()).median()
    r = ((var + bn.eps) / (rv + bn.eps)).log().abs().median()
    return float(z), float(r)


def batchnorm_report(model: nn.Module, train_batches: list, val_batches: list, th, calibrate: bool = True,
                     trained: bool = False) -> CheckResult:
    """trained: the model comes from a training run (RunHealth.finish), so a layer that never tracked is frozen."""
    layers = _bn_layers(model)
    expected = f"median |mean diff| <= {th.bn_mean_z:g} running std, var ratio within {th.bn_var_ratio:g}x"
    if not layers:
        return CheckResult("batchnorm_stats", "skip", None, "", "no BatchNorm layer with running statistics")
    if not train_batches and not val_batches:
        return CheckResult("batchnorm_stats", "skip", None, "", "no batches to compare with")
    never = [name for name, m in layers if m.num_batches_tracked is not None and int(m.num_batches_tracked) == 0]
    details: dict[str, Any] = {"layers": [n for n, _ in layers]}
    if trained and never:
        return CheckResult("batchnorm_stats", "fail", len(never), expected,
                           f"{len(never)} BatchNorm layers never updated their running statistics during training "
                           f"({name_list(never, 3)}): the model trained in eval mode (model.eval() for evaluation "
                           f"never undone by model.train()), so eval-mode predictions use the initial statistics",
                           details)
    work = model
    steps = 0
    if calibrate and never and train_batches:
        work = copy.deepcopy(model)
        steps = _calibrate(work, [n for n in never], train_batches, th)
    mods = dict(work.named_modules())
    names = [n for n, _ in layers]
    verdicts = {}
    for label, batches in (("training", train_batches[:4]), ("validation", val_batches[:4])):
        if not batches:
            continue
        stats = _batch_stats(work, batches, names)
        for name in names:
            if name in stats:
                z, r = _distance(mods[name], *stats[name])
                verdicts.setdefault(label, {})[name] = (z, r)
    details["distances"] = {k: {n: {"mean_z": z, "log_var_ratio": r} for n, (z, r) in v.items()}
                            for k, v in verdicts.items()}

    def far(d: dict) -> list[tuple[str, float, float]]:
        return sorted([(n, z, r) for n, (z, r) in d.items()
                       if z > th.bn_mean_z or r > math.log(th.bn_var_ratio)], key=lambda t: -t[1] - t[2])
    on_train, on_val = far(verdicts.get("training", {})), far(verdicts.get("validation", {}))
    worst = max([z for d in verdicts.values() for z, _ in d.values()], default=0.0)

    def desc(items) -> str:
        return name_list([f"{n} (mean off by {z:.2g} std, variance x{math.exp(r):.2g})" for n, z, r in items], 3)
    if on_train:
        momenta = {n: dict(model.named_modules())[n].momentum for n, _, _ in on_train}
        how = (f"after {steps} train-mode forwards on the training batches (momentum "
               f"{', '.join(sorted({str(m) for m in momenta.values()}))})" if steps else "as the model comes")
        return CheckResult("batchnorm_stats", "fail", worst, expected,
                           f"BatchNorm running statistics do not track the training batches' statistics {how}: "
                           f"{desc(on_train)}: " + ("momentum 0 (or too small) freezes them" if steps else
                                                    "the layers did not train in train mode on this data, or the "
                                                    "running statistics were reset / not loaded with the weights")
                           + "; eval-mode outputs then differ from training ones", details)
    if on_val:
        return CheckResult("batchnorm_stats", "warn", worst, expected,
                           f"on the validation batches, BatchNorm inputs are far from the running statistics "
                           f"{'learned from the training batches' if not trained else 'of training'}: "
                           f"{desc(on_val)}: the validation data is distributed differently from the training data "
                           f"(preprocessed or normalized differently?)"
                           + (", or the running statistics went stale (BatchNorm frozen late in training)"
                              if trained else ""), details)
    where = " and ".join(verdicts)
    return CheckResult("batchnorm_stats", "pass", worst, expected,
                       f"{len(names)} BatchNorm layers' running statistics match the {where} batch statistics "
                       f"(worst mean offset {worst:.2g} std{f', after {steps} calibration forwards' if steps else ''})",
                       details)


def _calibrate(model: nn.Module, layers: list[str], batches: list, th) -> int:
    """One train-mode forward (no grad) per training batch, up to bn_calibration_steps, on a copy. A layer with a
    momentum > 0 (or None) averages them cumulatively, which is where its exponential average settles on data
    like these; a layer with momentum 0 keeps its own and never moves, as in training."""
    mods = dict(model.named_modules())
    for name in layers:
        if mods[name].momentum is None or mods[name].momentum > 0:
            mods[name].momentum = None
    steps = max(1, min(len(batches), th.bn_calibration_steps))
    model.train()
    with torch.no_grad():
        for inputs, _ in batches[:steps]:
            call_model(model, inputs)
    model.eval()
    return steps


def batchnorm_stats_check(ctx) -> CheckResult:
    return batchnorm_report(ctx.model, ctx.train_batches, ctx.val_batches, ctx.thresholds)
