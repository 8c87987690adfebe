"""The public entry ``apply_rope``: argument checks, position handling and dispatch to an implementation.

Run it: ``from sweeper.kernels import apply_rope, rope_cache``::

    cos, sin = rope_cache(4096, 128)                        # (P, 64) float32 each
    q_out, k_out = apply_rope(q, k, cos, sin)                # q (B, T, Hq, D), k (B, T, Hk, D)

Implementations (``impl``): "auto" (Triton on CUDA, the fast PyTorch path elsewhere), "triton", "torch",
"reference" (the definition in kernels/reference.py), and "fault_no_qk_grad" (deliberately broken backward:
kernels/faults.py). Every path is out of place and uses the convention pinned in kernels/reference.py.
"""
from __future__ import annotations

import importlib.util

import torch

from sweeper.kernels.faults import FAULT_IMPL, DropQKGrad, warn_fault_once
from sweeper.kernels.reference import FORMATS, LAYOUTS, check_positions_arg, check_positions_fit, rope_reference
from sweeper.kernels.rope_cpu import rope_torch

IMPLS = ("auto", "torch", "triton", "reference", FAULT_IMPL)
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_args(q, k, cos, sin, layout, format, impl) -> None:
    if impl not in IMPLS:
        raise ValueError(f"apply_rope: impl={impl!r}; expected one of {IMPLS}")
    if layout not in LAYOUTS:
        raise ValueError(f"apply_rope: layout={layout!r}; expected one of {LAYOUTS}")
    if format not in FORMATS:
        raise ValueError(f"apply_rope: format={format!r}; expected one of {FORMATS}")
    for name, x in (("q", q), ("k", k)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"apply_rope: {name} must be a 4-D tensor ({format}); got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        if x.dtype not in DTYPES:
            raise ValueError(f"apply_rope: {name}.dtype={x.dtype}; expected one of {DTYPES}")
    if q.dtype != k.dtype or q.device != k.device:
        raise ValueError(f"apply_rope: q ({q.dtype}, {q.device}) and k ({k.dtype}, {k.device}) must share "
                         "dtype and device")
    t_dim = 1 if format == "bthd" else 2
    if q.shape[0] != k.shape[0] or q.shape[t_dim] != k.shape[t_dim] or q.shape[3] != k.shape[3]:
        raise ValueError(f"apply_rope: q {tuple(q.shape)} and k {tuple(k.shape)} must agree on batch, "
                         f"sequence and head_dim (format={format!r})")
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(f"apply_rope: cos {tuple(cos.shape)} and sin {tuple(sin.shape)} must both be "
                         "(max_positions, rotary_dim // 2): build them with rope_cache()")
    if 2 * cos.shape[1] > q.shape[3]:
        raise ValueError(f"apply_rope: rotary_dim {2 * cos.shape[1]} (from cos) exceeds head_dim {q.shape[3]}")
    for name, t in (("cos", cos), ("sin", sin)):
        if t.dtype not in DTYPES:
            raise ValueError(f"apply_rope: {name}.dtype={t.dtype}; expected a float table ({DTYPES}): build it "
                             "with rope_cache()")
    if cos.device != q.device or sin.device != q.device:
        raise ValueError(f"apply_rope: cos/sin on {cos.device}, q on {q.device}; move the tables with "
                         "rope_cache(..., device=q.device)")


def _check_tables_grad(cos, sin, impl: str) -> None:
    """The fast paths do not differentiate cos/sin: refuse learnable tables instead of dropping their gradient."""
    if torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad):
        raise ValueError(f"apply_rope: cos/sin require grad, but impl={impl!r} does not compute their gradient "
                         "(it would be silently dropped); pass cos.detach()/sin.detach(), or impl='reference' to "
                         "learn the tables")


def _check_tensor_positions(lo, hi, extra: int, table_len: int) -> None:
    """Bounds of tensor positions: exact ValueError on the host when the positions live there (eager, no device
    sync); on a device or inside torch.compile an asynchronous device-side assertion with the same message
    (no host sync, so fullgraph compiles and CUDA graphs capture it). lo, hi: 0-d tensors, min and max."""
    if not torch.compiler.is_compiling() and lo.device.type == "cpu":
        check_positions_fit(int(lo), int(hi) + extra, table_len)
        return
    torch._assert_async((lo >= 0) & (hi + extra < table_len),
                        f"apply_rope: a position is negative or past the cos/sin table of length {table_len} "
                        f"(positions must be in [0, {table_len}); build it with rope_cache(max_positions=...))")


