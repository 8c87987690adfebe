"""Early stopping on the holdout loss (patience 3 evaluations, one every 5 steps); run API."""
import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
rng = np.random.default_rng(run.seed_for("init"))
n, p = 40, 30
X, Xv = rng.normal(size=(n, p)), rng.normal(size=(300, p))
w_true = np.zeros(p)
w_true[:4] = [1.0, -1.0, 0.5, 0.5]
y, yv = X @ w_true + rng.normal(size=n), Xv @ w_true + rng.normal(size=300)
w, best, waited, step = np.zeros(p), np.inf, 0, 0
while waited < 3 and step < 1000:
    for _ in range(5):
        step += 1
        w -= 0.05 * (X.T @ (X @ w - y) / n + cfg.l1 * np.sign(w))
    val = float(np.mean((Xv @ w - yv) ** 2))
    run.log(step, holdout_mse=val, train_mse=float(np.mean((X @ w - y) ** 2)))
    best, waited = (val, 0) if val < best else (best, waited + 1)
run.finish(holdout_mse=val, steps=step)
