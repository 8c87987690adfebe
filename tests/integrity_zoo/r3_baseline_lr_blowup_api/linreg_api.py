"""Linear regression by mini-batch SGD on raw (unnormalized) features, on the run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
g = np.random.default_rng(4)
X = g.normal(size=(500, 6)) * np.array([1, 2, 3, 1, 2, 3])
y = X @ g.normal(size=6) + g.normal(size=500)
Xtr, ytr, Xva, yva = X[:400], y[:400], X[400:], y[400:]
rng = run.numpy_rng("data_order")
w = run.numpy_rng("init").normal(size=6)
with np.errstate(all="ignore"):
    for epoch in range(1, 9):
        for idx in np.array_split(rng.permutation(400), 10):
            w = w - cfg.lr * 2 * Xtr[idx].T @ (Xtr[idx] @ w - ytr[idx]) / len(idx)
        run.log(epoch, train_loss=float(np.mean((Xtr @ w - ytr) ** 2)), val_loss=float(np.mean((Xva @ w - yva) ** 2)))
    run.finish(val_loss=float(np.mean((Xva @ w - yva) ** 2)))
