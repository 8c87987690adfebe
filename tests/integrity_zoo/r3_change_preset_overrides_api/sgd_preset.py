"""Logistic regression with optimizer presets on the run API; cfg.preset picks defaults, cfg keys refine them."""
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


PRESETS = {"sgd": {"lr": 0.05, "momentum": 0.0}, "heavy_ball": {"lr": 0.05, "momentum": 0.9}}

run = sweeper.init()
cfg = run.config
hp = {**PRESETS[cfg.preset], "lr": cfg.lr}
X, y = make_data(400, 10)
Xtr, ytr, Xva, yva = X[:300], y[:300], X[300:], y[300:]
rng = np.random.default_rng(run.seed)
w, v = rng.normal(scale=0.5, size=10), np.zeros(10)
for epoch in range(1, 11):
    for idx in np.array_split(rng.permutation(300), 10):
        v = hp["momentum"] * v + grad(w, Xtr[idx], ytr[idx], 0.0)
        w -= hp["lr"] * v
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=nll(w, Xva, yva))
run.finish(val_loss=nll(w, Xva, yva))
