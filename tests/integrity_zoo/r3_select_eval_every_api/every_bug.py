"""Evaluate every epoch, log every 5th (the run API); a small wide model that overfits."""
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


run = sweeper.init()
cfg = run.config
X, y = make_data(260, 40, noise=2.0)
Xtr, ytr, Xva, yva = X[:60], y[:60], X[60:], y[60:]
w = run.numpy_rng("init").normal(scale=0.3, size=40)
history = []
for epoch in range(1, 31):
    w -= cfg.lr * grad(w, Xtr, ytr, cfg.l2)
    history.append(nll(w, Xva, yva))
    if epoch % 5 == 0:
        run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=history[-1])
run.finish(val_loss=min(history))
