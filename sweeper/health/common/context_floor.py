"""The lowest loss a model can reach on a batch given what each of its outputs sees: overfit_batch's floor for
models that cannot tell some outputs apart by design.

    found = context_floor(ctx, model, (inputs, targets), n)   # None, or {"floor", "window", "outputs", "contexts"}

A per-example floor of 0 assumes every output can be fitted separately. An output that sees only the last `w`
tokens (a bigram language model sees one) cannot: positions with the same last `w` tokens but different next tokens
must share one prediction, so the loss stops at the conditional entropy of the batch, however long it trains. The
same holds for examples whose inputs are identical. The window is measured, not assumed: the gradient of the output
at positions T-1 and T/2 with respect to the input positions (embedding outputs for token ids, like the causality
check) says which positions it depends on; a contiguous window ending at the position gives `w`. The floor is then
fitted over outputs shared within each group (loss_floors.grouped_floor). An output that depends on no input at all
gets no such excuse (that is the "inputs never reach the output" bug).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from sweeper.health.common.batching import call_model, iter_tensors, primary_output, probed_forward
from sweeper.health.common.context import PreflightContext
from sweeper.health.common.loss_floors import grouped_floor


def context_floor(ctx: PreflightContext, model: nn.Module, batch: tuple[Any, Any], n: int) -> dict[str, Any] | None:
    inputs, targets = batch
    was = model.training
    model.eval()
    try:
        keys, window = _keys(ctx, model, inputs, n)
        if keys is None or int(keys.max()) + 1 == keys.numel():
            return None                                 # every output may differ: nothing is shared
        with torch.no_grad():
            outputs = call_model(model, inputs)
        floor = grouped_floor(ctx.loss_fn, outputs, targets, keys)
    except Exception:  # noqa: BLE001 - no excuse found: the plain verdict stands
        return None
    finally:
        model.train(was)
    if floor is None:
        return None
    return {"floor": floor, "window": window, "outputs": keys.numel(), "contexts": int(keys.max()) + 1}


def _ids(rows: list[tuple]) -> torch.Tensor:
    seen: dict[tuple, int] = {}
    return torch.tensor([seen.setdefault(r, len(seen)) for r in rows])


def _keys(ctx: PreflightContext, model: nn.Module, inputs: Any, n: int) -> tuple[torch.Tensor | None, int | None]:
    if ctx.sequence_dim == 1:
        tokens = [t for t in iter_tensors(inputs) if not t.is_floating_point() and t.dim() == 2 and t.shape[0] == n]
        if len(tokens) != 1:
            return None, None
        tok = tokens[0]                                                        # (n, T)
        window = _window(ctx, model, inputs, n, tok.shape[1])
        if window is None:
            return None, None
        rows = [tuple(tok[b, max(0, t - window + 1):t + 1].tolist()) for b in range(n) for t in range(tok.shape[1])]
        return _ids(rows).view(n, tok.shape[1]), window                        # (n, T) group ids
    per_example = [t.detach().reshape(n, -1).cpu() for t in iter_tensors(inputs) if t.dim() > 0 and t.shape[0] == n]
    if not per_example:
        return None, None
    rows = [tuple(torch.cat([t[b].double() for t in per_example]).tolist()) for b in range(n)]
    return _ids(rows), None                                                    # (n,) group ids


def _window(ctx: PreflightContext, model: nn.Module, inputs: Any, n: int, T: int) -> int | None:
    """How many input positions up to and including t the output at t depends on (largest over two probes);
    None when the dependence is not a window ending at t (future inputs, gaps, nothing at all)."""
    widest = 0
    gen = torch.Generator(device="cpu").manual_seed(ctx.seed)
    with probed_forward(model, inputs, n) as (probe, outputs):
        out = primary_output(outputs)
        probes = [p for p in probe.tensors if p.dim() >= 2 and p.shape[1] == T]
        if not probes or out.dim() < 2 or out.shape[1] != T:
            return None
        for t in sorted({T - 1, T // 2}):
            o = out[0:1, t]
            r = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
            grads = torch.autograd.grad((o * r).sum(), probes, retain_graph=True, allow_unused=True)
            dep = set()
            for g in grads:
                if g is not None:
                    dep |= set(g[0].detach().reshape(T, -1).ne(0).any(1).nonzero().flatten().tolist())
            if not dep or max(dep) != t or dep != set(range(min(dep), t + 1)):
                return None
            widest = max(widest, t - min(dep) + 1)
    return widest
