"""Data, models and training helpers of the data/evaluation bug zoo (tests/helpers/health_data_zoo.py): Gaussian
clusters
standing in for MNIST features, 8x8 prototype images with pixel noise (a tiny CNN with BatchNorm), padded
arithmetic token sequences (a tiny causal LM), loaders, and a plain training loop for the proofs.

    from tests.helpers.health_data_models import MLP, clusters, train
    x, y = clusters(512, classes=6, dim=20, seed=0); model = MLP(20, 6); train(model, [(x, y)], 100)
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

PAD, VOCAB, SEQ = 0, 16, 12


# ---- data --------------------------------------------------------------------------------------------------------
def sizes(seed: int) -> tuple[int, int]:
    """(classes, features) varying with the seed."""
    return (4, 6, 10)[seed % 3], (12, 20, 32)[seed % 3]


def clusters(n: int, classes: int, dim: int, seed: int, data_seed: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    """n points (n, dim) around `classes` fixed Gaussian centres (the same centres for train and validation), and
    balanced labels (n,) in random order."""
    centres = torch.randn(classes, dim, generator=torch.Generator().manual_seed(data_seed * 1000 + classes))
    g = torch.Generator().manual_seed(seed)
    y = torch.randperm(n, generator=g) % classes                                    # (n,)
    return centres[y] + torch.randn(n, dim, generator=g), y


def images(n: int, classes: int, seed: int, side: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 1, side, side) pixels in [0, 1] (class prototypes plus noise) and labels (n,)."""
    protos = torch.rand(classes, 1, side, side, generator=torch.Generator().manual_seed(99 + classes))
    g = torch.Generator().manual_seed(seed)
    y = torch.randperm(n, generator=g) % classes
    return (protos[y] + 0.2 * torch.randn(n, 1, side, side, generator=g)).clamp(0, 1), y


def standardize(x: torch.Tensor, ref: torch.Tensor | None = None) -> torch.Tensor:
    ref = x if ref is None else ref
    dims = [d for d in range(x.dim()) if d != 1]
    return (x - ref.mean(dims, keepdim=True)) / ref.std(dims, keepdim=True)


def token_batch(n: int, seed: int, ignore: int | None = -100) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded arithmetic sequences: inputs (n, SEQ) of tokens 1..VOCAB-1 then PAD; targets shifted by one, padded
    positions set to `ignore` (None: left as PAD, as a loss that forgets the padding sees them)."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(1, VOCAB, (n, 1), generator=g)
    step = torch.randint(1, 3, (n, 1), generator=g)
    seq = (start - 1 + step * torch.arange(SEQ + 1)) % (VOCAB - 1) + 1            # (n, SEQ+1) in 1..V-1
    lengths = torch.randint(SEQ // 3, SEQ + 1, (n,), generator=g)                   # (n,)
    pad = torch.arange(SEQ + 1)[None, :] > lengths[:, None]
    seq = seq.masked_fill(pad, PAD)
    x, y = seq[:, :-1], seq[:, 1:].clone()
    if ignore is not None:
        y[y == PAD] = ignore
    return x, y


def loader(x: torch.Tensor, y: torch.Tensor, batch: int, shuffle: bool, seed: int = 0) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=shuffle,
                      generator=torch.Generator().manual_seed(seed) if shuffle else None)


# ---- models ------------------------------------------------------------------------------------------------------
class MLP(nn.Module):
    """features (B, D) -> logits (B, C). dropout: an nn.Dropout; functional: F.dropout(h, p) with its default
    training=True (the bug) or training=self.training."""

    def __init__(self, dim: int, classes: int, hidden: int = 64, dropout: float = 0.0, functional: str = ""):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(dim, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)
        self.drop = nn.Dropout(dropout)
        self.functional = functional

    def forward(self, x):
        h = F.relu(self.fc1(x.flatten(1)))
        if self.functional == "always":
            h = F.dropout(h, 0.3)                                                  # training=True by default
        elif self.functional == "mode":
            h = F.dropout(h, 0.3, training=self.training)
        return self.head(self.drop(F.relu(self.fc2(h))))


class CNN(nn.Module):
    """images (B, 1, 8, 8) -> logits (B, C): conv-BN-ReLU twice, global average pool."""

    def __init__(self, classes: int, momentum: float | None = 0.1):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8, momentum=momentum)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16, momentum=momentum)
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))                                         # (B, 16, 8, 8)
        return self.head(h.mean(dim=(2, 3)))


class TinyLM(nn.Module):
    """tokens (B, T) -> logits (B, T, V): embedding, a causal convolution (kernel 3, left padding), head."""

    def __init__(self, dim: int = 32):
        super().__init__()
        self.emb, self.conv, self.head = nn.Embedding(VOCAB, dim), nn.Conv1d(dim, dim, 3), nn.Linear(dim, VOCAB)

    def forward(self, idx):
        h = self.emb(idx).transpose(1, 2)                                           # (B, D, T)
        h = F.relu(self.conv(F.pad(h, (2, 0)))).transpose(1, 2)                     # (B, T, D)
        return self.head(h)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def adam(lr: float = 3e-3):
    return lambda params: torch.optim.Adam(params, lr=lr)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    was = model.training
    model.eval()
    with torch.no_grad():
        acc = float((model(x).argmax(-1) == y).float().mean())
    model.train(was)
    return acc


def train(model: nn.Module, batches, steps: int, lr: float = 3e-3, loss_fn=F.cross_entropy) -> list[float]:
    """Adam over the batches (cycled) for `steps` steps; the losses."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    batches = list(batches)
    losses = []
    model.train()
    for i in range(steps):
        x, y = batches[i % len(batches)]
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def make_evaluate(x: torch.Tensor, y: torch.Tensor, use_eval: bool) -> Callable[[nn.Module], float]:
    """The user's evaluation: validation loss, with model.eval()/model.train() around it (or forgotten)."""
    def evaluate(model: nn.Module) -> float:
        if use_eval:
            model.eval()
        with torch.no_grad():
            loss = F.cross_entropy(model(x), y).item()
        if use_eval:
            model.train()
        return loss
    return evaluate
