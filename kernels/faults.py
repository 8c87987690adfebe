"""Fault injection: a RoPE whose backward DROPS the q/k gradient. For validating detectors only.

Run it: ``apply_rope(q, k, cos, sin, impl="fault_no_qk_grad")`` (the ``rope_frozen_qk`` experiment variant).

The forward is the correct rotation (the "auto" path), so the loss still falls; the backward returns zeros for
q and k, so Wq and Wk never learn and the model degrades to order-blind statistics. This reproduces the
real-world failure of a Triton RoPE launch that bypassed autograd. It can only be selected by its explicit name
and announces itself on first use (warnings.warn plus a line on stderr).
"""
from __future__ import annotations

import sys
import warnings

import torch

FAULT_IMPL = "fault_no_qk_grad"
_warned = False


def warn_fault_once() -> None:
    """Warn loudly (warnings + stderr) the first time the fault variant is used in this process."""
    global _warned
    if _warned:
        return
    _warned = True
    msg = (f"kernels.apply_rope impl={FAULT_IMPL!r}: DELIBERATE FAULT INJECTION - the backward returns ZERO "
           "gradient for q and k, so Wq/Wk will not learn. Use only to validate detectors.")
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    print(f"WARNING: {msg}", file=sys.stderr, flush=True)


class DropQKGrad(torch.autograd.Function):
    """Correct rotation forward (``rotate`` is the real implementation); backward returns zeros for q and k."""

    @staticmethod
    def forward(ctx, q, k, rotate):
        return rotate(q, k)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        return torch.zeros_like(grad_q), torch.zeros_like(grad_k), None
