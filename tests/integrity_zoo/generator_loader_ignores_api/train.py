"""Epochs of minibatch SGD through loader.Loader; run API."""
import numpy as np
from loader import Loader

import sweeper

run = sweeper.init()
cfg = run.config
data = np.random.default_rng(run.seed_for("init"))
X = data.normal(size=(240, 5))
y = X @ data.normal(size=5) + data.normal(scale=0.5, size=240)
batches = Loader(160, cfg.batch, rng=run.numpy_rng("data_order"), shuffle=True)
w = np.zeros(5)
for epoch in range(1, 4):
    for i in batches:
        w -= 0.05 * X[i].T @ (X[i] @ w - y[i]) / len(i)
    run.log(epoch, train_mse=float(np.mean((X[:160] @ w - y[:160]) ** 2)))
run.finish(val_mse=float(np.mean((X[160:] @ w - y[160:]) ** 2)), steps=3)
