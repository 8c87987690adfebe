"""Mini-batch SGD with gradient accumulation; prints its compute ledger (examples_seen, optimizer_steps)."""
import argparse
import json

import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def nll(w, X, y):
    p = np.clip(sigmoid(X @ w), 1e-7, 1 - 1e-7)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def grad(w, X, y, l2):
    return X.T @ (sigmoid(X @ w) - y) / len(y) + l2 * w


def make_data(n, d, noise=1.0):
    g = np.random.default_rng(7)                 # the dataset is fixed; the run's seed drives init and order
    X = g.normal(size=(n, d))
    y = (X @ g.normal(size=d) + g.normal(scale=noise, size=n) > 0).astype(float)
    return X, y


p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--accum", type=int, default=1)
p.add_argument("--steps", type=int, default=80)
p.add_argument("--batch", type=int, default=16)
a = p.parse_args()
X, y = make_data(2000, 12)
Xtr, ytr, Xva, yva = X[:1500], y[:1500], X[1500:], y[1500:]
rng = np.random.default_rng(a.seed)
w = rng.normal(scale=0.5, size=12)
n_updates = a.steps
seen = 0
for step in range(1, n_updates + 1):
    gsum = np.zeros(12)
    for _ in range(a.accum):
        idx = rng.integers(0, 1500, a.batch)
        gsum += grad(w, Xtr[idx], ytr[idx], 0.0)
        seen += a.batch
    w -= 0.3 * gsum / a.accum
    if step % 5 == 0:
        print(json.dumps({"step": step, "train_loss": nll(w, Xtr, ytr), "val_loss": nll(w, Xva, yva)}))
print(json.dumps({"val_loss": nll(w, Xva, yva), "examples_seen": seen, "optimizer_steps": n_updates}))