def normalize_positions(positions, batch: int, seqlen: int, table_len: int, device):
    """Check positions against the table. Returns (offset: int, batch_offsets (B,) | None, ids (B|1, T) | None).

    Tensor positions are never read on the host when they live on a device (see _check_tensor_positions)."""
    if positions is None or (isinstance(positions, int) and not isinstance(positions, bool)):
        offset = positions or 0
        check_positions_fit(offset, offset + seqlen - 1, table_len)
        return offset, None, None
    check_positions_arg(positions, batch, seqlen)
    if positions.device.type == "cpu" and not torch.compiler.is_compiling():   # host data: check before the copy
        lo, hi = torch.aminmax(positions.to(torch.int64))
    p = positions.to(device=device, dtype=torch.int64)
    if p.dim() == 0:                                   # one offset for every batch row
        p = p.expand(batch)
    if positions.device.type != "cpu" or torch.compiler.is_compiling():
        lo, hi = torch.aminmax(p)
    if p.dim() == 1:
        _check_tensor_positions(lo, hi, seqlen - 1, table_len)
        return 0, p.contiguous(), None
    _check_tensor_positions(lo, hi, 0, table_len)
    return 0, None, p


def _rotate(q, k, cos, sin, positions, layout, impl):
    """q, k logical (B, T, H, D) views -> rotated (B, T, H, D)."""
    batch, seqlen = q.shape[0], q.shape[1]
    offset, batch_offsets, ids = normalize_positions(positions, batch, seqlen, cos.shape[0], q.device)
    if impl == "auto":
        impl = "triton" if q.is_cuda else "torch"
    if impl == "triton":
        if importlib.util.find_spec("triton") is None:   # CUDA builds of torch bring it; a CPU-only install has none
            raise ImportError(f"RoPE impl={'auto on CUDA' if q.is_cuda else 'triton'} needs triton, which is not "
                              f"installed: pip install 'seed-sweeper[gpu]' (or impl='torch')")
        from sweeper.kernels.rope_triton_op import rope_triton  # deferred: triton (GPU kernel path only)
        return rope_triton(q, k, cos, sin, offset, batch_offsets, ids, layout == "interleaved")
    if batch_offsets is not None:
        ids = batch_offsets[:, None] + torch.arange(seqlen, device=q.device)  # (B, T)
    return rope_torch(q, k, cos, sin, ids if ids is not None else offset, layout == "interleaved")


def apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions=None,
               layout: str = "half", format: str = "bthd", impl: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q (B, T, Hq, D) and k (B, T, Hk, D) ((B, H, T, D) for format="bhtd"); returns new tensors.

    positions: None (0..T-1), an int offset, a (B,) tensor of per-batch offsets, or (B, T)/(1, T) position ids.
    Positions past the cos/sin table raise ValueError (tensor positions on a device, or inside torch.compile: an
    asynchronous device-side assertion with the same message; no host sync). cos/sin in any float dtype: float64
    tables give float64 math for float64 q/k on every path. Tables that require grad are refused by every impl
    except "reference" (the only one that differentiates them). Inputs are never written.
    """
    _check_args(q, k, cos, sin, layout, format, impl)
    if impl != "reference":
        _check_tables_grad(cos, sin, impl)
    if impl == "reference":
        return rope_reference(q, k, cos, sin, positions, layout, format)
    if format == "bhtd":  # a transpose view: no copy; every implementation takes explicit strides
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    if impl == FAULT_IMPL:
        warn_fault_once()
        q_out, k_out = DropQKGrad.apply(q, k, lambda a, b: _rotate(a, b, cos, sin, positions, layout, "auto"))
    else:
        q_out, k_out = _rotate(q, k, cos, sin, positions, layout, impl)
    if format == "bhtd":
        q_out, k_out = q_out.transpose(1, 2), k_out.transpose(1, 2)
    return q_out, k_out
