"""The second bug zoo: broken/healthy pairs unlike tests/health_zoo.py (CNN with BatchNorm, LSTM, tied-weight
transformer, bf16 autocast, gradient accumulation, a custom autograd Function, sparse embeddings, zero-init
output, a hand-written CE that overflows mid-session, squashed outputs, nll on probabilities, a closed gate,
parameters missing from the optimizer).

    from tests.helpers.health_zoo2 import CASES
    kwargs = CASES["lstm_batch_first_missing"].build(True)     # preflight(**kwargs); False: the healthy twin

Each case names the check that must flag the bug, the status it must get and a phrase of the right cause.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

V, T, D, C, FEAT = 16, 8, 16, 5, 10      # vocab, context, width, classes, features


def ce(logits, targets):
    return F.cross_entropy(logits.flatten(0, -2).float(), targets.flatten())


def cls_batch(n: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEAT, generator=g)                                  # (n, F)
    teacher = torch.randn(FEAT, C, generator=torch.Generator().manual_seed(99))
    return x, (x @ teacher).argmax(-1)                                     # (n,)


def lm_batch(n: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    start, stride = torch.randint(0, V, (n, 1), generator=g), torch.randint(1, 3, (n, 1), generator=g)
    tok = (start + stride * torch.arange(T + 1)) % V                       # (n, T+1)
    return tok[:, :-1], tok[:, 1:]


def image_batch(n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 1, 6, 6, generator=g), torch.randint(0, C, (n,), generator=g)


def adam(lr: float):
    return lambda params: torch.optim.Adam(params, lr=lr)


# ---- models -----------------------------------------------------------------------------------------------------
class BNNet(nn.Module):
    """images (B, 1, 6, 6) -> logits (B, C). bug: a hand-written batch centering in train mode only."""

    def __init__(self, bug: bool):
        super().__init__()
        self.conv, self.bn, self.head = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8, C)
        self.center = nn.Identity()
        self.bug = bug

    def forward(self, x):
        h = self.conv(x)                                                   # (B, 8, 6, 6)
        if self.bug and self.training:
            h = self.center(h) - h.mean(0, keepdim=True)                   # mixes examples; BN is not used
        else:
            h = self.bn(h)
        return self.head(F.relu(h).mean(dim=(2, 3)))                       # (B, C)


class LSTMTagger(nn.Module):
    """tokens (B, T) -> logits (B, C) from the last step. bug: nn.LSTM without batch_first fed (B, T, D)."""

    def __init__(self, bug: bool):
        super().__init__()
        self.emb, self.lstm = nn.Embedding(V, D), nn.LSTM(D, D, batch_first=not bug)
        self.head = nn.Linear(D, C)

    def forward(self, idx):
        out, _ = self.lstm(self.emb(idx))                                  # (B, T, D) (bug: read as (T, B, D))
        return self.head(out[:, -1])


class TiedLM(nn.Module):
    """nn.TransformerEncoderLayer, head tied to the embedding. bug: is_causal claimed but no mask passed."""

    def __init__(self, bug: bool):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.layer = nn.TransformerEncoderLayer(D, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight
        for table in (self.emb, self.pos):
            nn.init.normal_(table.weight, std=0.05)
        self.bug = bug

    def forward(self, idx):
        L = idx.shape[1]
        h = self.emb(idx) + self.pos(torch.arange(L))                      # (B, T, D)
        mask = None if self.bug else nn.Transformer.generate_square_subsequent_mask(L)
        return self.head(self.layer(h, src_mask=mask))                     # (B, T, V)


class AutocastMLP(nn.Module):
    """bf16 autocast on CPU. bug: the hidden activation is detached (fc1 never learns)."""

    def __init__(self, bug: bool):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(FEAT, 32), nn.Linear(32, 32), nn.Linear(32, C)
        self.bug = bug

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.relu(self.fc1(x))
            if self.bug:
                h = h.detach()
            return self.fc3(F.relu(self.fc2(h))).float()                   # (B, C)


class _ScaledGrad(torch.autograd.Function):
    """y = x @ w.T; backward scales the weight gradient by `scale` (1.0 is correct)."""

    @staticmethod
    def forward(ctx, x, w, scale):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, ctx.scale * (g.flatten(0, -2).t() @ x.flatten(0, -2)), None


class CustomOpNet(nn.Module):
    """A custom autograd Function with a reference path. bug: its backward halves the weight gradient."""

    def __init__(self, bug: bool):
        super().__init__()
        self.fc1, self.head = nn.Linear(FEAT, 32), nn.Linear(32, C)
        self.w = nn.Parameter(torch.randn(32, 32) / 32 ** 0.5)
        self.scale, self.reference = (0.5 if bug else 1.0), False

    def use_reference(self, on: bool) -> None:
        self.reference = on

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = h @ self.w.t() if self.reference else _ScaledGrad.apply(h, self.w, self.scale)
        return self.head(F.relu(h))


class SparseBag(nn.Module):
    """tokens (B, T) -> logits (B, C) through nn.Embedding(sparse=True). bug: the lookup is detached."""

    def __init__(self, bug: bool):
        super().__init__()
        self.emb, self.fc, self.head = nn.Embedding(V, D, sparse=True), nn.Linear(D, D), nn.Linear(D, C)
        self.bug = bug

    def forward(self, idx):
        e = self.emb(idx)                                                  # (B, T, D)
        e = e.detach() if self.bug else e
        return self.head(torch.tanh(self.fc(e.mean(1))))


class ZeroInitResidual(nn.Module):
    """Residual MLP whose output projection starts at zero (healthy). bug: a zero-initialised layer in front of
    a ReLU: relu'(0) = 0, so it can never leave zero."""

    def __init__(self, bug: bool):
        super().__init__()
        self.inp, self.fc, self.proj, self.head = (nn.Linear(FEAT, 32), nn.Linear(32, 32), nn.Linear(32, 32),
                                                   nn.Linear(32, C))
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        if bug:
            nn.init.zeros_(self.fc.weight)
            nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.proj(F.relu(self.fc(h)))                              # zero branch at init
        return self.head(h)


