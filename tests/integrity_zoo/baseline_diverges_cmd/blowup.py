"""Full-batch gradient descent on a linear model; prints val_mse (inf or nan when it blows up)."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr = int(a["seed"]), float(a["lr"])
rng = np.random.default_rng(seed)
X = rng.normal(size=(120, 6)) * np.array([1, 1, 1, 2, 3, 4])
y = X @ rng.normal(size=6) + rng.normal(scale=0.5, size=120)
w = np.zeros(6)
with np.errstate(all="ignore"):
    for step in range(1, 201):
        w -= lr * X[:90].T @ (X[:90] @ w - y[:90]) / 90
        if step % 40 == 0:
            print(json.dumps({"step": step, "train_mse": float(np.mean((X[:90] @ w - y[:90]) ** 2))}))
    print(json.dumps({"val_mse": float(np.mean((X[90:] @ w - y[90:]) ** 2))}))
