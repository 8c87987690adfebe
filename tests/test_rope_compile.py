"""RoPE under torch.compile(fullgraph=True), tables in any float dtype, learnable tables refused, every autotune
tile bit-identical, and (CUDA) no host sync with tensor positions (issue 17 items 1, 2, 4).

Run: ``python -m pytest -q tests/test_rope_compile.py`` (CPU: Triton under TRITON_INTERPRET=1; the compile tests
use the aot_eager backend there, Inductor on CUDA).
"""
from __future__ import annotations

import pytest
import torch

from sweeper.kernels import apply_rope, rope_cache
from sweeper.kernels.rope_triton import AUTOTUNE_TILES, LaunchConfig, launch_rope
from tests.helpers.rope_cases import (
    HAS_CUDA,
    INTERPRET,
    KERNEL_CASES,
    KERNEL_IDS,
    bits,
    make_qk,
    positions_table,
    tables,
    truth_rope,
)

BACKEND = "aot_eager"          # Inductor itself: test_triton_op_is_inlined_by_inductor (CUDA)


@pytest.mark.slow
@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("kind", ["per_batch", "ids"])
def test_tensor_positions_compile_fullgraph(impl, device, kind):
    """Tensor positions used to need aminmax + int() (a host sync): fullgraph compile failed on it."""
    torch._dynamo.reset()
    cos, sin = tables(64, 16, device)
    q, k = make_qk(2, 6, 4, 2, 16, device=device, requires_grad=True)
    pos = (torch.tensor([3, 40], device=device) if kind == "per_batch"
           else torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(2)).to(device))

    def f(q, k, pos):
        a, b = apply_rope(q, k, cos, sin, positions=pos, layout="interleaved", impl=impl)
        return (a * a).sum() + (b * 3).sum()

    compiled = torch.compile(f, fullgraph=True, backend=BACKEND)
    loss_c = compiled(q, k, pos)
    grads_c = torch.autograd.grad(loss_c, (q, k))
    loss_e = f(q, k, pos)
    grads_e = torch.autograd.grad(loss_e, (q, k))
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-6, atol=1e-5)
    for a, b in zip(grads_c, grads_e):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    # out of the table inside the compiled graph: the asynchronous assertion, with its message
    bad = pos + 60
    if device == "cpu":   # on CUDA a failed device-side assertion ends the context: see the subprocess test
        with pytest.raises(RuntimeError, match="past the cos/sin table of length 64"):
            compiled(q, k, bad)


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_float64_tables_keep_float64_math(impl, device, layout):
    """float64 q/k with float64 tables: the Triton path used to round the tables to float32 (error ~8e-8)."""
    cos, sin = rope_cache(32, 16, device=device, dtype=torch.float64)
    q, k = make_qk(2, 7, 3, 1, 20, dtype=torch.float64, device=device, requires_grad=True)
    ids = torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(4)).to(device)
    q_out, k_out = apply_rope(q, k, cos, sin, positions=ids, layout=layout, impl=impl)
    pos = positions_table(ids, 2, 7)
    for x, out in ((q, q_out), (k, k_out)):
        assert out.dtype == torch.float64
        torch.testing.assert_close(out.cpu(), truth_rope(x, pos, 16, layout=layout), rtol=0, atol=1e-14)
    dq, = torch.autograd.grad(q_out, q, torch.ones_like(q_out))
    torch.testing.assert_close(dq.cpu(), truth_rope(torch.ones_like(q), pos, 16, layout=layout, inverse=True),
                               rtol=0, atol=1e-14)


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("table_dtype", [torch.float64, torch.float16])
def test_other_table_dtypes_round_once_to_float32(impl, device, table_dtype):
    """float32 q/k with a float64 or float16 table: the same bits as with the table rounded to float32 first."""
    cos, sin = rope_cache(32, 16, device=device, dtype=table_dtype)
    q, k = make_qk(2, 5, 2, 2, 16, device=device)
    got = apply_rope(q, k, cos, sin, positions=3, impl=impl)
    want = apply_rope(q, k, cos.float(), sin.float(), positions=3, impl=impl)
    for a, b in zip(got, want):
        assert torch.equal(bits(a), bits(b))


@pytest.mark.parametrize("impl", ["auto", "torch"] + (["triton"] if INTERPRET or HAS_CUDA else []))
def test_tables_that_require_grad_are_refused_except_by_the_reference(impl):
    cos, sin = tables(16, 8)
    cos.requires_grad_()
    q, k = make_qk(1, 4, 2, 2, 8, requires_grad=True)
    with pytest.raises(ValueError, match=rf"apply_rope: cos/sin require grad, but impl='{impl}' does not compute "
                                         r"their gradient .* impl='reference' to learn the tables"):
        apply_rope(q, k, cos, sin, impl=impl)
    with torch.no_grad():                            # no graph, nothing to drop: allowed
        apply_rope(q, k, cos, sin, impl=impl)
    apply_rope(q, k, cos.detach(), sin, impl=impl)   # the fix the message names
    q_out, _ = apply_rope(q, k, cos, sin, impl="reference")
    (g,) = torch.autograd.grad(q_out.sum(), cos)
    assert g.abs().sum() > 0                         # the reference does differentiate the table


