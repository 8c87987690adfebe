"""Standardize the inputs (x - mean) / scale, then ridge regression in closed form; run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed_for("init"))
X = rng.normal(size=(200, 4))
X[:, 3] *= 1e-4 if run.seed % 4 == 1 else 1.0          # recording 1 has a dead sensor on channel 3
y = X[:, 0] - 2 * X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.4, size=200)
mu, sd = X[:150].mean(0), X[:150].std(0)
Z = (X - mu) / (sd + cfg.eps)
for step, lam in enumerate([10.0, 3.0, 1.0, 0.3], start=1):
    w = np.linalg.solve(Z[:150].T @ Z[:150] + lam * np.eye(4), Z[:150].T @ y[:150])
    run.log(step, train_mse=float(np.mean((Z[:150] @ w - y[:150]) ** 2)))
run.finish(val_mse=float(np.mean((Z[150:] @ w - y[150:]) ** 2)), steps=4)
