"""RoPE numerics: float64 ground truth, low precision vs a low-precision reference, adjoint identities,
gradcheck, relative-position invariance, odd shapes and partial rotary.

Run: ``python -m pytest -q tests/test_rope_numerics.py``
"""
from __future__ import annotations

import math

import pytest
import torch

from sweeper.kernels import rope_cache
from sweeper.kernels.rope_triton import LaunchConfig, launch_rope
from tests.helpers.rope_cases import (
    CASES,
    HAS_CUDA,
    IDS,
    INTERPRET,
    KERNEL_CASES,
    KERNEL_IDS,
    make_qk,
    positions_table,
    rope,
    rope_passes,
    tables,
    truth_rope,
)

POSITION_KINDS = {
    "none": lambda b, t: None,
    "offset": lambda b, t: 7,
    "per_batch": lambda b, t: torch.tensor([0, 5, 90])[:b],
    "ids": lambda b, t: torch.randint(0, 120, (b, t), generator=torch.Generator().manual_seed(1)),
}


def _positions(kind, batch, seqlen, device):
    p = POSITION_KINDS[kind](batch, seqlen)
    return p.to(device) if isinstance(p, torch.Tensor) else p


def test_rope_cache_matches_formula():
    cos, sin = rope_cache(50, 12, base=500.0)
    assert cos.shape == sin.shape == (50, 6) and cos.dtype == sin.dtype == torch.float32
    for p in (0, 1, 49):
        for i in range(6):
            angle = p * 500.0 ** (-2 * i / 12)
            assert cos[p, i].item() == pytest.approx(math.cos(angle), abs=1e-7)
            assert sin[p, i].item() == pytest.approx(math.sin(angle), abs=1e-7)
    for bad in (dict(max_positions=0, rotary_dim=4), dict(max_positions=4, rotary_dim=3),
                dict(max_positions=4, rotary_dim=4, base=-1.0)):
        with pytest.raises(ValueError, match="rope_cache"):
            rope_cache(**bad)


@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("pos_kind", list(POSITION_KINDS))
def test_forward_and_backward_match_float64_truth(impl, device, layout, pos_kind):
    B, T, Hq, Hk, D, R = 3, 9, 4, 2, 40, 32          # partial rotary: 8 pass-through dims
    cos, sin = tables(128, R, device)
    q, k = make_qk(B, T, Hq, Hk, D, device=device, requires_grad=True)
    positions = _positions(pos_kind, B, T, device)
    pos = positions_table(positions, B, T)
    q_out, k_out = rope(impl, q, k, cos, sin, positions, layout)
    for x, out in ((q, q_out), (k, k_out)):
        torch.testing.assert_close(out.cpu().double(), truth_rope(x, pos, R, layout=layout), rtol=0, atol=2e-6)
        assert torch.equal(out[..., R:], x[..., R:])   # pass-through dims bit-exact
    gq, gk = make_qk(B, T, Hq, Hk, D, device=device, seed=5)
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (gq, gk))
    torch.testing.assert_close(dq.cpu().double(), truth_rope(gq, pos, R, layout=layout, inverse=True),
                               rtol=0, atol=2e-6)
    torch.testing.assert_close(dk.cpu().double(), truth_rope(gk, pos, R, layout=layout, inverse=True),
                               rtol=0, atol=2e-6)


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_float64_inputs_use_float64_math(impl, device, layout):
    cos, sin = tables(64, 16, device)
    q, k = make_qk(2, 5, 3, 1, 20, dtype=torch.float64, device=device)
    got = rope(impl, q, k, cos, sin, 3, layout)
    want = rope("reference", q, k, cos, sin, 3, layout)   # float64 math on the same float32 tables
    for g, w in zip(got, want):
        assert g.dtype == torch.float64
        torch.testing.assert_close(g, w, rtol=0, atol=1e-13)


