"""What the loss itself allows on a batch, with no model in the way: the references of the overfit check.

    floors = loss_floors(loss_fn, outputs, targets)   # outputs: the model's outputs on the batch (detached)
    floors.constant    # best single output shared by every example (the mean / the label frequencies)
    floors.free        # best separate output per example: what a perfect memoriser reaches (0 for plain CE/MSE)
    floors.saturating  # the free optimum only lies at infinity: doubling the fitted outputs does not raise the loss

Both fits optimise output tensors directly with L-BFGS (cheap: no model). A model that fits its examples closes
the gap between `constant` and `free`; a loss whose `free` equals `constant` cannot tell examples apart (a
(B,1) vs (B,) broadcast pairs every output with every target); a loss with a positive floor that it approaches
only as the outputs grow without bound squashes them first (softmax or sigmoid fed to a loss that expects
logits). A floor reached at finite outputs is legitimate: label smoothing, soft or noisy targets.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from sweeper.health.common.batching import map_tensors, primary_output


@dataclass(frozen=True)
class LossFloors:
    constant: float
    free: float
    saturating: bool

    @property
    def gap(self) -> float:
        return self.constant - self.free


def loss_floors(loss_fn: Callable[[Any, Any], torch.Tensor], outputs: Any, targets: Any,
                max_iter: int = 200) -> LossFloors | None:
    """None when the loss cannot be evaluated on substituted outputs (then the initial loss is the reference)."""
    try:
        out = primary_output(outputs)
        if not out.is_floating_point():
            return None

        def loss_of(values: torch.Tensor) -> torch.Tensor:
            pred = values.to(out.dtype).expand_as(out).contiguous()
            return loss_fn(map_tensors(outputs, lambda t: pred if t is out else t), targets)

        base = out.detach().double()
        constant, _ = _fit(loss_of, base.mean(0, keepdim=True), max_iter)            # (1, ...)
        free, fitted = _fit(loss_of, base.clone(), max_iter)                          # (B, ...)
        with torch.no_grad():
            doubled = float(loss_of(2 * fitted))
        free = min(free, constant)
        saturating = doubled <= free + 0.01 * max(constant - free, 0.0)
        if not all(math.isfinite(v) for v in (constant, free)):
            return None
        return LossFloors(constant=constant, free=free, saturating=saturating)
    except Exception:  # noqa: BLE001 - a loss that cannot take substituted outputs
        return None


def _fit(loss_of: Callable[[torch.Tensor], torch.Tensor], start: torch.Tensor, max_iter: int
         ) -> tuple[float, torch.Tensor]:
    values = start.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([values], lr=1, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = loss_of(values)
        loss.backward()
        return loss
    opt.step(closure)
    with torch.no_grad():
        return float(loss_of(values)), values.detach()


def boxed_floor(loss_fn: Callable[[Any, Any], torch.Tensor], outputs: Any, targets: Any, lo: float, hi: float,
                max_iter: int = 100) -> float | None:
    """The best loss of separate outputs per example confined to [lo, hi] (lo + (hi - lo) * sigmoid(z)): what a
    model whose outputs are squashed into that range can reach at most. None when the loss cannot be evaluated."""
    try:
        out = primary_output(outputs)
        base = out.detach().double()

        def loss_of(z: torch.Tensor) -> torch.Tensor:
            pred = (lo + (hi - lo) * torch.sigmoid(z)).to(out.dtype)
            return loss_fn(map_tensors(outputs, lambda t: pred if t is out else t), targets)

        start = torch.logit(((base - lo) / (hi - lo)).clamp(1e-4, 1 - 1e-4))
        value, _ = _fit(loss_of, start, max_iter)
        return value if math.isfinite(value) else None
    except Exception:  # noqa: BLE001 - a loss that cannot take substituted outputs
        return None


def grouped_floor(loss_fn: Callable[[Any, Any], torch.Tensor], outputs: Any, targets: Any, keys: torch.Tensor,
                  max_iter: int = 200) -> float | None:
    """The best loss when outputs that share a key must be equal (keys: int group ids over the leading dims of the
    output, e.g. (B,) per example or (B, T) per position): what a model reaches at most whose outputs depend only
    on what the key holds (identical inputs, the same last-k tokens). None when the loss cannot be evaluated."""
    try:
        out = primary_output(outputs)
        base = out.detach().double()
        rest = base.shape[keys.dim():]
        flat = keys.reshape(-1).to(base.device)
        groups = int(flat.max()) + 1
        table = torch.zeros((groups, *rest), dtype=torch.float64, device=base.device)
        table.index_add_(0, flat, base.reshape(-1, *rest))
        counts = torch.bincount(flat, minlength=groups).clamp(min=1).double()
        table /= counts.view(-1, *([1] * len(rest)))                            # (G, ...) group means

        def loss_of(values: torch.Tensor) -> torch.Tensor:
            pred = values[keys.to(base.device)].to(out.dtype)                  # (leading dims..., ...)
            return loss_fn(map_tensors(outputs, lambda t: pred if t is out else t), targets)

        value, _ = _fit(loss_of, table, max_iter)
        return value if math.isfinite(value) else None
    except Exception:  # noqa: BLE001 - a loss that cannot take substituted outputs
        return None
