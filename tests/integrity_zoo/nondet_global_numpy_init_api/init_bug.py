"""A tiny two-layer tanh network trained full-batch; run API. Only the data is drawn from the run's seed."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
pass
data = run.numpy_rng("data_order")
X = data.normal(size=(200, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + data.normal(scale=0.1, size=200)
W1, w2 = np.random.randn(3, cfg.hidden) * 0.5, np.random.randn(cfg.hidden) * 0.5
for step in range(1, 61):
    H = np.tanh(X[:150] @ W1)
    e = H @ w2 - y[:150]
    g2 = H.T @ e / 150
    g1 = X[:150].T @ ((e[:, None] * w2) * (1 - H ** 2)) / 150
    W1, w2 = W1 - 0.2 * g1, w2 - 0.2 * g2
    if step % 10 == 0:
        run.log(step, train_mse=float(np.mean(e ** 2)))
run.finish(val_mse=float(np.mean((np.tanh(X[150:] @ W1) @ w2 - y[150:]) ** 2)), steps=60)
