"""Full-batch gradient descent on a small wide logistic problem; JSON lines per epoch."""
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
p.add_argument("--l2", type=float, default=0.0)
a = p.parse_args()
X, y = make_data(260, 40, noise=2.0)
Xtr, ytr, Xva, yva = X[:60], y[:60], X[60:], y[60:]
w = np.random.default_rng(a.seed).normal(scale=0.3, size=40)
for epoch in range(1, 31):
    w -= 0.5 * grad(w, Xtr, ytr, a.l2)
    train_loss = nll(w, Xtr, ytr)
    val_loss = nll(w, Xva, yva)
    print(json.dumps({"step": epoch, "train_loss": train_loss, "val_loss": val_loss}))
print(json.dumps({"val_loss": val_loss}))
