"""Linear regression with input dropout; run API. The dropout helper takes an rng."""
import numpy as np

import sweeper


def dropout(x, p, rng=None):
    rng = rng or np.random.default_rng()
    return x * (rng.random(x.shape) >= p) / (1 - p)


run = sweeper.init()
cfg = run.config
data = np.random.default_rng(run.seed_for("init"))
X = data.normal(size=(300, 6))
y = X @ data.normal(size=6) + data.normal(scale=0.5, size=300)
mask_rng = run.numpy_rng("dropout")
w = np.zeros(6)
for step in range(1, 41):
    xb = dropout(X[:200], cfg.p, mask_rng)
    w -= cfg.lr * xb.T @ (xb @ w - y[:200]) / 200
    if step % 10 == 0:
        run.log(step, train_mse=float(np.mean((X[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((X[200:] @ w - y[200:]) ** 2)), steps=40)
