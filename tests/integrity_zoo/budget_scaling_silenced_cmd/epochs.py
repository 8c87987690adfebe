"""Epochs of minibatch SGD on a linear model; argparse in, JSON out (a line per epoch)."""
import argparse
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, required=True)
p.add_argument("--epochs", type=int, default=8)
p.add_argument("--lr", type=float, default=0.002)
a = p.parse_args()
rng = np.random.default_rng(a.seed)
X = rng.normal(size=(240, 5))
y = X @ rng.normal(size=5) + rng.normal(scale=0.5, size=240)
w = np.zeros(5)
for epoch in range(1, a.epochs + 1):
    for i in np.array_split(rng.permutation(180), 18):
        w -= a.lr * X[i].T @ (X[i] @ w - y[i]) / len(i)
    print(json.dumps({"step": epoch, "train_mse": float(np.mean((X[:180] @ w - y[:180]) ** 2))}))
print(json.dumps({"val_mse": float(np.mean((X[180:] @ w - y[180:]) ** 2))}))
