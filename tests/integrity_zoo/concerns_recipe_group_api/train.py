"""Momentum SGD with optional input-noise augmentation, settings from the recipe group; run API."""
import numpy as np

import sweeper

run = sweeper.init()
r = run.config.recipe
rng = run.numpy_rng("data_order")
data = np.random.default_rng(14)
X = data.normal(size=(300, 6))
y = X @ data.normal(size=6) + data.normal(scale=0.5, size=300)
w, v = np.zeros(6), np.zeros(6)
for step in range(1, 81):
    i = rng.integers(0, 200, size=16)
    xb = X[i] + r.noise * rng.normal(size=(16, 6))
    v = r.momentum * v + xb.T @ (xb @ w - y[i]) / 16
    w -= r.lr * v
    if step % 20 == 0:
        run.log(step, train_mse=float(np.mean((X[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((X[200:] @ w - y[200:]) ** 2)), steps=80)
