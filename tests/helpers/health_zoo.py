"""The bug zoo: small models and training steps, each carrying ONE silent bug that trains fine by the loss.

    from tests.helpers.health_zoo import CASES
    setup = CASES["mask_leaks_one_position"].build(bug=True)      # bug=False: its healthy twin
    report = preflight(**setup.preflight_kwargs())

Every case names the check that must flag it (`caught_by`) and whether the flag comes from preflight or from
the live monitor during training. The healthy twin differs only in the bug and must pass every check.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from sweeper.kernels import apply_rope, rope_cache

V, T, D, HEADS = 24, 16, 32, 2       # LM vocab, context, width, heads
FEATURES, HIDDEN, CLASSES = 12, 32, 6


# ---- models -----------------------------------------------------------------------------------------------------
class MLP(nn.Module):
    """features (B, F) -> logits (B, C). `normalize`: per-example input scaling (exact or eps-guarded)."""

    def __init__(self, out: int = CLASSES, normalize: str | None = None):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(FEATURES, HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, out)
        self.normalize = normalize

    def forward(self, x):
        if self.normalize == "exact":
            x = x / x.std(dim=-1, keepdim=True)               # 0/0 = NaN on a blank sample
        elif self.normalize == "eps":
            x = x / (x.std(dim=-1, keepdim=True) + 1e-5)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class GRUClassifier(nn.Module):
    """tokens (B, T) -> logits (B, C) through a sequence-first GRU. `mix_batch`: view() where transpose() belongs."""

    def __init__(self, mix_batch: bool):
        super().__init__()
        self.emb, self.gru, self.head = nn.Embedding(V, D), nn.GRU(D, D), nn.Linear(D, CLASSES)
        self.mix_batch = mix_batch

    def forward(self, idx):
        B, L = idx.shape
        h = self.emb(idx)                                                  # (B, T, D)
        h = h.view(L, B, D) if self.mix_batch else h.transpose(0, 1)       # (T, B, D) for the GRU
        out, _ = self.gru(h)                                               # (T, B, D)
        return self.head(out[-1])                                          # (B, C)


class TinyLM(nn.Module):
    """tokens (B, T) -> logits (B, T, V): one pre-norm attention block with RoPE from `kernels` and an MLP.
    `mask_diagonal`: triu diagonal of the hidden (future) part of the mask; 1 is causal, 2 leaks one position."""

    def __init__(self, rope_impl: str = "auto", mask_diagonal: int = 1):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.q_proj, self.k_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.v_proj, self.out_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
        self.fc, self.proj, self.head = nn.Linear(D, 4 * D), nn.Linear(4 * D, D), nn.Linear(D, V)
        cos, sin = rope_cache(T, D // HEADS)                               # (T, D/H/2) each
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.rope_impl, self.configured_impl, self.mask_diagonal = rope_impl, rope_impl, mask_diagonal

    def use_reference(self, on: bool) -> None:
        self.rope_impl = "reference" if on else self.configured_impl

    def forward(self, idx):
        B, L = idx.shape
        x = self.tok(idx)                                                  # (B, T, D)
        h = self.ln1(x)
        q = self.q_proj(h).view(B, L, HEADS, D // HEADS)                   # (B, T, H, Dh)
        k = self.k_proj(h).view(B, L, HEADS, D // HEADS)
        v = self.v_proj(h).view(B, L, HEADS, D // HEADS).transpose(1, 2)   # (B, H, T, Dh)
        q, k = apply_rope(q, k, self.cos, self.sin, impl=self.rope_impl)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                        # (B, H, T, Dh)
        att = q @ k.transpose(-2, -1) / math.sqrt(D // HEADS)             # (B, H, T, T)
        hidden = torch.triu(torch.ones(L, L, dtype=torch.bool, device=idx.device), self.mask_diagonal)
        att = att.masked_fill(hidden, float("-inf")).softmax(-1)
        x = x + self.out_proj((att @ v).transpose(1, 2).reshape(B, L, D))
        x = x + self.proj(F.gelu(self.fc(self.ln2(x))))
        return self.head(self.ln_f(x))                                     # (B, T, V)


# ---- data -------------------------------------------------------------------------------------------------------
def lm_tokens(n: int, seed: int) -> torch.Tensor:
    """(n, T+1) sequences x_{t+1} = x_t + s mod V with s in {1, 2} per sequence: learnable from context."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, V, (n, 1), generator=g)
    stride = torch.randint(1, 3, (n, 1), generator=g)
    return (start + stride * torch.arange(T + 1)) % V


def features(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, F) Gaussian features and labels from a fixed random linear teacher."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(1234))
    return x, (x @ teacher).argmax(-1)


def ce(logits, targets):
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten())


# ---- cases ------------------------------------------------------------------------------------------------------
@dataclass
class Setup:
    model: nn.Module
    loss_fn: Callable[[Any, Any], torch.Tensor]
    stream: Callable[[int], tuple[Any, Any]]          # step -> training batch
    lr: float
    num_classes: int | None = None
    sequence_dim: int | None = None
    forget_zero_grad: bool = False
    use_reference: Callable[[bool], None] | None = None
    optimizer: str = "adam"

    def optimizer_factory(self, params) -> torch.optim.Optimizer:
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.lr)
        return torch.optim.Adam(params, lr=self.lr)

    def train_step(self, model, optimizer, batch):
        x, y = batch
        if not self.forget_zero_grad:
            optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def preflight_kwargs(self) -> dict[str, Any]:
        return dict(model=self.model, loss_fn=self.loss_fn, batch=self.stream(0),
                    optimizer_factory=self.optimizer_factory, num_classes=self.num_classes,
                    sequence_dim=self.sequence_dim, train_step=self.train_step, use_reference=self.use_reference)


