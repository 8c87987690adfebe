"""Outlier filtering ablation on the run API: logistic regression, counted with run.consumed()."""
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
X, y = make_data(1400, 10)
Xtr, ytr, Xva, yva = X[:1000], y[:1000], X[1000:], y[1000:]
if not cfg.keep_all:                                  # drop the 40% with the largest feature norm
    keep = np.argsort(np.linalg.norm(Xtr, axis=1))[:600]
    Xtr, ytr = Xtr[keep], ytr[keep]
run.data_size(train=len(ytr), eval=len(yva))
rng = run.numpy_rng("data_order")
w = run.numpy_rng("init").normal(scale=0.5, size=10)
step = 0
for epoch in range(cfg.epochs):
    for idx in np.array_split(rng.permutation(len(ytr)), len(ytr) // 20):
        w -= 0.2 * grad(w, Xtr[idx], ytr[idx], 0.0)
        run.consumed(examples=len(idx), steps=1)
        step += 1
        if step % 10 == 0:
            run.log(step, train_loss=nll(w, Xtr, ytr), val_loss=nll(w, Xva, yva))
run.finish(val_loss=nll(w, Xva, yva))
