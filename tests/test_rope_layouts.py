"""RoPE memory layouts: input views, gradient layouts, untouched inputs and NaN guard bands, int64 offsets,
bad arguments and bitwise determinism.

Run: ``python -m pytest -q tests/test_rope_layouts.py``
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sweeper.kernels.rope_triton import launch_rope
from tests.helpers.rope_cases import (
    CASES,
    HAS_CUDA,
    IDS,
    INTERPRET,
    KERNEL_CASES,
    KERNEL_IDS,
    bits,
    make_qk,
    positions_table,
    rope,
    tables,
    truth_rope,
)

B, T, HQ, HK, D = 2, 6, 4, 2, 24
ROOT = Path(__file__).resolve().parent.parent


def _views(kind: str, device: str):
    """(q, k, format) for one layout kind; q, k are leaves or views of a leaf `base` with requires_grad."""
    g = torch.Generator().manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=g).to(device)  # noqa: E731
    if kind == "bthd":
        base = rnd(B, T, HQ + HK, D)
        return base[:, :, :HQ].contiguous(), base[:, :, HQ:].contiguous(), "bthd"
    if kind == "bhtd":
        return rnd(B, HQ, T, D), rnd(B, HK, T, D), "bhtd"
    if kind == "bhtd_transposed_view":     # (B, T, H, D) storage seen as (B, H, T, D)
        return rnd(B, T, HQ, D).transpose(1, 2), rnd(B, T, HK, D).transpose(1, 2), "bhtd"
    if kind == "bthd_transposed_view":     # (B, H, T, D) storage seen as (B, T, H, D)
        return rnd(B, HQ, T, D).transpose(1, 2), rnd(B, HK, T, D).transpose(1, 2), "bthd"
    if kind == "packed_qkv_slices":        # one (B, T, Hq + 2 Hk, D) projection, q and k are slices
        qkv = rnd(B, T, HQ + 2 * HK, D)
        return qkv[:, :, :HQ], qkv[:, :, HQ:HQ + HK], "bthd"
    if kind == "odd_storage_offset":       # views starting 3 and 5 elements into a flat buffer
        flat = rnd(4096)
        q = flat.as_strided((B, T, HQ, D), (T * HQ * D, HQ * D, D, 1), 3)
        k = flat.as_strided((B, T, HK, D), (T * HK * D + 7, HK * D + 1, D, 1), 5 + B * T * HQ * D)
        return q, k, "bthd"
    raise ValueError(kind)


LAYOUT_KINDS = ["bthd", "bhtd", "bhtd_transposed_view", "bthd_transposed_view", "packed_qkv_slices",
                "odd_storage_offset"]


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("kind", LAYOUT_KINDS)
def test_layout_matrix_matches_reference(impl, device, kind):
    q, k, fmt = _views(kind, device)
    q_before, k_before = q.clone(), k.clone()
    qs, ks = q.detach().requires_grad_(), k.detach().requires_grad_()   # leaves with the same (odd) strides
    qr, kr = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    cos, sin = tables(32, D, device)
    got = rope(impl, qs, ks, cos, sin, 4, "half", fmt)
    want = rope("reference", qr, kr, cos, sin, 4, "half", fmt)
    for g_, w in zip(got, want):
        assert g_.shape == w.shape
        torch.testing.assert_close(g_, w, rtol=0, atol=1e-6)
    gq, gk = torch.randn_like(want[0]), torch.randn_like(want[1])
    dq, dk = torch.autograd.grad(got, (qs, ks), (gq, gk))
    rq, rk = torch.autograd.grad(want, (qr, kr), (gq, gk))
    torch.testing.assert_close(dq, rq, rtol=0, atol=1e-6)
    torch.testing.assert_close(dk, rk, rtol=0, atol=1e-6)
    assert torch.equal(qs, q_before) and torch.equal(ks, k_before)   # inputs untouched


GRAD_KINDS = ["dense", "stride0_from_sum", "expanded", "non_contiguous", "one_grad_shared_by_q_and_k"]


@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
@pytest.mark.parametrize("grad_kind", GRAD_KINDS)
def test_gradient_layout_matrix(impl, device, grad_kind):
    H = 3   # Hq = Hk so that one gradient tensor can serve both outputs
    cos, sin = tables(16, D, device)
    q, k = make_qk(B, T, H, H, D, device=device, requires_grad=True)
    q_out, k_out = rope(impl, q, k, cos, sin, 1)
    g = torch.Generator().manual_seed(9)
    if grad_kind == "stride0_from_sum":
        dq, dk = torch.autograd.grad(q_out.sum() + 2 * k_out.sum(), (q, k))   # grads are expanded scalars
        gq, gk = torch.ones_like(q), torch.full_like(k, 2.0)
    else:
        if grad_kind == "dense":
            gq, gk = (torch.randn(B, T, H, D, generator=g).to(device) for _ in range(2))
        elif grad_kind == "expanded":
            gq, gk = (torch.randn(1, T, 1, D, generator=g).to(device).expand(B, T, H, D) for _ in range(2))
        elif grad_kind == "non_contiguous":
            gq, gk = (torch.randn(B, D, H, T, generator=g).to(device).permute(0, 3, 2, 1) for _ in range(2))
        else:
            gq = gk = torch.randn(B, T, H, D, generator=g).to(device)
        saved = (gq.clone(), gk.clone())
        dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (gq, gk))
        assert torch.equal(gq, saved[0]) and torch.equal(gk, saved[1])      # grads never written
    pos = positions_table(1, B, T)
    torch.testing.assert_close(dq.cpu().double(), truth_rope(gq, pos, D, inverse=True), rtol=0, atol=2e-6)
    torch.testing.assert_close(dk.cpu().double(), truth_rope(gk, pos, D, inverse=True), rtol=0, atol=2e-6)


def _guarded(shape, pad, device, fill=float("nan")):
    """A view of `shape` in the middle of a buffer padded by `pad` on every side of every dim (NaN-filled)."""
    buf = torch.full([n + 2 * pad for n in shape], fill, device=device)
    return buf, buf[tuple(slice(pad, pad + n) for n in shape)]


# (head_dim, rotary_dim): rotary half 6 -> 8 lanes; 9 pass-through dims -> 16 lanes; full rotary, no pass-through
GUARD_DIMS = [(21, 12), (12, 12)]


@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dims", GUARD_DIMS, ids=str)
def test_inputs_untouched_and_nan_guards_never_read(impl, device, layout, dims):
    """q, k live inside NaN guard bands (padded lanes of the non-power-of-two dims are NaN): outputs must be
    finite and right, and the whole input buffers bitwise unchanged."""
    Dg, R = dims
    cos, sin = tables(16, R, device)
    q_buf, q = _guarded((B, T, 3, Dg), 2, device)
    k_buf, k = _guarded((B, T, 1, Dg), 2, device)
    src_q, src_k = make_qk(B, T, 3, 1, Dg, device=device)
    q.copy_(src_q), k.copy_(src_k)
    before = bits(q_buf), bits(k_buf)
    q_out, k_out = rope(impl, q, k, cos, sin, None, layout)
    assert torch.isfinite(q_out).all() and torch.isfinite(k_out).all()
    pos = positions_table(None, B, T)
    torch.testing.assert_close(q_out.cpu().double(), truth_rope(src_q, pos, R, layout=layout), rtol=0, atol=2e-6)
    assert torch.equal(bits(q_buf), before[0]) and torch.equal(bits(k_buf), before[1])


@pytest.mark.skipif(not (INTERPRET or HAS_CUDA), reason="needs the Triton interpreter or a GPU")
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dims", GUARD_DIMS, ids=str)
def test_triton_stores_stay_inside_outputs(layout, dims):
    """launch_rope writing into views inside guarded buffers: guards keep their values, and the outputs
    (surrounded by guard lanes in every dim) get exactly the reference values."""
    device = "cuda" if HAS_CUDA else "cpu"
    Dg, R = dims
    cos, sin = tables(16, R, device)
    q, k = make_qk(B, T, 3, 1, Dg, device=device)
    qo_buf, qo = _guarded((B, T, 3, Dg), 3, device, fill=-7.0)
    ko_buf, ko = _guarded((B, T, 1, Dg), 3, device, fill=-7.0)
    qo.fill_(float("nan")), ko.fill_(float("nan"))
    launch_rope(q, k, cos, sin, qo, ko, interleaved=layout == "interleaved")
    want = rope("reference", q, k, cos, sin, None, layout)
    torch.testing.assert_close(qo, want[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(ko, want[1], rtol=0, atol=1e-6)
    for buf, view in ((qo_buf, qo), (ko_buf, ko)):
        mask = torch.ones_like(buf, dtype=torch.bool)
        mask[tuple(slice(3, 3 + n) for n in view.shape)] = False
        assert (buf[mask] == -7.0).all()


INT64_CHECK = """
import torch
from sweeper.kernels import apply_rope, rope_cache
device = "cuda" if torch.cuda.is_available() else "cpu"
stride_b = 2 ** 30 + 32        # fits in int32; b * stride_b for b = 2 does not
flat = torch.empty(2 * stride_b + 4096, dtype=torch.float16, device=device)   # 4 GiB, few pages touched
q = flat.as_strided((3, 2, 1, 16), (stride_b, 16, 16, 1), 0)      # batch 2 starts past 2**31 elements
k = flat.as_strided((3, 2, 1, 16), (stride_b, 16, 16, 1), 64)
g = torch.Generator().manual_seed(0)
src_q, src_k = (torch.randn(3, 2, 1, 16, generator=g).half().to(device) for _ in range(2))
q.copy_(src_q), k.copy_(src_k)
cos, sin = rope_cache(8, 16, device=device)
got = apply_rope(q, k, cos, sin, 3, impl="triton")
want = apply_rope(src_q, src_k, cos, sin, 3, impl="reference")
assert all(torch.equal(a, b) for a, b in zip(got, want)), "wrong values past 2**31 elements"
print("int64 ok")
"""


@pytest.mark.slow
@pytest.mark.skipif(not (INTERPRET or HAS_CUDA), reason="needs the Triton interpreter or a GPU")
def test_triton_int64_offsets_past_2_31_elements():
    """Element offsets beyond 2**31 (a 4 GiB float16 buffer, only a few pages touched). In a subprocess:
    int32 index math wraps to a negative offset, which crashes the process instead of failing politely."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", INT64_CHECK], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and "int64 ok" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