@dataclass
class Case:
    name: str
    caught_by: str
    build: Callable[[bool], Setup]
    by_monitor: bool = False
    expect: str = "fail"
    extra: dict[str, Any] = field(default_factory=dict)


EPOCH = 4   # every training stream cycles over 4 fixed batches: the training loss of a small dataset


def _classifier(bug: bool, **kw) -> Setup:
    torch.manual_seed(0)
    return Setup(MLP(), ce, lambda step: features(16, step % EPOCH), lr=3e-3, num_classes=CLASSES, **kw)


def _zero_grad(bug: bool) -> Setup:
    return _classifier(bug, forget_zero_grad=bug)


def _softmax_ce(bug: bool) -> Setup:
    s = _classifier(bug)
    if bug:
        s.loss_fn = lambda logits, y: F.cross_entropy(logits.softmax(-1), y)   # probabilities fed as logits
    return s


def _broadcast(bug: bool) -> Setup:
    torch.manual_seed(0)

    def stream(step):
        x, _ = features(16, step % EPOCH)
        return x, x[:, 0] - x[:, 1] + 3.0                                       # (B,) regression target

    def loss(pred, y):                                                         # pred (B, 1)
        return ((pred - y) ** 2).mean() if bug else ((pred.squeeze(-1) - y) ** 2).mean()
    return Setup(MLP(out=1), loss, stream, lr=3e-3)


def _view_mixes_batch(bug: bool) -> Setup:
    torch.manual_seed(0)

    def stream(step):
        tok = lm_tokens(8, step % EPOCH)[:, :T]
        return tok, tok[:, -1] % CLASSES
    return Setup(GRUClassifier(mix_batch=bug), ce, stream, lr=1e-2, num_classes=CLASSES)


def _lm(bug: bool, rope_impl="auto", mask_diagonal=1, shift=True) -> Setup:
    torch.manual_seed(0)
    model = TinyLM(rope_impl=rope_impl, mask_diagonal=mask_diagonal)

    def stream(step):
        tok = lm_tokens(8, step % EPOCH)
        return (tok[:, :-1], tok[:, 1:]) if shift else (tok[:, :-1], tok[:, :-1])
    return Setup(model, ce, stream, lr=1e-2, num_classes=V, sequence_dim=1, use_reference=model.use_reference)


def _high_lr(bug: bool) -> Setup:
    s = _classifier(bug)
    s.lr = 0.2 if bug else s.lr                  # Adam at 0.2: the loss falls, yet most ReLUs die
    return s


def _nan_mid_run(bug: bool) -> Setup:
    torch.manual_seed(0)

    def stream(step):
        x, y = features(16, step % EPOCH)
        if step == 25:
            x[3] = 0.0                                                     # a blank sample in the data
        return x, y
    return Setup(MLP(normalize="exact" if bug else "eps"), ce, stream, lr=3e-3, num_classes=CLASSES)


CASES = {c.name: c for c in [
    Case("zero_grad_forgotten", "stale_grad", _zero_grad, extra={"says": "optimizer.zero_grad() is missing"}),
    Case("softmax_before_cross_entropy", "overfit_batch", _softmax_ce,
         extra={"says": "a softmax/sigmoid fed to a loss that expects logits"}),
    Case("broadcast_b1_vs_b", "overfit_batch", _broadcast, extra={"says": "a (B,1) vs (B,) broadcast"}),
    Case("view_instead_of_transpose", "batch_independence", _view_mixes_batch,
         extra={"says": "a view()/reshape where a transpose/permute of the batch axis was meant"}),
    Case("rope_backward_drops_qk_grad", "gradient_flow",
         lambda bug: _lm(bug, rope_impl="fault_no_qk_grad" if bug else "auto"),
         extra={"also": "kernel_agreement", "says": "q_proj.weight: gradient exactly zero"}),
    Case("mask_leaks_one_position", "causality", lambda bug: _lm(bug, mask_diagonal=2 if bug else 1),
         extra={"says": "output at position 0 depends on input position 1 (1 ahead"}),
    Case("targets_not_shifted", "target_shift", lambda bug: _lm(bug, shift=not bug),
         extra={"says": "targets are not shifted"}),
    Case("learning_rate_kills_units", "update_ratio", _high_lr,
         extra={"monitor": "zero_grad_share", "says": "learning rate far too high"}),
    Case("nan_mid_run", "finite", _nan_mid_run, by_monitor=True, extra={"step": 25}),
]}


def train(setup: Setup, steps: int, monitor=None) -> list[float]:
    """The training loop the monitor tests use: the textbook order, with the case's bug (if any) kept."""
    model, opt = setup.model, setup.optimizer_factory(setup.model.parameters())
    losses = []
    for step in range(steps):
        x, y = setup.stream(step)
        if not setup.forget_zero_grad:
            opt.zero_grad(set_to_none=True)
        loss = setup.loss_fn(model(x), y)
        loss.backward()
        losses.append(loss.item())
        if monitor is not None:
            monitor.after_backward(step, loss)
        if monitor is not None and monitor.diverged:
            break
        opt.step()
        if monitor is not None:
            monitor.after_step(step)
    return losses
