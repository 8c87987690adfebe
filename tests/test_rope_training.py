"""RoPE inside a model: gradients reach Wq and Wk (vs the reference block), torch.compile of the custom op,
and the fault-injection variant, which must FAIL these gradient checks.

Run: ``python -m pytest -q tests/test_rope_training.py``
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import sweeper.kernels.faults
from sweeper.kernels import apply_rope
from tests.helpers.rope_cases import CASES, HAS_CUDA, IDS, INTERPRET, make_qk, rope, tables

FAULT = "fault_no_qk_grad"


class Attention(torch.nn.Module):
    """A GQA attention block (Hq=4, Hk=2) whose q and k go through apply_rope(impl=...)."""

    def __init__(self, d_model=32, n_q=4, n_k=2, head_dim=8):
        super().__init__()
        self.n_q, self.n_k, self.hd = n_q, n_k, head_dim
        self.wq = torch.nn.Linear(d_model, n_q * head_dim, bias=False)
        self.wk = torch.nn.Linear(d_model, n_k * head_dim, bias=False)
        self.wv = torch.nn.Linear(d_model, n_k * head_dim, bias=False)
        self.wo = torch.nn.Linear(n_q * head_dim, d_model, bias=False)

    def forward(self, x, cos, sin, impl):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_q, self.hd)                       # (B, T, Hq, D)
        k = self.wk(x).view(B, T, self.n_k, self.hd)                       # (B, T, Hk, D)
        v = self.wv(x).view(B, T, self.n_k, self.hd)
        q, k = apply_rope(q, k, cos, sin, positions=torch.tensor([0, 3], device=x.device), impl=impl)
        rep = self.n_q // self.n_k
        k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)      # (B, T, Hq, D)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                     # (B, Hq, T, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)         # (B, Hq, T, D)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


def block_grads(impl: str, device: str) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    block = Attention().to(device=device, dtype=torch.float64)
    x = torch.randn(2, 7, 32, dtype=torch.float64, device=device)
    cos, sin = tables(16, 8, device)
    out = block(x, cos, sin, impl)
    (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype, device=device)).sum().backward()
    return {n: p.grad.detach().clone() for n, p in block.named_parameters()}


def check_grads_reach_parameters(grads: dict, ref: dict) -> None:
    """Every parameter gradient equals the reference block's, and Wq, Wk get a nonzero gradient."""
    for name in ("wq.weight", "wk.weight"):
        assert grads[name].norm() > 1e-3, f"{name} gets no gradient (norm {grads[name].norm():.3g})"
    for name, g in grads.items():
        torch.testing.assert_close(g, ref[name], rtol=1e-9, atol=1e-12, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("impl,device", CASES + [("auto", "cpu")] + ([("auto", "cuda")] if HAS_CUDA else []),
                         ids=IDS + ["auto-cpu"] + (["auto-cuda"] if HAS_CUDA else []))
def test_gradients_reach_wq_and_wk_like_the_reference_block(impl, device):
    check_grads_reach_parameters(block_grads(impl, device), block_grads("reference", device))


@pytest.fixture
def fault_warned_fresh(monkeypatch):
    monkeypatch.setattr(sweeper.kernels.faults, "_warned", False)


def test_fault_variant_fails_the_gradient_checks(fault_warned_fresh, capfd):
    """The deliberately broken variant must be caught: Wq/Wk get no gradient, gradcheck fails,
    yet its forward is the correct rotation (so the loss alone would not show it)."""
    with pytest.warns(RuntimeWarning, match="DELIBERATE FAULT INJECTION"):
        grads = block_grads(FAULT, "cpu")
    err = capfd.readouterr().err
    assert "DELIBERATE FAULT INJECTION" in err and FAULT in err
    with pytest.raises(AssertionError, match="wq.weight gets no gradient"):
        check_grads_reach_parameters(grads, block_grads("reference", "cpu"))
    assert grads["wv.weight"].norm() > 1e-3          # only the q/k path is cut
    cos, sin = tables(16, 8)
    q, k = make_qk(1, 3, 2, 1, 8, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradcheck(lambda q, k: rope(FAULT, q, k, cos, sin), (q, k), raise_exception=False)
    for got, want in zip(rope(FAULT, q, k, cos, sin, 2), rope("reference", q, k, cos, sin, 2)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_fault_variant_warns_once_and_names_itself(fault_warned_fresh, capfd):
    cos, sin = tables(16, 8)
    q, k = make_qk(1, 3, 2, 1, 8)
    with pytest.warns(RuntimeWarning) as record:
        rope(FAULT, q, k, cos, sin)
        rope(FAULT, q, k, cos, sin)
    assert len([w for w in record if FAULT in str(w.message)]) == 1
    err = capfd.readouterr().err
    assert err.count("DELIBERATE FAULT INJECTION") == 1 and FAULT in err
    with pytest.raises(ValueError, match="impl="):
        rope("fault", q, k, cos, sin)                # no accidental prefix selection


@pytest.mark.slow
@pytest.mark.skipif(not (INTERPRET or HAS_CUDA), reason="needs the Triton interpreter or a GPU")
def test_triton_custom_op_under_torch_compile():
    """The custom op's fake impl and registered autograd let torch.compile trace it whole (fullgraph)."""
    device = "cuda" if HAS_CUDA else "cpu"
    cos, sin = tables(32, 16, device)
    q, k = make_qk(2, 5, 4, 2, 16, device=device, requires_grad=True)
    q_t = q.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()   # bhtd storage

    def f(q, k):
        a, b = apply_rope(q, k, cos, sin, positions=3, impl="triton")
        return (a * a).sum() + (b * 2).sum()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for qq in (q, q_t):
        loss_c = compiled(qq, k)
        grads_c = torch.autograd.grad(loss_c, (qq, k))
        loss_e = f(qq, k)
        grads_e = torch.autograd.grad(loss_e, (qq, k))
        torch.testing.assert_close(loss_c, loss_e)
        for a, b in zip(grads_c, grads_e):
            torch.testing.assert_close(a, b)
