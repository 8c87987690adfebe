"""Random features of a given width with an SGD readout; run API with named seed streams."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
init = run.numpy_rng("init")
order = run.numpy_rng("data_order")
data = np.random.default_rng(15)
X = data.normal(size=(300, 4))
y = np.cos(X[:, 0]) + X[:, 1] + data.normal(scale=0.2, size=300)
P = init.normal(size=(4, cfg.width)) / 2
H = np.tanh(X @ P)
w = np.zeros(cfg.width)
for step in range(1, 61):
    i = order.integers(0, 200, size=16)
    w -= 0.2 * H[i].T @ (H[i] @ w - y[i]) / 16
    if step % 20 == 0:
        run.log(step, train_mse=float(np.mean((H[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((H[200:] @ w - y[200:]) ** 2)), steps=60)
