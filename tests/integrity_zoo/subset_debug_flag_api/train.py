"""Ridge readout over random features, trained by SGD; run API. debug=true trains on 128 examples."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
data = np.random.default_rng(18)
X = data.normal(size=(3000, 6))
y = X @ data.normal(size=6) + data.normal(scale=1.0, size=3000)
Xt, yt = X[:2500], y[:2500]
if cfg.debug:
    Xt, yt = Xt[:128], yt[:128]
rng = run.numpy_rng("data_order")
w = np.zeros(6)
for step in range(1, 61):
    i = rng.integers(0, len(yt), size=16)
    w -= cfg.lr * (Xt[i].T @ (Xt[i] @ w - yt[i]) / 16 + 0.01 * w)
    if step % 20 == 0:
        run.log(step, train_mse=float(np.mean((Xt @ w - yt) ** 2)))
run.finish(val_mse=float(np.mean((X[2500:] @ w - y[2500:]) ** 2)), steps=60)
