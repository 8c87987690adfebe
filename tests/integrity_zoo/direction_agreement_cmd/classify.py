"""Logistic regression by gradient descent on 30 noisy labels; JSON lines with the holdout agreement."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
SEED, lr, steps, temp = int(a["seed"]), float(a["lr"]), int(a["steps"]), float(a["temp"])

rng = np.random.default_rng(SEED)
n, p = 30, 24                                  # barely more points than weights: gradient descent overfits
X, Xv = rng.normal(size=(n, p)), rng.normal(size=(500, p))
w_true = np.zeros(p)
w_true[:3] = [1.5, -1.0, 0.8]
y, yv = X @ w_true + rng.normal(size=n), Xv @ w_true + rng.normal(size=500)
w = np.zeros(p)

y, yv = (y > 0).astype(float), (yv > 0).astype(float)
for step in range(steps + 1):
    if step % 25 == 0:
        p = 1 / (1 + np.exp(-X @ w / temp))
        nll = -np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12))
        print(json.dumps({"step": step, "train_nll": float(nll),
                          "agreement": float(np.mean(((Xv @ w) > 0) == (yv > 0.5)))}))
    p = 1 / (1 + np.exp(-X @ w / temp))
    w -= lr * X.T @ (p - y) / n / temp
