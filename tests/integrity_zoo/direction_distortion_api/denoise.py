"""Gradient descent on a noisy linear inverse problem, run API; logs its loss and the holdout distortion."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
SEED = run.seed_for("init")

rng = np.random.default_rng(SEED)
n, p = 30, 24                                  # barely more points than weights: gradient descent overfits
X, Xv = rng.normal(size=(n, p)), rng.normal(size=(500, p))
w_true = np.zeros(p)
w_true[:3] = [1.5, -1.0, 0.8]
y, yv = X @ w_true + rng.normal(size=n), Xv @ w_true + rng.normal(size=500)
w = np.zeros(p)

for step in range(cfg.steps + 1):
    if step % 25 == 0:
        run.log(step, loss=float(np.mean((X @ w - y) ** 2)), distortion=float(np.mean((Xv @ w - yv) ** 2)))
    w -= cfg.lr * (X.T @ (X @ w - y) / n) * cfg.damping
run.finish(distortion=float(np.mean((Xv @ w - yv) ** 2)), steps=cfg.steps)
