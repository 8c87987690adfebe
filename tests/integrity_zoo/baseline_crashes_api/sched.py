"""SGD with a learning-rate schedule picked by name; run API."""
import math

import numpy as np

import sweeper

SCHEDULES = {
    "constant": lambda t, T: 1.0,
    "step": lambda t, T: 0.3 if t > T // 2 else 1.0,
    "cosine": lambda t, T: 0.5 * (1 + math.cos(math.pi * t / T)),
}
run = sweeper.init()
cfg = run.config
rng = run.numpy_rng("data_order")
data = np.random.default_rng(2)
X = data.normal(size=(300, 4))
y = X @ np.array([1.0, 2.0, -1.0, 0.5]) + data.normal(scale=0.5, size=300)
w = np.zeros(4)
for t in range(1, cfg.steps + 1):
    i = rng.integers(0, 200, size=8)
    w -= cfg.lr * SCHEDULES[cfg.sched](t, cfg.steps) * X[i].T @ (X[i] @ w - y[i]) / 8
    if t % 10 == 0:
        run.log(t, train_mse=float(np.mean((X[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((X[200:] @ w - y[200:]) ** 2)), steps=cfg.steps)
