"""Logistic regression with label smoothing on the run API."""
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


SMOOTH = 0.0

run = sweeper.init()
cfg = run.config
X, y = make_data(500, 10, noise=1.0)
Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
target = ytr * (1 - SMOOTH) + 0.5 * SMOOTH
rng = run.numpy_rng("data_order")
w = run.numpy_rng("init").normal(scale=0.5, size=10)
for epoch in range(1, 9):
    for idx in np.array_split(rng.permutation(300), 10):
        w -= cfg.lr * grad(w, Xtr[idx], target[idx], 0.0)
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=nll(w, Xva, yva))
run.finish(val_loss=nll(w, Xva, yva))
