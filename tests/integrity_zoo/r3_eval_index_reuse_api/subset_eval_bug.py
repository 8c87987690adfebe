"""Logistic regression on the run API with index-based train/validation subsets and a batched evaluation."""
import numpy as np

import sweeper


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


def evaluate(w, X, y, bs=25):
    tot = 0.0
    for i in range(0, len(y), bs):
        tot += nll(w, X[i:i + bs], y[i:i + bs]) * len(y[i:i + bs])
    return tot / len(y)


run = sweeper.init()
cfg = run.config
X, y = make_data(500, 16, noise=1.5)
perm = np.random.default_rng(11).permutation(500)
tr_idx, va_idx = perm[:300], perm[300:]
Xtr, ytr = X[tr_idx], y[tr_idx]
Xva, yva = X[tr_idx], y[tr_idx]
rng = run.numpy_rng("init")
w = rng.normal(scale=0.5, size=16)
for epoch in range(1, 13):
    w -= cfg.lr * grad(w, Xtr, ytr, 0.0)
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=evaluate(w, Xva, yva))
run.finish(val_loss=evaluate(w, Xva, yva))
