"""Linear regression by gradient descent, 24 weights on 30 noisy points: it fits the noise late (overfits)."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
SEED, lr, steps, l2 = int(a["seed"]), float(a["lr"]), int(a["steps"]), float(a["l2"])

rng = np.random.default_rng(SEED)
n, p = 30, 24                                  # barely more points than weights: gradient descent overfits
X, Xv = rng.normal(size=(n, p)), rng.normal(size=(500, p))
w_true = np.zeros(p)
w_true[:3] = [1.5, -1.0, 0.8]
y, yv = X @ w_true + rng.normal(size=n), Xv @ w_true + rng.normal(size=500)
w = np.zeros(p)

for step in range(steps + 1):
    if step % 20 == 0:
        print(json.dumps({"step": step, "train_mse": float(np.mean((X @ w - y) ** 2)),
                          "val_mse": float(np.mean((Xv @ w - yv) ** 2))}))
    w -= lr * (X.T @ (X @ w - y) / n + l2 * w)
