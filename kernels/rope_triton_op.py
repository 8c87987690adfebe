"""The Triton kernel as a torch operator with registered autograd, visible to ``torch.compile``.

Run it: ``apply_rope(q, k, cos, sin, impl="triton")``; it also works inside ``torch.compile(fullgraph=True)``.

Two registrations of the same launch: on CUDA ``sweeper_kernels::rope_triton``, a ``torch.library.triton_op``
(Inductor traces through it to the Triton kernel, so it can schedule and fuse around it, and CUDA graphs capture
it); under the CPU interpreter ``sweeper_kernels::rope``, an opaque ``custom_op`` with a fake impl (the
interpreter cannot be traced). ``rope_triton`` picks the one that can run here.

Backward: the same op with ``conjugate`` flipped (rotation by -angle is the transpose of the rotation), so the
gradient always flows through autograd to q and k, and double backward works. Outputs are fresh tensors
(``empty_like``: a dense input's layout, e.g. a (B, H, T, D) buffer seen through a transpose, is kept; other
inputs give contiguous outputs); inputs are never written.
"""
from __future__ import annotations

from typing import Optional

import torch

from sweeper.kernels.rope_triton import interpreting, launch_rope


def _empty_outputs(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k)


def _rotated(q, k, cos, sin, offset, batch_offsets, position_ids, interleaved, conjugate):
    """The body of both registrations: fresh outputs, one launch over q and k."""
    q_out, k_out = _empty_outputs(q, k)
    launch_rope(q, k, cos, sin, q_out, k_out, offset, batch_offsets, position_ids, interleaved, conjugate)
    return q_out, k_out


@torch.library.custom_op("sweeper_kernels::rope", mutates_args=())
def rope_op(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int,
            batch_offsets: Optional[torch.Tensor], position_ids: Optional[torch.Tensor], interleaved: bool,
            conjugate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, T, Hq, D), k (B, T, Hk, D) logical views -> rotated copies. Positions already validated."""
    return _rotated(q, k, cos, sin, offset, batch_offsets, position_ids, interleaved, conjugate)


@rope_op.register_fake
def _(q, k, cos, sin, offset, batch_offsets, position_ids, interleaved, conjugate):
    return _empty_outputs(q, k)


@torch.library.triton_op("sweeper_kernels::rope_triton", mutates_args=())
def rope_triton_op(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, offset: int,
                   batch_offsets: Optional[torch.Tensor], position_ids: Optional[torch.Tensor], interleaved: bool,
                   conjugate: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as rope_op (CUDA): the launch goes through wrap_triton, so Inductor sees the kernel."""
    return _rotated(q, k, cos, sin, offset, batch_offsets, position_ids, interleaved, conjugate)


def _setup_context(ctx, inputs, output):
    _, _, cos, sin, offset, batch_offsets, position_ids, interleaved, conjugate = inputs
    ctx.save_for_backward(cos, sin, batch_offsets, position_ids)
    ctx.offset, ctx.interleaved, ctx.conjugate = offset, interleaved, conjugate


def _backward_with(op):
    def backward(ctx, grad_q, grad_k):
        cos, sin, batch_offsets, position_ids = ctx.saved_tensors
        dq, dk = op(grad_q, grad_k, cos, sin, ctx.offset, batch_offsets, position_ids, ctx.interleaved,
                    not ctx.conjugate)
        return dq, dk, None, None, None, None, None, None, None
    return backward


for _op in (rope_op, rope_triton_op):
    _op.register_autograd(_backward_with(_op), setup_context=_setup_context)


def rope_triton(q, k, cos, sin, offset: int, batch_offsets, position_ids, interleaved: bool):
    """Entry used by kernels/op.py: q, k logical (B, T, H, D) views, positions normalized and checked."""
    op = rope_op if interpreting() or not q.is_cuda else rope_triton_op
    return op(q, k, cos, sin, offset, batch_offsets, position_ids, interleaved, False)
