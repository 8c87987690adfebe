"""SGD with its own resumable checkpoint (a pickle every 10 steps); run API."""
import os
import pickle

import numpy as np

import sweeper

run = sweeper.init()
cfg = run.config
ckpt = os.path.join("ckpt", "state.pkl")
rng = run.numpy_rng("data_order")
data = np.random.default_rng(6)
X = data.normal(size=(300, 5))
y = X @ data.normal(size=5) + data.normal(scale=0.5, size=300)
w, start = np.zeros(5), 0
if os.path.exists(ckpt):
    with open(ckpt, "rb") as f:
        w, start = pickle.load(f)
for step in range(start + 1, cfg.steps + 1):
    i = rng.integers(0, 200, size=8)
    w -= cfg.lr * X[i].T @ (X[i] @ w - y[i]) / 8
    if step % 10 == 0:
        os.makedirs(os.path.dirname(ckpt), exist_ok=True)
        with open(ckpt, "wb") as f:
            pickle.dump((w, step), f)
        run.log(step, train_mse=float(np.mean((X[:200] @ w - y[:200]) ** 2)))
run.finish(val_mse=float(np.mean((X[200:] @ w - y[200:]) ** 2)), steps=cfg.steps)