class Squashed(nn.Module):
    """MLP whose last operation squashes the logits. bug 'softmax' / 'clamp': before cross_entropy."""

    def __init__(self, squash: str | None):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(FEAT, 32), nn.Linear(32, C)
        self.squash = squash

    def forward(self, x):
        z = self.fc2(F.relu(self.fc1(x)))
        if self.squash == "softmax":
            return z.softmax(-1)
        if self.squash == "clamp":
            return z.clamp(-0.5, 0.5)
        return z


class Gated(nn.Module):
    """A deep branch behind a sigmoid gate plus a thin skip path. bug: the gate starts closed (bias -30)."""

    def __init__(self, bug: bool):
        super().__init__()
        self.branch = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(32, 32), nn.Tanh())])
        self.inp, self.skip, self.gate = nn.Linear(FEAT, 32), nn.Linear(32, C), nn.Linear(32, 1)
        self.out = nn.Linear(32, C)
        nn.init.constant_(self.gate.bias, -30.0 if bug else 0.0)

    def forward(self, x):
        h = self.inp(x)
        return self.skip(h) + torch.sigmoid(self.gate(h)) * self.out(self.branch(h))


class PlainMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(FEAT, 32), nn.Linear(32, 32), nn.Linear(32, C)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Logits16(nn.Module):
    """MLP with a large output scale: logits grow past 11 within a few dozen Adam steps."""

    def __init__(self):
        super().__init__()
        self.fc1, self.head = nn.Linear(FEAT, 32), nn.Linear(32, C)

    def forward(self, x):
        return 4.0 * self.head(F.relu(self.fc1(x)))


def half_ce(logits, y):
    """Hand-written cross-entropy in float16: exp overflows (inf/inf = NaN) once a logit passes ~11."""
    p = logits.half().exp()
    return -(p.gather(1, y[:, None]) / p.sum(1, keepdim=True)).log().float().mean()


def stable_ce(logits, y):
    return (torch.logsumexp(logits, 1) - logits.gather(1, y[:, None]).squeeze(1)).mean()


# ---- cases ------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    caught_by: str
    status: str
    says: str
    build: Callable[[bool], dict[str, Any]]


def _seeded(fn):
    def build(bug: bool) -> dict[str, Any]:
        torch.manual_seed(0)
        return fn(bug)
    return build


