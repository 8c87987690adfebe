"""Full-batch gradient descent on a linear model; JSON lines with the train and validation MSE."""
import json
import sys

import numpy as np

a = dict(s[2:].split("=", 1) for s in sys.argv[1:])   # --key=value, every run-config key
seed, lr, steps = int(a["seed"]), float(a["lr"]), int(a["steps"])
rng = np.random.default_rng(seed)
X = rng.normal(size=(300, 6))
y = X @ rng.normal(size=6) + rng.normal(scale=0.5, size=300)
idx, n_tr = rng.permutation(300), 200
tr, va = idx[:n_tr], idx[n_tr:]
mse = lambda w, rows: float(np.mean((X[rows] @ w - y[rows]) ** 2))   # noqa: E731
w = np.zeros(6)
for step in range(1, steps + 1):
    w -= lr * X[tr].T @ (X[tr] @ w - y[tr]) / n_tr
    if step % 5 == 0:
        print(json.dumps({"step": step, "train_mse": mse(w, tr), "val_mse": mse(w, va)}))
