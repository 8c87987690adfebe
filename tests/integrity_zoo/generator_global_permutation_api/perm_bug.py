"""A linear model initialised and trained by SGD over a permutation per epoch; run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
np.random.seed(run.seed_for("init") % 2**32)
order = run.numpy_rng("data_order")
data = np.random.default_rng(16)
X = data.normal(size=(200, 8))
y = X @ data.normal(size=8) + data.normal(scale=0.5, size=200)
w = np.random.randn(8) * cfg.init_scale
for epoch in range(1, 4):
    for start in range(0, 150, 10):
        i = np.random.permutation(150)[:10]
        w -= 0.05 * X[i].T @ (X[i] @ w - y[i]) / 10
    run.log(epoch, train_mse=float(np.mean((X[:150] @ w - y[:150]) ** 2)))
run.finish(val_mse=float(np.mean((X[150:] @ w - y[150:]) ** 2)), steps=3)
