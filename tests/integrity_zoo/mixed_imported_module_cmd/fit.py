"""Robust linear regression (Huber loss from lossfn.py) against squared loss; JSON out."""
import json
import sys

import numpy as np
from lossfn import huber_grad

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, robust = int(a["seed"]), a["robust"] == "true"
rng = np.random.default_rng(seed)
X = rng.normal(size=(200, 3))
y = X @ np.array([1.0, -1.0, 2.0]) + rng.standard_t(2, size=200)
w = np.zeros(3)
for step in range(1, 81):
    e = X[:150] @ w - y[:150]
    w -= 0.05 * X[:150].T @ (huber_grad(e) if robust else e) / 150
    if step % 20 == 0:
        print(json.dumps({"step": step, "train_mae": float(np.mean(np.abs(e)))}))
print(json.dumps({"val_mae": float(np.mean(np.abs(X[150:] @ w - y[150:])))}))
