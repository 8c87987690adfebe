"""Fast PyTorch RoPE (the default off-CUDA path): a few fused elementwise ops inside one autograd.Function.

Run it: ``apply_rope(q, k, cos, sin, impl="torch")`` (or ``impl="auto"`` on CPU). Convention: kernels/reference.py.

Why it is fast on CPU: the naive ``torch.cat`` rotation builds ~10 autograd nodes and several temporaries per
tensor. Here q and k share one autograd node and each output takes three passes written straight into a
preallocated tensor: ``x * cos`` over the full width, then one ``addcmul_`` per half with the partner half (no
concatenation, no rotated copy). The backward is the same code with the angle negated. Nothing is saved for
backward except the (small) cos/sin rows. Measured on the default model: see benchmarks/bench_rope.py cpu.
"""
from __future__ import annotations

import torch


def gather_tables(cos: torch.Tensor, sin: torch.Tensor, positions, seqlen: int, dtype: torch.dtype,
                  interleaved: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos_full, sin) rows for every token: cos_full (B|1, T, 1, R) is cos widened to every rotary dim of the
    layout, sin is (B|1, T, 1, R/2); both in `dtype`. Positions must already be checked."""
    if positions is None or isinstance(positions, int):
        start = positions or 0
        c, s = cos[start:start + seqlen], sin[start:start + seqlen]  # (T, R/2) views: no gather
        c, s = c[None, :, None, :], s[None, :, None, :]
    else:
        pos = positions  # (B, T) or (1, T) int64, resolved by the caller
        c, s = cos[pos][:, :, None, :], sin[pos][:, :, None, :]
    c = c.repeat_interleave(2, dim=-1) if interleaved else torch.cat((c, c), dim=-1)
    return c.to(dtype), s.to(dtype)


def rotate_into(x: torch.Tensor, c_full: torch.Tensor, s: torch.Tensor, out: torch.Tensor, interleaved: bool,
                conjugate: bool) -> None:
    """out = R(+-angle) x for x, out (B, T, H, D) in the math dtype; c_full (B|1, T, 1, R), s (B|1, T, 1, R/2).

    Three passes: one full-width multiply by cos, then one multiply-add per half with the partner half.
    """
    rot = c_full.shape[-1]
    if rot == x.shape[-1]:
        torch.mul(x, c_full, out=out)
    else:
        torch.mul(x[..., :rot], c_full, out=out[..., :rot])
        out[..., rot:].copy_(x[..., rot:])  # pass-through dims, bit-exact
    if interleaved:
        a, b, oa, ob = x[..., 0:rot:2], x[..., 1:rot:2], out[..., 0:rot:2], out[..., 1:rot:2]
    else:
        half = rot // 2
        a, b, oa, ob = x[..., :half], x[..., half:rot], out[..., :half], out[..., half:rot]
    sign = 1.0 if conjugate else -1.0
    oa.addcmul_(b, s, value=sign)        # a' = a cos - b sin   (conjugate: + b sin)
    ob.addcmul_(a, s, value=-sign)       # b' = b cos + a sin   (conjugate: - a sin)


def _tables_like(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A (1, T, 1, W) table widened to (1, T, H, W) in x's token/head memory order, so that the elementwise
    ops run over long contiguous spans instead of W-element pieces (about 2x faster on CPU)."""
    if t.shape[0] != 1 or t.shape[2] == x.shape[2]:
        return t
    wide = t.expand(1, t.shape[1], x.shape[2], t.shape[3])
    if x.stride(2) > x.stride(1):   # heads outer, tokens inner: a (B, H, T, D) buffer seen as (B, T, H, D)
        return wide.transpose(1, 2).contiguous().transpose(1, 2)
    return wide.contiguous()


def rope_pair(q: torch.Tensor, k: torch.Tensor, c_full: torch.Tensor, s: torch.Tensor, interleaved: bool,
              conjugate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, T, Hq, D) and k (B, T, Hk, D) out of place; math in float32 (float64 for float64)."""
    outs = []
    for x in (q, k):
        math_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        xm = x if x.dtype == math_dtype else x.to(math_dtype)
        out = torch.empty_like(xm, dtype=math_dtype)  # keeps a dense layout (e.g. bhtd), else contiguous
        rotate_into(xm, _tables_like(c_full, xm), _tables_like(s, xm), out, interleaved, conjugate)
        outs.append(out if x.dtype == math_dtype else out.to(x.dtype))
    return outs[0], outs[1]


class TorchRope(torch.autograd.Function):
    """Autograd node for q and k together; backward = the same rotation with the angle negated (the transpose),
    itself a TorchRope node, so double backward works too."""

    @staticmethod
    def forward(ctx, q, k, c, s, interleaved: bool, conjugate: bool):
        ctx.save_for_backward(c, s)
        ctx.interleaved, ctx.conjugate = interleaved, conjugate
        return rope_pair(q, k, c, s, interleaved, conjugate)

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        c, s = ctx.saved_tensors
        dq, dk = TorchRope.apply(grad_q, grad_k, c, s, ctx.interleaved, not ctx.conjugate)
        return dq, dk, None, None, None, None


def rope_torch(q, k, cos, sin, positions, interleaved: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k logical (B, T, H, D) views (any strides); positions None | int | int64 (B|1, T). Out of place."""
    math_dtype = torch.float64 if torch.float64 in (q.dtype, k.dtype) else torch.float32
    c_full, s = gather_tables(cos, sin, positions, q.shape[1], math_dtype, interleaved)
    return TorchRope.apply(q, k, c_full, s, interleaved, False)
