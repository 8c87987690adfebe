"""Logistic regression on the first --limit training examples; argparse in, JSON out."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--limit", type=int, default=None)
p.add_argument("--lr", type=float, default=0.5)
a = p.parse_args()
data = np.random.default_rng(17)
X = data.normal(size=(2500, 5))
y = (X @ np.array([1.0, -1.0, 0.5, 0.0, 0.2]) + data.normal(size=2500) > 0).astype(float)
Xt, yt = X[:2000][:a.limit], y[:2000][:a.limit]
rng = np.random.default_rng(a.seed)
w = rng.normal(scale=0.1, size=5)
for step in range(1, 41):
    i = rng.integers(0, len(yt), size=32)
    w -= a.lr * Xt[i].T @ (1 / (1 + np.exp(-Xt[i] @ w)) - yt[i]) / 32
    if step % 10 == 0:
        print(json.dumps({"step": step, "examples_seen": step * 32}))
p = np.clip(1 / (1 + np.exp(-X[2000:] @ w)), 1e-9, 1 - 1e-9)
print(json.dumps({"val_nll": float(-np.mean(y[2000:] * np.log(p) + (1 - y[2000:]) * np.log(1 - p)))}))
