"""Augmented minibatch SGD: each epoch visits the data with `copies` jittered copies; run API, step = epoch."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
data = np.random.default_rng(3)
X = data.normal(size=(200, 6))
y = X @ data.normal(size=6) + data.normal(scale=0.5, size=200)
w, updates = np.zeros(6), 0
for epoch in range(1, cfg.epochs + 1):
    rows = np.tile(rng.permutation(150), cfg.copies)
    for start in range(0, len(rows), 10):
        i = rows[start:start + 10]
        xb = X[i] + rng.normal(scale=0.1 * (cfg.copies > 1), size=(len(i), 6))
        w -= cfg.lr * xb.T @ (xb @ w - y[i]) / len(i)
        updates += 1
    run.log(epoch, train_mse=float(np.mean((X[:150] @ w - y[:150]) ** 2)))
run.finish(val_mse=float(np.mean((X[150:] @ w - y[150:]) ** 2)), steps=updates)
