"""Polynomial regression on features from mylib.feats; run API."""
import numpy as np
from mylib.feats import expand

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed_for("init"))
x = rng.uniform(-1, 1, 150)
y = np.cos(2 * x) + rng.normal(scale=0.2, size=150)
F = expand(x, cfg.degree)
w = np.zeros(cfg.degree + 1)
for step in range(1, 101):
    w -= 0.3 * F[:100].T @ (F[:100] @ w - y[:100]) / 100
    if step % 25 == 0:
        run.log(step, train_mse=float(np.mean((F[:100] @ w - y[:100]) ** 2)))
run.finish(val_mse=float(np.mean((F[100:] @ w - y[100:]) ** 2)), steps=100)
