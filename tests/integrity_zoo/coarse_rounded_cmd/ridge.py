"""Closed-form ridge regression; argparse in, one JSON line out (the loss, rounded for the log)."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--lam", type=float, default=0.1)
a = p.parse_args()
rng = np.random.default_rng(a.seed)
X = rng.normal(size=(80, 20))
y = X[:, :3] @ np.array([1.0, -0.5, 0.25]) + rng.normal(scale=0.6, size=80)
w = np.linalg.solve(X[:50].T @ X[:50] + a.lam * np.eye(20), X[:50].T @ y[:50])
print(json.dumps({"val_loss": round(float(np.mean((X[50:] @ w - y[50:]) ** 2)), 4)}))
