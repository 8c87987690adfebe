"""Gradient descent until max_steps (or a target train loss); run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed_for("init"))
X = rng.normal(size=(300, 10))
y = X @ rng.normal(size=10) + rng.normal(scale=0.7, size=300)
w, step, loss = np.zeros(10), 0, np.inf
while step < cfg.max_steps and loss > cfg.target:
    step += 1
    w -= cfg.lr * X[:200].T @ (X[:200] @ w - y[:200]) / 200
    loss = float(np.mean((X[:200] @ w - y[:200]) ** 2))
    if step % 5 == 0:
        run.log(step, train_mse=loss)
run.finish(val_mse=float(np.mean((X[200:] @ w - y[200:]) ** 2)), steps=step)