def _accumulating_step(forget: bool):
    def train_step(model, batch, optimizer):                               # the common order
        x, y = batch
        if not forget:
            optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for part in (slice(0, len(x) // 2), slice(len(x) // 2, None)):     # 2 micro-batches
            loss = ce(model(x[part]), y[part]) / 2
            loss.backward()
            total += float(loss)
        optimizer.step()
        return torch.tensor(total)
    return train_step


CASES = {c.name: c for c in [
    Case("train_only_batch_centering", "batch_independence", "fail", "only in train mode",
         _seeded(lambda bug: dict(model=BNNet(bug), loss_fn=F.cross_entropy, batch=image_batch(), num_classes=C,
                                  optimizer_factory=adam(1e-2)))),
    Case("lstm_batch_first_missing", "batch_independence", "fail", "lstm",
         _seeded(lambda bug: dict(model=LSTMTagger(bug), loss_fn=ce, batch=(lm_batch()[0], lm_batch()[0][:, -1] % C),
                                  num_classes=C, optimizer_factory=adam(1e-2)))),
    Case("tied_lm_without_causal_mask", "causality", "fail", "the model sees the future",
         _seeded(lambda bug: dict(model=TiedLM(bug), loss_fn=ce, batch=lm_batch(), num_classes=V, sequence_dim=1,
                                  optimizer_factory=adam(1e-2)))),
    Case("bf16_autocast_detached_hidden", "gradient_flow", "fail", "fc1.weight: no gradient",
         _seeded(lambda bug: dict(model=AutocastMLP(bug), loss_fn=F.cross_entropy, batch=cls_batch(), num_classes=C,
                                  optimizer_factory=adam(3e-3)))),
    Case("grad_accumulation_without_zero_grad", "stale_grad", "fail", "optimizer.zero_grad() is missing",
         _seeded(lambda bug: dict(model=PlainMLP(), loss_fn=F.cross_entropy, batch=cls_batch(), num_classes=C,
                                  optimizer_factory=adam(3e-3), train_step=_accumulating_step(forget=bug)))),
    Case("custom_function_backward_halved", "kernel_agreement", "fail", "the custom kernel's backward is wrong",
         _seeded(lambda bug: (lambda m: dict(model=m, loss_fn=F.cross_entropy, batch=cls_batch(), num_classes=C,
                                             optimizer_factory=adam(3e-3), use_reference=m.use_reference))(
             CustomOpNet(bug)))),
    Case("sparse_embedding_detached", "gradient_flow", "fail", "emb.weight: no gradient",
         _seeded(lambda bug: dict(model=SparseBag(bug), loss_fn=F.cross_entropy,
                                  batch=(lm_batch(16)[0], lm_batch(16)[0][:, 0] % C), num_classes=C,
                                  optimizer_factory=lambda params: torch.optim.SGD(params, lr=0.5)))),
    Case("zero_init_layer_before_relu", "gradient_flow", "fail", "fc.weight: gradient exactly zero",
         _seeded(lambda bug: dict(model=ZeroInitResidual(bug), loss_fn=F.cross_entropy, batch=cls_batch(),
                                  num_classes=C, optimizer_factory=adam(3e-3)))),
    Case("half_precision_ce_overflows_mid_session", "overfit_batch", "fail", "at step",
         _seeded(lambda bug: dict(model=Logits16(), loss_fn=half_ce if bug else stable_ce, batch=cls_batch(),
                                  num_classes=C, optimizer_factory=adam(3e-2)))),
    Case("softmax_as_last_layer", "overfit_batch", "fail", "squashes its outputs",
         _seeded(lambda bug: dict(model=Squashed("softmax" if bug else None), loss_fn=F.cross_entropy,
                                  batch=cls_batch(), num_classes=C, optimizer_factory=adam(1e-2)))),
    Case("clamped_logits", "overfit_batch", "fail", "squashes its outputs",
         _seeded(lambda bug: dict(model=Squashed("clamp" if bug else None), loss_fn=F.cross_entropy,
                                  batch=cls_batch(), num_classes=C, optimizer_factory=adam(1e-2)))),
    Case("nll_on_probabilities", "init_loss", "fail", "nll_loss was given probabilities",
         _seeded(lambda bug: dict(model=PlainMLP(), batch=cls_batch(), num_classes=C, optimizer_factory=adam(3e-3),
                                  loss_fn=(lambda z, y: F.nll_loss(z.softmax(-1), y)) if bug
                                  else (lambda z, y: F.nll_loss(z.log_softmax(-1), y))))),
    Case("closed_sigmoid_gate", "gradient_flow", "warn", "vanishing: a closed gate",
         _seeded(lambda bug: dict(model=Gated(bug), loss_fn=F.cross_entropy, batch=cls_batch(), num_classes=C,
                                  optimizer_factory=adam(3e-3)))),
    Case("params_missing_from_optimizer", "param_movement", "fail", "not in the optimizer's param_groups",
         _seeded(lambda bug: dict(model=PlainMLP(), loss_fn=F.cross_entropy, batch=cls_batch(), num_classes=C,
                                  optimizer_factory=(lambda params: torch.optim.AdamW(list(params)[:-2], lr=3e-3))
                                  if bug else adam(3e-3)))),
]}
