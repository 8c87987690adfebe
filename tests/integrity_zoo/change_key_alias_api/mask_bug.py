"""Linear regression with feature dropout (a random mask per step), run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
data = np.random.default_rng(7)
X = data.normal(size=(400, 8))
y = X @ data.normal(size=8) + data.normal(scale=0.5, size=400)
p_drop = cfg.get("drop", 0.0)
w = np.zeros(8)
for step in range(1, cfg.steps + 1):
    i = rng.integers(0, 300, size=32)
    keep = (rng.random(8) >= p_drop) / (1 - p_drop)
    e = (X[i] * keep) @ w - y[i]
    w -= cfg.lr * (X[i] * keep).T @ e / 32
    if step % 10 == 0:
        run.log(step, train_mse=float(np.mean((X[:300] @ w - y[:300]) ** 2)))
run.finish(val_mse=float(np.mean((X[300:] @ w - y[300:]) ** 2)), steps=cfg.steps)