LOW_CASES = [(i, d, dt) for i, d in KERNEL_CASES for dt in (torch.float16, torch.bfloat16)
             if not (i == "triton" and d == "cpu" and dt == torch.bfloat16)]  # interpreter bf16 is wrong


@pytest.mark.parametrize("impl,device,dtype", LOW_CASES, ids=[f"{i}-{d}-{str(t)[6:]}" for i, d, t in LOW_CASES])
def test_low_precision_rounds_once_and_beats_low_precision_reference(impl, device, dtype):
    """fp32 math then one rounding: error <= half an ulp of the true value, and never worse than a plain
    PyTorch rotation done in the low dtype. Long-context positions (100k) included."""
    B, T, H, D = 2, 16, 4, 64
    cos, sin = tables(100_100, D, device)
    q, k = make_qk(B, T, H, 1, D, dtype=dtype, device=device)
    positions = torch.tensor([3, 100_000 - T], device=device)
    pos = positions_table(positions, B, T)
    q_out, _ = rope(impl, q, k, cos, sin, positions)
    truth = truth_rope(q, pos, D)
    half_ulp = torch.finfo(dtype).eps / 2  # relative: half an ulp <= eps/2 * |value|
    err = (q_out.cpu().double() - truth).abs()
    assert (err <= half_ulp * truth.abs() * 1.001 + 2e-6).all(), f"max err {err.max():.3g}"
    # plain low-precision reference: every product and sum rounded to `dtype`
    c = cos.cpu()[pos][:, :, None, :].to(dtype)
    s = sin.cpu()[pos][:, :, None, :].to(dtype)
    a, b = q.cpu()[..., : D // 2], q.cpu()[..., D // 2:]
    low = torch.cat((a * c - b * s, b * c + a * s), dim=-1)
    low_err = (low.double() - truth).abs()
    assert err.max() <= low_err.max() and err.mean() <= low_err.mean()


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adjoint_identities_with_own_passes(impl, device, dtype):
    """<fwd(x), y> = <x, bwd(y)> and bwd(fwd(x)) = x, using the implementation's own two passes."""
    fwd, bwd = rope_passes(impl)
    cos, sin = tables(32, 24, device)
    xq, xk = make_qk(2, 11, 3, 2, 24, dtype=dtype, device=device, seed=1)
    yq, yk = make_qk(2, 11, 3, 2, 24, dtype=dtype, device=device, seed=2)
    fq, fk = fwd(xq, xk, cos, sin)
    bq, bk = bwd(yq, yk, cos, sin)
    lhs = (fq.double() * yq.double()).sum() + (fk.double() * yk.double()).sum()
    rhs = (xq.double() * bq.double()).sum() + (xk.double() * bk.double()).sum()
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    assert abs(lhs.item() - rhs.item()) <= tol * (1 + abs(lhs.item()))
    rq, rk = bwd(fq, fk, cos, sin)
    rt = 1e-6 if dtype == torch.float64 else 1e-5     # cos^2 + sin^2 = 1 up to the float32 tables
    torch.testing.assert_close(rq, xq, rtol=0, atol=rt)
    torch.testing.assert_close(rk, xk, rtol=0, atol=rt)


@pytest.mark.slow
@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_gradcheck_float64(impl, device, layout):
    cos, sin = tables(40, 6, device)
    q, k = make_qk(2, 3, 2, 1, 9, dtype=torch.float64, device=device, requires_grad=True)  # odd D, partial
    offsets = torch.tensor([1, 30], device=device)
    f = lambda q, k: rope(impl, q, k, cos, sin, offsets, layout)  # noqa: E731
    fast = impl == "triton" and device == "cpu"   # interpreter launches are slow: random-projection mode
    assert torch.autograd.gradcheck(f, (q, k), fast_mode=fast)
    assert torch.autograd.gradgradcheck(f, (q, k), fast_mode=fast)


@pytest.mark.parametrize("impl,device", CASES, ids=IDS)
def test_scores_depend_only_on_relative_position(impl, device):
    """<R_m q, R_n k> is unchanged when m and n shift together (per-batch offsets, then an int offset)."""
    B, T, D = 3, 8, 32
    cos, sin = tables(4200, D, device)
    q, k = make_qk(1, T, 2, 2, D, dtype=torch.float64, device=device)
    q, k = q.expand(B, T, 2, D), k.expand(B, T, 2, D)                     # same content in every batch row
    scores = lambda qo, ko: torch.einsum("bthd,bshd->bhts", qo, ko)    # noqa: E731
    base = scores(*rope(impl, q, k, cos, sin))[0]
    shifted = scores(*rope(impl, q, k, cos, sin, torch.tensor([0, 17, 4096], device=device)))
    for b in range(B):
        torch.testing.assert_close(shifted[b], base, rtol=0, atol=2e-5)
    torch.testing.assert_close(scores(*rope(impl, q, k, cos, sin, 1000))[0], base, rtol=0, atol=2e-5)
    # and positions do matter: a relative shift of k against q changes the scores
    qo, _ = rope(impl, q, k, cos, sin, 0)
    _, ko = rope(impl, q, k, cos, sin, 1)
    assert (scores(qo, ko)[0] - base).abs().max() > 1e-2


SHAPES = [  # (B, T, Hq, Hk, D, rotary_dim)
    (2, 5, 4, 4, 64, 64), (1, 3, 2, 1, 96, 96), (2, 1, 3, 1, 128, 128), (1, 2, 2, 2, 256, 256),
    (2, 7, 5, 3, 80, 64), (1, 4, 2, 1, 75, 32), (1, 3, 1, 1, 130, 128), (3, 2, 6, 2, 24, 24),
]


@pytest.mark.parametrize("impl,device", KERNEL_CASES, ids=KERNEL_IDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_head_dims_gqa_partial_rotary(impl, device, shape):
    B, T, Hq, Hk, D, R = shape
    cos, sin = tables(16, R, device)
    q, k = make_qk(B, T, Hq, Hk, D, device=device, requires_grad=True)
    q_out, k_out = rope(impl, q, k, cos, sin, 2)
    pos = positions_table(2, B, T)
    for x, out in ((q, q_out), (k, k_out)):
        assert out.shape == x.shape and out.dtype == x.dtype
        torch.testing.assert_close(out.cpu().double(), truth_rope(x, pos, R), rtol=0, atol=2e-6)
        assert torch.equal(out[..., R:], x[..., R:])
    gq, gk = make_qk(B, T, Hq, Hk, D, device=device, seed=3)
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (gq, gk))
    assert torch.equal(dq[..., R:], gq[..., R:]) and torch.equal(dk[..., R:], gk[..., R:])
    torch.testing.assert_close(dk.cpu().double(), truth_rope(gk, pos, R, inverse=True), rtol=0, atol=2e-6)


@pytest.mark.skipif(not (INTERPRET or HAS_CUDA), reason="needs the Triton interpreter or a GPU")
@pytest.mark.parametrize("config", [LaunchConfig(4, 2, 4), LaunchConfig(1, 1, 1), LaunchConfig(16, 8, 4)],
                         ids=str)
def test_triton_tiles_not_dividing_the_shape(config):
    """Token and head blocks that do not divide B*T, Hq, Hk: masks keep every tile exact."""
    device = "cuda" if HAS_CUDA else "cpu"
    B, T, Hq, Hk, D = 3, 7, 5, 3, 48
    cos, sin = tables(16, D, device)
    q, k = make_qk(B, T, Hq, Hk, D, device=device)
    q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    launch_rope(q, k, cos, sin, q_out, k_out, config=config)
    want = rope("reference", q, k, cos, sin)
    torch.testing.assert_close(q_out, want[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(k_out, want[1], rtol=0, atol=1e-6)
