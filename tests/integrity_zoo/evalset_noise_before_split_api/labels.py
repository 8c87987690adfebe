"""Label-noise robustness: flip a share of the labels, fit logistic regression; run API with eval_fingerprint."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
data = np.random.default_rng(21)
X = data.normal(size=(500, 5))
y = (X @ np.array([1.0, -1.0, 0.5, 0.5, 0.0]) > 0).astype(float)
noise = run.numpy_rng("data_order")
flip = noise.random(500) < cfg.flip
y_train = np.where(flip, 1 - y, y)[:400]
y_val = y[400:]
run.eval_fingerprint({"x": X[400:], "y": y_val})
w = run.numpy_rng("init").normal(scale=0.1, size=5)
for step in range(1, 51):
    p = 1 / (1 + np.exp(-X[:400] @ w))
    w -= 0.5 * X[:400].T @ (p - y_train) / 400
    if step % 10 == 0:
        run.log(step, train_err=float(np.mean((p > 0.5) != y_train)))
run.finish(val_err=float(np.mean(((X[400:] @ w) > 0) != y_val)), steps=50)
