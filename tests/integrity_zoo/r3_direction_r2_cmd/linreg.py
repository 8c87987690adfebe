"""Linear regression by gradient descent; logs the training MSE and the validation R^2 per epoch."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lr", type=float, default=0.02)
a = p.parse_args()
g = np.random.default_rng(5)
X = g.normal(size=(300, 8))
y = X @ g.normal(size=8) + g.normal(scale=1.0, size=300)
Xtr, ytr, Xva, yva = X[:200], y[:200], X[200:], y[200:]
w = np.random.default_rng(a.seed).normal(scale=1.0, size=8)


def r2(w):
    return float(1 - np.mean((Xva @ w - yva) ** 2) / np.var(yva))


for epoch in range(1, 21):
    w -= a.lr * (2 * Xtr.T @ (Xtr @ w - ytr) / 200)
    print(json.dumps({"step": epoch, "train_loss": float(np.mean((Xtr @ w - ytr) ** 2)), "val_r2": r2(w)}))
print(json.dumps({"val_r2": r2(w)}))
