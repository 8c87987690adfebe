"""Random Fourier features regression with a linear learning-rate warmup; flags in, JSON lines out."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--width", type=int, default=32)
p.add_argument("--warmup_steps", type=int, default=32)
p.add_argument("--lr", type=float, default=0.1)
a = p.parse_args()
g = np.random.default_rng(3)
X = g.uniform(-2, 2, size=(400, 3))
y = np.sin(X).sum(1) + g.normal(scale=0.2, size=400)
rng = np.random.default_rng(a.seed)
F = np.cos(X @ rng.normal(size=(3, a.width)) + rng.uniform(0, 6.28, a.width))
Ftr, ytr, Fva, yva = F[:300], y[:300], F[300:], y[300:]
w = np.zeros(a.width)
for step in range(1, 121):
    lr = a.lr * min(1.0, step / a.warmup_steps)
    idx = rng.integers(0, 300, 32)
    w -= lr * Ftr[idx].T @ (Ftr[idx] @ w - ytr[idx]) / 32
    if step % 20 == 0:
        print(json.dumps({"step": step, "train_loss": float(np.mean((Ftr @ w - ytr) ** 2)),
                          "val_loss": float(np.mean((Fva @ w - yva) ** 2))}))
print(json.dumps({"val_loss": float(np.mean((Fva @ w - yva) ** 2))}))
