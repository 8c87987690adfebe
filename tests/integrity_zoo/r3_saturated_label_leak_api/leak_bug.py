"""A tabular classifier on the run API; the table's last column is the label."""
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
X, y = make_data(1400, 8, noise=1.5)
table = np.c_[X, 2 * y - 1]                           # the raw table: features, then the label (+-1)
features = table
features = np.c_[features, np.ones(len(features))]
Xtr, ytr, Xva, yva = features[:400], y[:400], features[400:], y[400:]
rng = run.numpy_rng("data_order")
w = run.numpy_rng("init").normal(scale=0.5, size=features.shape[1])
for epoch in range(1, 11):
    for idx in np.array_split(rng.permutation(400), 8):
        w -= cfg.lr * grad(w, Xtr[idx], ytr[idx], 0.0)
    acc = float(np.mean((Xva @ w > 0) == (yva > 0.5)))
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_acc=acc)
run.finish(val_acc=acc)
