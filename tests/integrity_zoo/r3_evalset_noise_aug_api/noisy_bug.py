"""Input-noise augmentation ablation on the run API; the validation set is fingerprinted where it is built."""
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


def load_split(X, y, noise, rng, train):
    if noise > 0:
        X = X + rng.normal(scale=noise, size=X.shape)
    return X, y


run = sweeper.init()
cfg = run.config
X, y = make_data(900, 10, noise=1.0)
aug = np.random.default_rng(21)
Xtr, ytr = load_split(X[:600], y[:600], cfg.noise, aug, train=True)
Xva, yva = load_split(X[600:], y[600:], cfg.noise, aug, train=False)
run.eval_fingerprint(Xva)
rng = run.numpy_rng("data_order")
w = run.numpy_rng("init").normal(scale=0.5, size=10)
for epoch in range(1, 7):
    for idx in np.array_split(rng.permutation(600), 10):
        w -= 0.2 * grad(w, Xtr[idx], ytr[idx], 0.0)
    run.log(epoch, train_loss=nll(w, Xtr, ytr), val_loss=nll(w, Xva, yva))
run.finish(val_loss=nll(w, Xva, yva))
