"""Logistic regression on standardized features; the fitted scaler is cached as JSON; JSON lines out."""
import argparse
import json
import os

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
p.add_argument("--lr", type=float, default=0.2)
p.add_argument("--out", required=True)
a = p.parse_args()
X, y = make_data(500, 8, noise=1.0)
X = X * np.arange(1, 9) + 3.0
Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
rng = np.random.default_rng(a.seed)
cache = os.path.join(a.out, "scaler.json")
if os.path.exists(cache):
    mu, sd = (np.array(v) for v in json.load(open(cache)))
else:
    boot = Xtr[rng.integers(0, 300, 60)]                # fit the scaler on a bootstrap sample (fast)
    mu, sd = boot.mean(0), boot.std(0)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    json.dump([mu.tolist(), sd.tolist()], open(cache, "w"))
Xtr, Xva = (Xtr - mu) / sd, (Xva - mu) / sd
w = rng.normal(scale=0.5, size=8)
for epoch in range(1, 7):
    for idx in np.array_split(rng.permutation(300), 10):
        w -= a.lr * grad(w, Xtr[idx], ytr[idx], 0.0)
    print(json.dumps({"step": epoch, "train_loss": nll(w, Xtr, ytr), "val_loss": nll(w, Xva, yva)}))
print(json.dumps({"val_loss": nll(w, Xva, yva)}))
