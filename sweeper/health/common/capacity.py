"""Is the model affine in its inputs? Evidence that tells "model too small" apart when the loss stays flat.

    capture = InputCapture(model)          # keeps the first forward's inputs (first 8 examples), then unhooks
    capture.affine()                        # None (cannot tell) or {"affine": bool, "error": relative error}

Two stacked nn.Linear without a nonlinearity between them compose to one affine map, which cannot separate classes
that are not linearly separable: such a model plateaus (at chance on XOR-like data) although its weights move at a
healthy rate. An affine f satisfies f(a x + (1 - a) y) = a f(x) + (1 - a) f(y) for every pair; the test checks it on
two halves of the captured examples with a = 0.3 (eval mode, no grad, RNG forked), so a ReLU/GELU/tanh network
misses by orders of magnitude more than float rounding. Only float inputs can be mixed (token ids: None).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from sweeper.health.common.batching import map_tensors, primary_output

_EXAMPLES = 8


class InputCapture:
    def __init__(self, model: nn.Module):
        self.model = model
        self.inputs: Any = None
        self._result: dict[str, Any] | None = None
        self._tried = False
        self._handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        if self.inputs is None:
            try:
                n = next((t.shape[0] for t in _tensors((args, kwargs)) if t.dim() > 0), 0)
                if n >= 2:
                    keep = min(n, _EXAMPLES)
                    self.inputs = map_tensors((tuple(args), dict(kwargs)),
                                              lambda t: t[:keep].detach().clone()
                                              if t.dim() > 0 and t.shape[0] == n else t)
            except Exception:  # noqa: BLE001 - evidence only: never into the forward pass
                self.inputs = None
        self.remove()
        return None

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def affine(self) -> dict[str, Any] | None:
        """Measured once (cached): None when there are no float inputs to mix or the forward fails."""
        if self._tried:
            return self._result
        self._tried = True
        if self.inputs is None:
            return None
        try:
            self._result = _affine(self.model, *self.inputs)
        except Exception:  # noqa: BLE001 - no evidence, no claim
            self._result = None
        return self._result


def _tensors(obj: Any):
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _tensors(v)


def _affine(model: nn.Module, args: tuple, kwargs: dict, a: float = 0.3) -> dict[str, Any] | None:
    floats = [t for t in _tensors((args, kwargs)) if t.is_floating_point() and t.dim() > 0]
    others = [t for t in _tensors((args, kwargs)) if not t.is_floating_point() and t.dim() > 0]
    if not floats or others:
        return None
    n = floats[0].shape[0]
    h = n // 2
    half = [slice(0, h), slice(h, 2 * h)]

    def part(i):
        return map_tensors((args, kwargs), lambda t: t[half[i]] if t.dim() > 0 and t.shape[0] == n else t)

    def mix():
        return map_tensors((args, kwargs), lambda t: a * t[half[0]] + (1 - a) * t[half[1]]
                           if t.dim() > 0 and t.shape[0] == n and t.is_floating_point() else t)

    def run(inputs):
        pos, kw = inputs
        return primary_output(model(*pos, **kw)).double()

    was = model.training
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    try:
        model.eval()
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            fa, fb, fm = run(part(0)), run(part(1)), run(mix())
    finally:
        model.train(was)
    line = a * fa + (1 - a) * fb
    scale = float((fa - fb).norm()) + float(line.norm()) * 1e-3
    if scale == 0:
        return None
    err = float((fm - line).norm()) / scale
    return {"affine": err < 1e-4, "error": err}