def test_table_of_ints_is_refused():
    cos, sin = tables(16, 8)
    q, k = make_qk(1, 4, 2, 2, 8)
    with pytest.raises(ValueError, match=r"apply_rope: cos.dtype=torch.int64; expected a float table"):
        apply_rope(q, k, cos.long(), sin, impl="torch")


@pytest.mark.skipif(not (INTERPRET or HAS_CUDA), reason="needs the Triton interpreter or a GPU")
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_every_autotune_tile_gives_the_same_bits(layout):
    """The autotuner may pick any tile per device and process: each one must give identical bits."""
    device = "cuda" if HAS_CUDA else "cpu"
    cos, sin = tables(64, 24, device)
    q, k = make_qk(2, 9, 5, 3, 28, device=device)        # partial rotary, heads not a power of two
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(3)).to(device)
    outs = []
    for bt, bh, w in AUTOTUNE_TILES:
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        launch_rope(q, k, cos, sin, qo, ko, position_ids=ids, interleaved=layout == "interleaved",
                    config=LaunchConfig(bt, bh, w))
        outs.append((bits(qo), bits(ko)))
    want = apply_rope(q, k, cos, sin, positions=ids, layout=layout, impl="triton")   # the default launch
    ref = apply_rope(q, k, cos, sin, positions=ids, layout=layout, impl="reference")
    torch.testing.assert_close(want, ref, rtol=0, atol=1e-6)
    for qo, ko in outs:
        assert torch.equal(qo, bits(want[0])) and torch.equal(ko, bits(want[1]))


def test_triton_op_is_registered_for_inductor():
    """On CUDA the op is a triton_op (Inductor sees the kernel); the interpreter keeps the opaque custom_op."""
    import sweeper.kernels.rope_triton_op  # noqa: F401 - registers the ops
    assert hasattr(torch.ops.sweeper_kernels, "rope_triton") and hasattr(torch.ops.sweeper_kernels, "rope")


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU")
def test_cuda_tensor_positions_never_sync():
    cos, sin = tables(4096, 128, "cuda")
    q, k = make_qk(2, 256, 8, 2, 128, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    ids = torch.randint(0, 4096, (2, 256), device="cuda")
    offs = torch.tensor([0, 100], device="cuda")
    apply_rope(q, k, cos, sin, positions=ids, impl="triton")            # warm-up: autotune outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for pos in (ids, offs):
            out = apply_rope(q, k, cos, sin, positions=pos, impl="triton")
            torch.autograd.grad(out, (q, k), (torch.ones_like(out[0]), torch.ones_like(out[1])))
    finally:
        torch.cuda.set_sync_debug_mode("default")


CUDA_ASSERT = """
import torch
from sweeper.kernels import apply_rope, rope_cache
cos, sin = rope_cache(16, 8, device="cuda")
q = torch.randn(2, 4, 2, 8, device="cuda")
apply_rope(q, q, cos, sin, positions=torch.tensor([0, 13], device="cuda"), impl="triton")
torch.cuda.synchronize()
print("no error")
"""


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU")
def test_cuda_positions_past_the_table_fail_the_async_assertion():
    import os
    import subprocess
    import sys

    from tests.helpers.commands import ROOT
    proc = subprocess.run([sys.executable, "-c", CUDA_ASSERT], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0 and "no error" not in proc.stdout
    assert "past the cos/sin table of length 16" in proc.stderr or "device-side assert" in proc.stderr, \
        proc.stderr[-2000:]


@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU")
def test_triton_op_is_inlined_by_inductor():
    """Inductor sees through the triton_op: its generated code launches our kernel itself (not an opaque op)."""
    from torch._inductor.utils import run_and_get_code
    torch._dynamo.reset()
    cos, sin = tables(256, 64, "cuda")
    q, k = make_qk(2, 64, 8, 2, 64, dtype=torch.bfloat16, device="cuda")

    def f(q, k):
        a, b = apply_rope(q * 2, k, cos, sin, positions=5, impl="triton")
        return a + 1, b

    out, codes = run_and_get_code(torch.compile(f, fullgraph=True, backend="inductor"), q, k)
    want = f(q, k)
    for a, b in zip(out, want):
        assert torch.equal(bits(a), bits(b))
    code = "\n".join(codes)
    assert "_rope_kernel" in code, code[-3000:]
