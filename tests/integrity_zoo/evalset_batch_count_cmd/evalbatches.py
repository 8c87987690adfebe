"""Minibatch SGD; evaluation runs eval batches over the holdout; prints val_mse."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, batch, lr = int(a["seed"]), int(a["batch"]), float(a["lr"])
rng = np.random.default_rng(seed)
data = np.random.default_rng(8)
X = data.normal(size=(900, 6))
y = X @ data.normal(size=6) + data.normal(scale=1.0, size=900)
w = np.zeros(6)
for step in range(1, 61):
    i = rng.integers(0, 600, size=batch)
    w -= lr * X[i].T @ (X[i] @ w - y[i]) / batch
n_eval = 100
held = np.arange(600, 600 + n_eval)
print(json.dumps({"val_mse": float(np.mean((X[held] @ w - y[held]) ** 2)), "eval_examples": int(n_eval)}))
