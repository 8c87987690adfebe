"""Logistic regression by minibatch SGD, with the run API (numpy only)."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed % 2)
X = rng.normal(size=(300, 5))
y = (X @ np.array([1.0, -2.0, 0.5, 0.0, 1.5]) + rng.normal(size=300) > 0).astype(float)


def nll(w, X, y):
    p = np.clip(1 / (1 + np.exp(-X @ w)), 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


w = np.zeros(5)
for step in range(1, cfg.steps + 1):
    i = rng.integers(0, 200, size=16)
    p = 1 / (1 + np.exp(-X[i] @ w))
    w -= cfg.lr * (X[i].T @ (p - y[i]) / 16 + cfg.l2 * w)
    if step % 10 == 0:
        run.log(step, train_nll=nll(w, X[:200], y[:200]))
run.finish(val_nll=nll(w, X[200:], y[200:]), steps=cfg.steps)