def test_positions_past_the_table_and_bad_arguments_raise(impl, device):
    cos, sin = tables(10, D, device)
    q, k = make_qk(B, T, HQ, HK, D, device=device)
    with pytest.raises(ValueError, match=r"max position 10 is past the cos/sin table of length 10"):
        rope(impl, q, k, cos, sin, 5)                                     # 5 + T - 1 = 10
    # host-resident tensor positions are checked exactly (no device sync); device-resident ones raise through an
    # asynchronous device-side assertion (tests/test_rope_compile.py), which would end this CUDA context
    with pytest.raises(ValueError, match=r"max position 12 is past the cos/sin table of length 10"):
        rope(impl, q, k, cos, sin, torch.tensor([0, 7]))
    with pytest.raises(ValueError, match=r"max position 10 is past the cos/sin table of length 10"):
        rope(impl, q, k, cos, sin, torch.tensor([[0, 1, 2, 3, 4, 10]]))
    with pytest.raises(ValueError, match="negative position -1"):
        rope(impl, q, k, cos, sin, -1)
    rope(impl, q, k, cos, sin, 4)                                         # 4 + 5 = 9: the last row, fine
    bad = [dict(layout="rotated"), dict(format="tbhd"), dict(impl="fast")]
    for kw in bad:
        with pytest.raises(ValueError, match=next(iter(kw)) + "="):
            from sweeper.kernels import apply_rope
            apply_rope(q, k, cos, sin, **{"impl": impl, **kw})
    with pytest.raises(ValueError, match="rotary_dim 32 .* exceeds head_dim 24"):
        rope(impl, q, k, *tables(10, 32, device))
    with pytest.raises(ValueError, match="must agree"):
        rope(impl, q, k[:, :3], cos, sin)
    with pytest.raises(ValueError, match="positions shape"):
        rope(impl, q, k, cos, sin, torch.zeros(3, T, dtype=torch.long, device=device))


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] + ([torch.bfloat16] if HAS_CUDA else []))
def test_bitwise_deterministic(impl, device, dtype):
    if impl == "triton" and device == "cpu" and dtype == torch.bfloat16:
        pytest.skip("bf16 is wrong in the Triton interpreter")
    cos, sin = tables(64, D, device)
    runs = []
    for _ in range(2):
        q, k = make_qk(B, 33, HQ, HK, D, dtype=dtype, device=device, requires_grad=True)
        out = rope(impl, q, k, cos, sin, torch.tensor([0, 20], device=device))
        grads = torch.autograd.grad(out, (q, k), (torch.ones_like(out[0]), torch.full_like(out[1], 0.5)))
        runs.append([bits(t) for t in (*out, *grads)])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
