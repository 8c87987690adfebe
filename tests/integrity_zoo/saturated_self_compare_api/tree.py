"""Decision stumps boosted a few rounds (numpy); run API, val_acc at the end."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
X = rng.normal(size=(400, 3))
y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=400) > 0, 1.0, -1.0)
F = np.zeros(400)
for r in range(1, cfg.rounds + 1):
    res = y - np.tanh(F)
    j = r % 3
    t = np.median(X[:300, j])
    left = X[:, j] <= t
    F += cfg.shrink * np.where(left, res[:300][left[:300]].mean(), res[:300][~left[:300]].mean())
    run.log(r, train_mse=float(np.mean((y[:300] - np.tanh(F[:300])) ** 2)))
pred = np.sign(F[300:])
run.finish(val_acc=float(np.mean(pred == y[300:])), steps=cfg.rounds)
