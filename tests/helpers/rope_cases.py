"""Shared helpers for the RoPE tests (tests/test_rope_*.py): an independent float64 ground truth, the cases matrix.

Run the RoPE tests: ``python -m pytest -q tests/test_rope_*.py`` (CPU: Triton runs under TRITON_INTERPRET=1,
set in tests/conftest.py; with a GPU the same tests also run on CUDA, including float16/bfloat16 numerics).
"""
from __future__ import annotations

import os

import torch

from sweeper.kernels import apply_rope, rope_cache

HAS_CUDA = torch.cuda.is_available()
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# (impl, device) pairs the tests run on: Triton on CPU only in the interpreter; everything on CUDA when present.
CASES = [("torch", "cpu"), ("reference", "cpu")] + ([("triton", "cpu")] if INTERPRET else [])
if HAS_CUDA:
    CASES += [("triton", "cuda"), ("torch", "cuda")]
KERNEL_CASES = [c for c in CASES if c[0] != "reference"]  # the implementations under test
IDS = [f"{i}-{d}" for i, d in CASES]
KERNEL_IDS = [f"{i}-{d}" for i, d in KERNEL_CASES]


def truth_rope(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int, base: float = 10000.0,
               layout: str = "half", inverse: bool = False) -> torch.Tensor:
    """Independent float64 ground truth via complex numbers: pair (a, b) -> (a + ib) * exp(+-i p theta).

    x (B, T, H, D) any dtype; positions (B, T) int. Does not use kernels.rope_cache.
    """
    x = x.detach().to(torch.float64).cpu()
    half = rotary_dim // 2
    theta = base ** (-torch.arange(half, dtype=torch.float64) * 2.0 / rotary_dim)       # (R/2,)
    angle = positions.cpu().to(torch.float64)[:, :, None, None] * theta                 # (B, T, 1, R/2)
    rot = torch.polar(torch.ones_like(angle), -angle if inverse else angle)
    xr = x[..., :rotary_dim]
    if layout == "half":
        z = torch.complex(xr[..., :half], xr[..., half:]) * rot
        out = torch.cat((z.real, z.imag), dim=-1)
    else:
        z = torch.complex(xr[..., 0::2], xr[..., 1::2]) * rot
        out = torch.stack((z.real, z.imag), dim=-1).flatten(-2)
    return torch.cat((out, x[..., rotary_dim:]), dim=-1)


def positions_table(positions, batch: int, seqlen: int) -> torch.Tensor:
    """The (B, T) absolute positions meant by an apply_rope positions argument (written out independently)."""
    t = torch.arange(seqlen)
    if positions is None:
        return t.expand(batch, seqlen)
    if isinstance(positions, int):
        return (t + positions).expand(batch, seqlen)
    p = positions.cpu()
    return p[:, None] + t if p.dim() == 1 else p.expand(batch, seqlen)


def make_qk(batch, seqlen, hq, hk, dim, dtype=torch.float32, device="cpu", seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seqlen, hq, dim, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    k = torch.randn(batch, seqlen, hk, dim, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
    return q.requires_grad_(requires_grad), k.requires_grad_(requires_grad)


def tables(max_positions, rotary_dim, device="cpu", base=10000.0):
    return rope_cache(max_positions, rotary_dim, base=base, device=device)


def rope_passes(impl: str):
    """(forward, backward) of an implementation's own passes: functions (q, k) -> (q', k') in bthd."""
    if impl == "triton":
        from sweeper.kernels.rope_triton_op import rope_op

        def run(conj):
            return lambda q, k, cos, sin: rope_op(q, k, cos, sin, 0, None, None, False, conj)
        return run(False), run(True)
    if impl == "torch":
        from sweeper.kernels.rope_cpu import gather_tables, rope_pair

        def run(conj):
            def f(q, k, cos, sin):
                math_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
                c, s = gather_tables(cos, sin, None, q.shape[1], math_dtype)
                return rope_pair(q, k, c, s, False, conj)
            return f
        return run(False), run(True)
    raise ValueError(impl)


def rope(impl, q, k, cos, sin, positions=None, layout="half", format="bthd"):
    return apply_rope(q, k, cos, sin, positions=positions, layout=layout, format=format, impl=impl)


def bits(x: torch.Tensor) -> torch.Tensor:
    """Raw bit pattern (NaN-safe bitwise comparison)."""
    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    return x.detach().contiguous().view(ints).cpu()
