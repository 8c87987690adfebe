"""A wide logistic 'language model' on the run API; logs train_loss and val_ppl (exp of the validation NLL)."""
import math

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
X, y = make_data(260, 50, noise=1.5)
Xtr, ytr, Xva, yva = X[:60], y[:60], X[60:], y[60:]
w = run.numpy_rng("init").normal(scale=0.2, size=50)
for epoch in range(1, 41):
    w -= cfg.lr * grad(w, Xtr, ytr, cfg.l2)
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_ppl=math.exp(nll(w, Xva, yva)))
run.finish(val_ppl=math.exp(nll(w, Xva, yva)))
