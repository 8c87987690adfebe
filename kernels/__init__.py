"""RoPE for sweeper: a plain-PyTorch reference, a fast PyTorch path, Triton kernels and a fault-injection variant.

Run it::

    from sweeper.kernels import apply_rope, rope_cache
    cos, sin = rope_cache(max_positions=2048, rotary_dim=64)            # float32, (2048, 32) each
    q_out, k_out = apply_rope(q, k, cos, sin, layout="half", format="bthd", impl="auto")

Files: reference.py (the definition and the rotation convention), rope_cpu.py (fast PyTorch path),
rope_triton.py (Triton kernels), rope_triton_op.py (custom op + autograd around them), faults.py
(impl="fault_no_qk_grad": backward drops the q/k gradient), op.py (checks and dispatch).
"""
from sweeper.kernels.op import IMPLS, apply_rope
from sweeper.kernels.reference import rope_cache, rope_reference

__all__ = ["IMPLS", "apply_rope", "rope_cache", "rope_reference"]
