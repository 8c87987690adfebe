"""Fast PyTorch RoPE (the default off-CUDA path): a few fused elementwise ops inside one autograd.Function.

Run it: ``apply_rope(q, k, cos, sin, impl="torch")`` (or ``impl="auto"`` on CPU). Convention: kernels/reference.py.

Why it is fast on CPU: the naive ``torch.cat`` rotation builds ~10 autograd nodes and several temporaries per
tensor. Here q and k share one autograd node; each half is written straight into a preallocated output with
``torch.mul(out=)`` + ``addcmul_`` (2 passes per half, no concatenation), and the backward is the same code with
the angle negated. Nothing is saved for backward except the (small) cos/sin rows.
"""
from __future__ import annotations

import torch


def gather_tables(cos: torch.Tensor, sin: torch.Tensor, positions, batch: int, seqlen: int,
                  dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin rows for every token, shaped (B or 1, T, 1, R/2) in `dtype`. Positions must already be checked."""
    if positions is None or isinstance(positions, int):
        start = positions or 0
        c, s = cos[start:start + seqlen], sin[start:start + seqlen]  # (T, R/2) views: no gather
        c, s = c[None, :, None, :], s[None, :, None, :]
    else:
        pos = positions  # (B, T) or (1, T) int64, resolved by the caller
        c, s = cos[pos][:, :, None, :], sin[pos][:, :, None, :]
    return c.to(dtype), s.to(dtype)


def rotate_into(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, out: torch.Tensor, interleaved: bool,
                conjugate: bool) -> None:
    """out = R(+-angle) x for x, out (B, T, H, D) in the math dtype; c, s (B|1, T, 1, R/2)."""
    rot = 2 * c.shape[-1]
    if interleaved:
        a, b, oa, ob = x[..., 0:rot:2], x[..., 1:rot:2], out[..., 0:rot:2], out[..., 1:rot:2]
    else:
        half = rot // 2
        a, b, oa, ob = x[..., :half], x[..., half:rot], out[..., :half], out[..., half:rot]
    sign = 1.0 if conjugate else -1.0
    torch.mul(a, c, out=oa)
    oa.addcmul_(b, s, value=sign)        # a' = a cos - b sin   (conjugate: + b sin)
    torch.mul(b, c, out=ob)
    ob.addcmul_(a, s, value=-sign)       # b' = b cos + a sin   (conjugate: - a sin)
    if rot < x.shape[-1]:
        out[..., rot:].copy_(x[..., rot:])  # pass-through dims, bit-exact


def rope_pair(q: torch.Tensor, k: torch.Tensor, c: torch.Tensor, s: torch.Tensor, interleaved: bool,
              conjugate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, T, Hq, D) and k (B, T, Hk, D) out of place; math in float32 (float64 for float64)."""
    outs = []
    for x in (q, k):
        math_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        xm = x if x.dtype == math_dtype else x.to(math_dtype)
        out = torch.empty_like(xm, dtype=math_dtype)  # keeps a dense layout (e.g. bhtd), else contiguous
        rotate_into(xm, c, s, out, interleaved, conjugate)
        outs.append(out if x.dtype == math_dtype else out.to(x.dtype))
    return outs[0], outs[1]


class TorchRope(torch.autograd.Function):
    """Autograd node for q and k together; backward = the same rotation by -angle (the transpose)."""

    @staticmethod
    def forward(ctx, q, k, c, s, interleaved: bool):
        ctx.save_for_backward(c, s)
        ctx.interleaved = interleaved
        return rope_pair(q, k, c, s, interleaved, conjugate=False)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        c, s = ctx.saved_tensors
        dq, dk = TorchRopeConjugate.apply(grad_q, grad_k, c, s, ctx.interleaved)
        return dq, dk, None, None, None


class TorchRopeConjugate(torch.autograd.Function):
    """The inverse rotation as its own node so double backward works too."""

    @staticmethod
    def forward(ctx, gq, gk, c, s, interleaved: bool):
        ctx.save_for_backward(c, s)
        ctx.interleaved = interleaved
        return rope_pair(gq, gk, c, s, interleaved, conjugate=True)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        c, s = ctx.saved_tensors
        dq, dk = TorchRope.apply(grad_q, grad_k, c, s, ctx.interleaved)
        return dq, dk, None, None, None


def rope_torch(q, k, cos, sin, positions, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k logical (B, T, H, D) views (any strides); positions None | int | int64 (B|1, T). Out of place."""
    math_dtype = torch.float64 if torch.float64 in (q.dtype, k.dtype) else torch.float32
    c, s = gather_tables(cos, sin, positions, q.shape[0], q.shape[1], math_dtype)
    return TorchRope.apply(q, k, c, s, interleaved)
